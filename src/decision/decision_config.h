// decision_config.json of a `decision-model/1` checkpoint (specs/decision-model.md): the head
// layers' shape, the action names and the special ids the request layout uses. Every field is
// checked on load; errors name the file and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infera/tensor.h"
#include "io/hf_config.h"

namespace infera::decision {

struct DecisionConfig {
  int64_t num_head_layers = 0, head_mlp_ratio = 0, action_hidden = 0, max_length = 0;
  double head_rope_theta = 0;
  std::vector<std::string> actions;  // output order
  int32_t marker_token_id = -1, cls_token_id = -1, sep_token_id = -1, pad_token_id = -1;
  // The action head's activation dtype: optional `action_dtype` ("float32", default, or
  // "bfloat16"). Never taken from the head's weight storage type.
  DType action_dtype = DType::F32;

  // `vocab` bounds the token ids, `max_positions` bounds max_length (the encoder's
  // max_position_embeddings).
  static DecisionConfig from(const io::HfConfig& json, int64_t vocab, int64_t max_positions);
};

}  // namespace infera::decision
