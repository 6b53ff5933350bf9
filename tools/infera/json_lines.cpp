#include "json_lines.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_limits.h"
#include "infera/error.h"

namespace infera::cli {
namespace {

using nlohmann::json;

std::string where(std::size_t line_no) { return "stdin line " + std::to_string(line_no); }

json parse_line(std::string_view line, std::size_t line_no) {
  return parse_json_capped<json, InvalidArgument>(line, where(line_no));
}

}  // namespace

bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

TextRequest parse_text_request(std::string_view line, std::size_t line_no) {
  const json j = parse_line(line, line_no);
  const auto text = j.is_object() ? j.find("text") : j.end();
  const auto pair = j.is_object() ? j.find("text_pair") : j.end();
  if (!j.is_object() || text == j.end() || !text->is_string() ||
      (pair != j.end() && !pair->is_string()))
    throw InvalidArgument(where(line_no) +
                          ": expected an object with a string field \"text\" (and optionally "
                          "a string field \"text_pair\")");
  TextRequest r{text->get<std::string>(), std::nullopt};
  if (pair != j.end()) r.text_pair = pair->get<std::string>();
  return r;
}

std::vector<int32_t> parse_ids_request(std::string_view line, std::size_t line_no) {
  const json j = parse_line(line, line_no);
  const auto bad = [&] {
    return InvalidArgument(where(line_no) +
                           ": expected an object with an integer array field \"ids\"");
  };
  if (!j.is_object()) throw bad();
  const auto ids_field = j.find("ids");
  if (ids_field == j.end() || !ids_field->is_array()) throw bad();
  std::vector<int32_t> ids;
  ids.reserve(ids_field->size());
  constexpr int64_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (const auto& v : *ids_field) {
    if (!v.is_number_integer()) throw bad();  // floats ("1.0") and integers past 2^64 included
    // Unsigned values are compared as unsigned: above 2^63 they do not fit int64_t.
    const bool in_range = v.is_number_unsigned()
                              ? v.get<uint64_t>() <= static_cast<uint64_t>(kMax)
                              : v.get<int64_t>() >= kMin && v.get<int64_t>() <= kMax;
    if (!in_range)
      throw InvalidArgument(where(line_no) + ": token id " + v.dump() + " is out of range");
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  return ids;
}

}  // namespace infera::cli
