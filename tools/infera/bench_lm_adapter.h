// The one place `infera bench` touches a causal LM: how a sequence is started, prefilled and
// decoded, and what each of those costs in bytes and FLOPs. The engine core is being reworked
// (batch description, paged KV cache); porting the benchmark means porting this file only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "model/causal_lm.h"
#include "sample/sampler.h"

namespace infera::cli {

// Seconds spent in each stage of one request (stages a backend does not have stay 0).
struct StageSeconds {
  double prepare = 0;      // sequence and cache set-up, input ids
  double forward = 0;      // the model's forward passes
  double postprocess = 0;  // turning logits into a token (greedy sampling)
  double total() const { return prepare + forward + postprocess; }
};

// What one token costs the model, to put measured speed against the machine's limits.
struct LmCostModel {
  double weight_bytes_per_decode_token = 0;  // every weight streamed once per decode step
  double kv_bytes_per_position = 0;          // K and V of one position, all layers
  double flops_per_token = 0;                // 2 x weights used per prompt token (no LM head)
  double lm_head_flops = 0;                  // 2 x vocab x hidden, once per sampled token
  double attention_flops_per_pair = 0;       // QK^T + PV for one (query, key) pair, all layers
  // FLOPs of prefilling `n` tokens after `start` cached ones, logits of the last row only.
  double prefill_flops(int64_t n, int64_t start = 0) const;
  // Bytes read by one decode step that attends to `context` positions.
  double decode_bytes(int64_t context) const;
};

// The cost model of `info` run by this engine with a KV cache of `kv_dtype`.
LmCostModel make_lm_cost_model(const ModelInfo& info, DType kv_dtype);

struct BenchModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> model;
  double load_seconds = 0;  // backend start + weights (read, or generated with dummy weights)
};

// Loads the model in `dir` on a CPU backend of `threads` threads (> 0), timed.
BenchModel load_bench_model(const std::filesystem::path& dir, const LoadOptions& options,
                            int threads);

class LmBenchAdapter {
 public:
  explicit LmBenchAdapter(CausalLM& model);

  // Starts a new sequence with room for `capacity` positions, runs `prompt` through the model
  // in chunks of `chunk` tokens (as the generator does) and samples the first token greedily.
  StageSeconds run_prefill(std::span<const int32_t> prompt, int64_t capacity, int64_t chunk);
  // Continues the sequence by `steps` greedy decode steps; one StageSeconds per step.
  std::vector<StageSeconds> run_decode_steps(int64_t steps);
  // Releases the sequence's KV cache.
  void end_sequence();

  int64_t context_length() const { return cache_.length; }
  const std::vector<int32_t>& generated() const { return generated_; }  // this sequence's ids
  const LmCostModel& cost() const { return cost_; }

  // "Deterministic ids spread over the vocabulary", the same stand-in prompt as `run
  // --synthetic-prompt`: the text does not matter for speed.
  std::vector<int32_t> synthetic_prompt(int64_t n) const;

 private:
  CausalLM& model_;
  LmCostModel cost_;
  KvCache cache_;
  Sampler sampler_;
  std::vector<float> logits_;
  std::vector<int32_t> prompt_, generated_;
};

}  // namespace infera::cli
