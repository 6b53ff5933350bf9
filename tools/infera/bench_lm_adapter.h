// The one place `infera bench` touches a causal LM and the engine: how a sequence is started,
// prefilled and decoded (one sequence through the batch contract and the paged KV cache, as the
// generator runs a single request), and what each of those costs in bytes and FLOPs. When the
// engine's interfaces change, porting the benchmark means porting this file only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "model/causal_lm.h"
#include "sample/sampler.h"

namespace infera::cli {

// Seconds spent in each stage of one request (stages a backend does not have stay 0).
struct StageSeconds {
  double prepare = 0;      // KV cache and sequence set-up, building each step's batch
  double forward = 0;      // the model's forward passes
  double postprocess = 0;  // cache bookkeeping and turning logits into a token (greedy)
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

// The cost model of `info` run by this engine with a KV cache of `kv` shape in `kv_dtype`.
LmCostModel make_lm_cost_model(const ModelInfo& info, const KvShape& kv, DType kv_dtype);

struct BenchModel {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<CausalLM> model;
  double backend_seconds = 0;  // starting the backend (threads, device context)
  double load_seconds = 0;     // the weights: read and prepared, or generated (dummy weights)
};

// Starts the backend for `device` ("cpu", "cuda", "auto") with `threads` CPU threads, timed.
BenchModel start_bench_backend(const std::string& device, int threads,
                               const std::string& matmul_precision = "f32");
// Loads the model in `dir` on m.backend, timed.
void load_bench_model(BenchModel& m, const std::filesystem::path& dir, const LoadOptions& options);

// How the benchmark's sequence stores keys and values (the generator's options of the same name).
struct KvSettings {
  DType dtype = DType::F32;
  int64_t block_size = 32;
};

class LmBenchAdapter {
 public:
  explicit LmBenchAdapter(CausalLM& model, KvSettings kv = {});

  // Starts a new sequence with room for `capacity` positions, runs `prompt` through the model
  // in chunks of `chunk` tokens (as the generator does) and samples the first token greedily.
  StageSeconds run_prefill(std::span<const int32_t> prompt, int64_t capacity, int64_t chunk);
  // Continues the sequence by `steps` greedy decode steps; one StageSeconds per step.
  std::vector<StageSeconds> run_decode_steps(int64_t steps);
  // Releases the sequence's KV cache.
  void end_sequence();

  int64_t context_length() const { return cache_ ? cache_->length(seq_) : 0; }
  const std::vector<int32_t>& generated() const { return generated_; }  // this sequence's ids
  const LmCostModel& cost() const { return cost_; }

  // "Deterministic ids spread over the vocabulary", the same stand-in prompt as `run
  // --synthetic-prompt`: the text does not matter for speed.
  std::vector<int32_t> synthetic_prompt(int64_t n) const;

 private:
  // Runs `tokens` as one step of the sequence; logits of its last row when `want_logits`.
  void step(std::span<const int32_t> tokens, bool want_logits, StageSeconds& t);

  CausalLM& model_;
  KvSettings kv_;
  LmCostModel cost_;
  std::unique_ptr<KvCache> cache_;  // one sequence's cache, sized for it, as a request's would be
  SeqId seq_ = 0;
  int64_t capacity_ = 0;  // positions asked for (the blocks may hold a few more)
  Sampler sampler_;
  std::vector<float> logits_;
  std::vector<int32_t> prompt_, generated_;
};

}  // namespace infera::cli
