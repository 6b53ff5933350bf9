// Small accessors for tokenizer.json that turn a missing or mistyped field into a FormatError
// naming the component and the field, instead of nlohmann's generic type_error.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "infera/error.h"

namespace infera::tok {

using json = nlohmann::json;

inline const json& require_field(const json& j, const char* key, std::string_view where) {
  if (!j.is_object()) throw FormatError(std::string(where) + ": expected a JSON object");
  auto it = j.find(key);
  if (it == j.end()) throw FormatError(std::string(where) + ": missing field '" + key + "'");
  return *it;
}

inline std::string require_string(const json& j, const char* key, std::string_view where) {
  const json& v = require_field(j, key, where);
  if (!v.is_string())
    throw FormatError(std::string(where) + ": field '" + key + "' must be a string");
  return v.get<std::string>();
}

// Optional boolean: absent or null means `fallback`.
inline bool optional_bool(const json& j, const char* key, bool fallback, std::string_view where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    throw FormatError(std::string(where) + ": field '" + key + "' must be a boolean");
  return it->get<bool>();
}

inline std::string component_type(const json& j, std::string_view where) {
  return require_string(j, "type", where);
}

// Token ids index dense id -> token tables, so a file may not name ids far beyond the tokens it
// defines: one id near 2^24 in a tiny file would otherwise allocate hundreds of MB for nothing.
// Real vocabularies are dense, with small holes (between the model's vocab and its added tokens);
// allowing two ids per token plus 65,536 keeps every table within a constant factor of the file.
inline void check_id_density(int64_t max_id, std::size_t tokens, std::string_view where) {
  const int64_t limit = 2 * static_cast<int64_t>(tokens) + 65536;
  if (max_id >= limit)
    throw FormatError(
        std::string(where) + ": token id " + std::to_string(max_id) + " is far beyond the " +
        std::to_string(tokens) +
        " tokens defined (ids must stay below 2 x tokens + 65536 = " + std::to_string(limit) + ")");
}

}  // namespace infera::tok
