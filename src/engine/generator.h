// The generation loop for one sequence: prefill the prompt in chunks, then decode one token at a
// time over the model's KV cache, sampling each next token, until a stop id or the token limit.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/causal_lm.h"
#include "sample/sampler.h"

namespace infera {

struct GenerationRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 256;
  SamplingParams sampling;
  std::vector<int32_t> stop_ids;  // generation ends after emitting one of these (it is kept)
  int64_t prefill_chunk = 512;    // bounds activation memory for long prompts
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t decode_steps = 0;      // forward passes after the prefill
  double prefill_seconds = 0.0;  // prompt forward passes + first sample
  double decode_seconds = 0.0;   // everything after the first token
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (the prompt excluded)
  std::string finish_reason;    // "stop" (a stop id), "length" (max tokens), "cancelled"
  GenerationStats stats;
};

class Generator {
 public:
  explicit Generator(CausalLM& model) : model_(model) {}

  // `on_token` sees each new id as soon as it is sampled; returning false stops generation.
  GenerationResult generate(const GenerationRequest& request,
                            const std::function<bool(int32_t)>& on_token = {});

 private:
  CausalLM& model_;
};

}  // namespace infera
