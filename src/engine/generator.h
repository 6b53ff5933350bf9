// The generation loop: any number of independent requests driven through one model step loop.
// Each step schedules every running request's next decode token and fills the rest of a token
// budget with prompt chunks (chunked prefill), runs them as one batch over the paged KV cache,
// and samples each request that produced logits with its own sampler and stop conditions.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
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
  int64_t prefill_chunk = 512;    // most prompt tokens of this request in one step
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t decode_steps = 0;      // forward passes after the first token
  double prefill_seconds = 0.0;  // admission to the first token (prompt passes + first sample)
  double decode_seconds = 0.0;   // everything after the first token
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // generated ids (the prompt excluded)
  std::string finish_reason;    // "stop" (a stop id), "length" (max tokens/context), "cancelled"
  GenerationStats stats;
};

struct GeneratorOptions {
  int64_t block_size = 32;         // KV cache tokens per block
  DType kv_dtype = DType::F32;     // KV cache storage: F32, BF16 or F16
  int64_t max_batch_tokens = 512;  // rows per forward pass (decode tokens + prompt chunks)
  // Blocks in the cache; 0: enough for every request at once, within max_kv_bytes. Requests that
  // do not fit wait (first come, first served) until earlier ones finish and free their blocks.
  int64_t num_blocks = 0;
  int64_t max_kv_bytes = int64_t{8} << 30;
  // When every request that samples in a step is plain greedy (temperature <= 0, no penalties),
  // pick its tokens with CausalLM::forward_argmax: on a GPU only the ids cross to the host, not
  // [rows, vocab] logits. Same tokens as the sampler's greedy path; false always samples on the
  // host (tests compare the two).
  bool device_greedy = true;
  // When every request that samples in a step is free of penalties (repetition, presence,
  // frequency: they read the token history) and the backend samples (supports(Op::SampleRows)),
  // sample on the backend with CausalLM::forward_sample: each request's own Sampler supplies the
  // uniform numbers, so the tokens are the host sampler's for the same seed. False always samples
  // on the host.
  bool device_sampling = true;
};

class Generator {
 public:
  explicit Generator(CausalLM& model, GeneratorOptions options = {});

  // One request; `on_token` sees each new id as soon as it is sampled; false cancels.
  GenerationResult generate(const GenerationRequest& request,
                            const std::function<bool(int32_t)>& on_token = {});

  // Many requests through one step loop; results in request order. `on_token(i, id)` sees
  // request i's ids as they are sampled; returning false cancels that request alone. Every
  // request is validated before any work starts (an invalid one is an InvalidArgument naming it).
  std::vector<GenerationResult> generate(std::span<const GenerationRequest> requests,
                                         const std::function<bool(size_t, int32_t)>& on_token = {});

  const GeneratorOptions& options() const { return options_; }

 private:
  CausalLM& model_;
  GeneratorOptions options_;
};

}  // namespace infera
