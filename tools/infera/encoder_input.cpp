#include "encoder_input.h"

#include <nlohmann/json.hpp>

#include "core/json_limits.h"
#include "infera/error.h"

namespace infera::cli {
namespace {

using Json = nlohmann::json;

std::vector<std::vector<int32_t>> rows(Json v, const std::string& origin, const char* what) {
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) v = Json::array({v});
  if (!v.is_array() || v.empty())
    throw FormatError(origin + ": " + what + " must be a non-empty list of lists of token ids");
  std::vector<std::vector<int32_t>> out;
  for (const Json& row : v) {
    if (!row.is_array() || row.empty())
      throw FormatError(origin + ": " + what + " rows must be non-empty lists");
    std::vector<int32_t> ids;
    for (const Json& id : row) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        throw FormatError(origin + ": " + what + " holds " + id.dump() + ", not a token id");
      ids.push_back(id.get<int32_t>());
    }
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace

EncoderIdsFile parse_encoder_ids(std::string_view text, const std::string& origin) {
  const Json j = parse_json_capped<Json>(text, origin);
  EncoderIdsFile f;
  if (!j.is_object()) {
    f.input_ids = rows(j, origin, "the file");
    return f;
  }
  if (!j.contains("input_ids")) throw FormatError(origin + ": the object has no input_ids");
  f.input_ids = rows(j["input_ids"], origin, "input_ids");
  if (!j.contains("attention_mask")) return f;
  f.attention_mask = rows(j["attention_mask"], origin, "attention_mask");
  const size_t width = f.input_ids[0].size();
  bool same = f.attention_mask.size() == f.input_ids.size();
  for (size_t b = 0; same && b < f.input_ids.size(); ++b)
    same = f.input_ids[b].size() == width && f.attention_mask[b].size() == width;
  if (!same)
    throw FormatError(origin +
                      ": input_ids and attention_mask must be rows of one length, as many of each");
  return f;
}

}  // namespace infera::cli
