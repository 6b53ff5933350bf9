#include "bench_lm_adapter.h"

#include <algorithm>

#include "backend/registry.h"
#include "bench/timer.h"
#include "engine/step.h"
#include "infera/error.h"

namespace infera::cli {

// Derives the cost model from the model's shape and how this engine runs it: weights read in
// place at their dtype, the KV cache in `kv_dtype`, logits only for the rows that are sampled,
// and an untied embedding table that is only gathered (one row per token), not streamed.
LmCostModel make_lm_cost_model(const ModelInfo& info, const KvShape& kv, DType kv_dtype) {
  LmCostModel c;
  const double weight_bytes = static_cast<double>(dtype_bytes(info.weight_dtype, 1));
  const double table = static_cast<double>(info.vocab) * static_cast<double>(info.hidden);
  const double params = static_cast<double>(info.parameters);
  // Tied: the embedding table is the LM head and is streamed once per decode step.
  if (info.weight_bytes > 0) {
    // The bytes as stored: GGUF files mix block types (Q4_K_M: Q4_K, Q6_K and F32 norms).
    c.weight_bytes_per_decode_token =
        static_cast<double>(info.weight_bytes) -
        (info.tied_embeddings ? 0.0 : static_cast<double>(info.embedding_bytes));
  } else {  // a ModelInfo filled by hand: every parameter at the weight dtype
    const double streamed = info.tied_embeddings ? params : params - table;
    c.weight_bytes_per_decode_token = streamed * weight_bytes;
  }
  // Everything but the embedding table(s) multiplies each prompt token (norm weights, ~0.01%
  // of the layer weights, are counted as if they were matmul weights).
  const double layer_params = params - (info.tied_embeddings ? table : 2 * table);
  c.flops_per_token = 2.0 * layer_params;
  c.lm_head_flops = 2.0 * table;
  c.kv_bytes_per_position = static_cast<double>(kv.bytes_per_token(kv_dtype));
  // Per query head: q.k (head_dim multiply-adds) and p * v (head_dim multiply-adds).
  c.attention_flops_per_pair =
      4.0 * static_cast<double>(info.layers * info.q_heads * info.head_dim);
  return c;
}

BenchModel start_bench_backend(const std::string& device, int threads,
                               const std::string& matmul_precision) {
  BenchModel m;
  bench::Stopwatch watch;
  m.backend =
      make_backend({.device = device, .threads = threads, .matmul_precision = matmul_precision});
  m.backend_seconds = watch.seconds();
  return m;
}

void load_bench_model(BenchModel& m, const std::filesystem::path& dir, const LoadOptions& options) {
  bench::Stopwatch watch;
  m.model = load_causal_lm(dir, *m.backend, options);
  m.backend->synchronize();
  m.load_seconds = watch.seconds();
}

double LmCostModel::prefill_flops(int64_t n, int64_t start) const {
  // Query i (0-based, after `start` cached positions) attends to start + i + 1 keys.
  const double pairs = static_cast<double>(n) * static_cast<double>(start) +
                       static_cast<double>(n) * static_cast<double>(n + 1) / 2.0;
  return flops_per_token * static_cast<double>(n) + lm_head_flops +
         attention_flops_per_pair * pairs;
}

double LmCostModel::decode_bytes(int64_t context) const {
  return weight_bytes_per_decode_token + kv_bytes_per_position * static_cast<double>(context);
}

LmBenchAdapter::LmBenchAdapter(CausalLM& model, KvSettings kv)
    : model_(model), kv_(kv), sampler_(SamplingParams{.temperature = 0.0f}) {
  cost_ = make_lm_cost_model(model_.info(), model_.kv_shape(), kv_.dtype);
  logits_.resize(static_cast<size_t>(model_.info().vocab));
}

std::vector<int32_t> LmBenchAdapter::synthetic_prompt(int64_t n) const {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i)
    ids.push_back(static_cast<int32_t>((1000 + i * 7919) % model_.info().vocab));
  return ids;
}

void LmBenchAdapter::step(std::span<const int32_t> tokens, bool want_logits, StageSeconds& t) {
  bench::Stopwatch watch;
  const SeqChunk chunk{seq_, tokens, want_logits ? OutputRows::Last : OutputRows::None};
  const BatchDesc batch = build_batch(*cache_, std::span<const SeqChunk>(&chunk, 1));
  t.prepare += watch.lap();
  model_.forward(batch, cache_->pool(),
                 want_logits ? std::span<float>(logits_) : std::span<float>());
  model_.backend().synchronize();
  t.forward += watch.lap();
  cache_->commit(seq_, static_cast<int64_t>(tokens.size()));
  if (want_logits) generated_.push_back(sampler_.sample(logits_, prompt_, generated_));
  t.postprocess += watch.lap();
}

StageSeconds LmBenchAdapter::run_prefill(std::span<const int32_t> prompt, int64_t capacity,
                                         int64_t chunk) {
  const auto n = static_cast<int64_t>(prompt.size());
  if (n == 0) throw InvalidArgument("bench: empty prompt");
  if (capacity < n) throw InvalidArgument("bench: KV cache smaller than the prompt");
  StageSeconds t;
  bench::Stopwatch watch;
  end_sequence();
  cache_ = std::make_unique<KvCache>(
      model_.backend(), model_.kv_shape(),
      KvCacheConfig{.block_size = kv_.block_size,
                    .num_blocks = (capacity + kv_.block_size - 1) / kv_.block_size,
                    .dtype = kv_.dtype});
  seq_ = cache_->add_sequence();
  if (!cache_->reserve(seq_, capacity)) throw Error("bench: KV cache reservation failed");
  capacity_ = capacity;
  prompt_.assign(prompt.begin(), prompt.end());
  generated_.clear();
  t.prepare = watch.lap();
  chunk = std::max<int64_t>(chunk, 1);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t rows = std::min(chunk, n - begin);
    step(prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(rows)), begin + rows == n,
         t);
  }
  return t;
}

std::vector<StageSeconds> LmBenchAdapter::run_decode_steps(int64_t steps) {
  if (!cache_ || generated_.empty()) throw InvalidArgument("bench: decode before prefill");
  if (cache_->length(seq_) + steps > capacity_)
    throw InvalidArgument("bench: " + std::to_string(steps) +
                          " decode steps exceed the KV cache capacity");
  std::vector<StageSeconds> out(static_cast<size_t>(steps));
  for (StageSeconds& t : out) step(std::span<const int32_t>(&generated_.back(), 1), true, t);
  return out;
}

void LmBenchAdapter::end_sequence() { cache_.reset(); }

}  // namespace infera::cli
