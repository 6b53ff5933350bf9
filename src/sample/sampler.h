// Turns one row of logits into a token id. Order and semantics follow Hugging Face
// transformers' logits processors: repetition penalty -> (presence/frequency penalty) ->
// temperature -> top-k -> top-p -> min-p -> softmax -> draw. temperature <= 0 means greedy; so
// does a temperature so small that the largest logit divided by it overflows float32 (see
// sampler.cpp for why that is the limit and not an approximation).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace infera {

struct SamplingParams {
  float temperature = 1.0f;         // <= 0, or max logit / temperature overflows: greedy
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off; HF semantics (divide positive, multiply negative)
  float presence_penalty = 0.0f;    // OpenAI semantics, over generated tokens
  float frequency_penalty = 0.0f;   // OpenAI semantics, over generated tokens
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0.0f; }
  // Throws InvalidArgument naming the field when a value is out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `logits` is modified in place (penalties, temperature, filtering). `prompt` and `generated`
  // are the token ids seen so far: the repetition penalty covers both (as HF does), presence and
  // frequency penalties only `generated`. Ids outside the vocabulary are ignored. On return
  // `logits` holds the processed scores (HF's scores_processed): filtered-out tokens are -inf.
  int32_t sample(std::span<float> logits, std::span<const int32_t> prompt,
                 std::span<const int32_t> generated);

  const SamplingParams& params() const { return params_; }

  // The uniform number in [0, 1) that the next draw of sample() would use, taken from this
  // sampler's stream: a device that samples (Backend::sample_rows) draws with it, so host and
  // device pick the same tokens from one seed. A device choice that did not use it (greedy after
  // all: see SampledId::drew) hands it back with unuse_uniform(), and the next draw takes it again.
  double next_uniform();
  void unuse_uniform();

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  uint64_t last_raw_ = 0;       // the raw output behind the last next_uniform()
  bool has_returned_ = false;   // last_raw_ was handed back: the next draw reuses it
  std::vector<int32_t> order_;  // scratch: candidate indices
  std::vector<float> weights_;  // scratch: weights of order_ / the top-k heap / saved survivors
};

// Index of the largest value; ties go to the lowest index (as torch.argmax).
int32_t argmax(std::span<const float> values);

}  // namespace infera
