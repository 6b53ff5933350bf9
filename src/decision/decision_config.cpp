#include "decision/decision_config.h"

#include <set>

#include "infera/error.h"

namespace infera::decision {

DecisionConfig DecisionConfig::from(const io::HfConfig& c, int64_t vocab, int64_t max_positions) {
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) throw FormatError(c.origin() + ": " + what);
  };
  check(c.json().is_object(), "must be a JSON object");
  static const std::set<std::string> kKnown = {
      "format",        "num_head_layers", "head_mlp_ratio",  "head_rope_theta",
      "action_hidden", "actions",         "marker_token_id", "cls_token_id",
      "sep_token_id",  "pad_token_id",    "max_length",      "action_dtype"};
  for (const auto& [key, value] : c.json().items())
    check(kKnown.count(key) > 0, "unknown field '" + key + "' (not part of decision-model/1)");
  check(c.has("format"), "field 'format' missing (expected \"decision-model/1\")");
  const std::string format = c.get_string_or("format", "");
  check(format == "decision-model/1",
        "format '" + format + "' is not supported (expected decision-model/1)");

  DecisionConfig d;
  d.num_head_layers = c.get_int("num_head_layers");
  d.head_mlp_ratio = c.get_int("head_mlp_ratio");
  d.action_hidden = c.get_int("action_hidden");
  d.max_length = c.get_int("max_length");
  check(d.num_head_layers <= 64, "num_head_layers must be in [1, 64]");
  check(d.head_mlp_ratio <= 64, "head_mlp_ratio must be in [1, 64]");
  check(d.action_hidden <= 65536, "action_hidden must be in [1, 65536]");
  check(d.max_length >= 4 && d.max_length <= max_positions,
        "max_length " + std::to_string(d.max_length) +
            " must be in [4, max_position_embeddings = " + std::to_string(max_positions) + "]");
  d.head_rope_theta = c.get_float("head_rope_theta");
  check(d.head_rope_theta > 1.0, "head_rope_theta must be > 1");

  check(c.has("actions") && c.json()["actions"].is_array(), "'actions' must be a list of names");
  const auto& actions = c.json()["actions"];
  check(!actions.empty() && actions.size() <= 1024, "'actions' must name 1 to 1024 actions");
  std::set<std::string> seen;
  for (const auto& a : actions) {
    check(a.is_string() && !a.get<std::string>().empty(), "'actions' entries must be names");
    check(seen.insert(a.get<std::string>()).second,
          "action '" + a.get<std::string>() + "' is listed twice");
    d.actions.push_back(a.get<std::string>());
  }
  auto id = [&](const char* key) { return static_cast<int32_t>(c.get_int_in(key, 0, vocab - 1)); };
  d.marker_token_id = id("marker_token_id");
  d.cls_token_id = id("cls_token_id");
  d.sep_token_id = id("sep_token_id");
  d.pad_token_id = id("pad_token_id");
  const std::set<int32_t> ids = {d.marker_token_id, d.cls_token_id, d.sep_token_id, d.pad_token_id};
  check(ids.size() == 4, "marker, cls, sep and pad token ids must be four different ids");
  const std::string dtype = c.get_string_or("action_dtype", "float32");
  check(dtype == "float32" || dtype == "bfloat16",
        "action_dtype '" + dtype + "' is not supported (float32 or bfloat16)");
  d.action_dtype = dtype == "bfloat16" ? DType::BF16 : DType::F32;
  return d;
}

}  // namespace infera::decision
