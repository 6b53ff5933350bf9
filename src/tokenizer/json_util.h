// Small accessors for tokenizer.json that turn a missing or mistyped field into a FormatError
// naming the component and the field, instead of nlohmann's generic type_error.
#pragma once

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

}  // namespace infera::tok
