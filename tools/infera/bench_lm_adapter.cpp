#include "bench_lm_adapter.h"

#include <algorithm>

#include "bench/timer.h"
#include "infera/error.h"

namespace infera::cli {
// Derives the cost model from the model's shape and how this engine runs it: weights read in
// place at their dtype, an F32 KV cache, logits only for the rows that are sampled, and an
// untied embedding table that is only gathered (one row per token), not streamed.
LmCostModel make_lm_cost_model(const ModelInfo& info, DType kv_dtype) {
  LmCostModel c;
  const double weight_bytes = static_cast<double>(dtype_bytes(info.weight_dtype, 1));
  const double table = static_cast<double>(info.vocab) * static_cast<double>(info.hidden);
  const double params = static_cast<double>(info.parameters);
  // Tied: the embedding table is the LM head and is streamed once per decode step.
  const double streamed = info.tied_embeddings ? params : params - table;
  c.weight_bytes_per_decode_token = streamed * weight_bytes;
  // Everything but the embedding table(s) multiplies each prompt token (norm weights, ~0.01%
  // of the layer weights, are counted as if they were matmul weights).
  const double layer_params = params - (info.tied_embeddings ? table : 2 * table);
  c.flops_per_token = 2.0 * layer_params;
  c.lm_head_flops = 2.0 * table;
  c.kv_bytes_per_position = 2.0 * static_cast<double>(info.layers * info.kv_heads * info.head_dim) *
                            static_cast<double>(dtype_bytes(kv_dtype, 1));
  // Per query head: q.k (head_dim multiply-adds) and p * v (head_dim multiply-adds).
  c.attention_flops_per_pair =
      4.0 * static_cast<double>(info.layers * info.q_heads * info.head_dim);
  return c;
}

BenchModel load_bench_model(const std::filesystem::path& dir, const LoadOptions& options,
                            int threads) {
  BenchModel m;
  bench::Stopwatch watch;
  m.backend = make_cpu_backend(threads);
  m.model = load_causal_lm(dir, *m.backend, options);
  m.load_seconds = watch.seconds();
  return m;
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

LmBenchAdapter::LmBenchAdapter(CausalLM& model)
    : model_(model), sampler_(SamplingParams{.temperature = 0.0f}) {
  const KvCache probe = model_.new_cache(1);
  const DType kv_dtype = probe.keys.empty() ? DType::F32 : probe.keys.front().dtype();
  cost_ = make_lm_cost_model(model_.info(), kv_dtype);
  logits_.resize(static_cast<size_t>(model_.info().vocab));
}

std::vector<int32_t> LmBenchAdapter::synthetic_prompt(int64_t n) const {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i)
    ids.push_back(static_cast<int32_t>((1000 + i * 7919) % model_.info().vocab));
  return ids;
}

StageSeconds LmBenchAdapter::run_prefill(std::span<const int32_t> prompt, int64_t capacity,
                                         int64_t chunk) {
  const auto n = static_cast<int64_t>(prompt.size());
  if (n == 0) throw InvalidArgument("bench: empty prompt");
  if (capacity < n) throw InvalidArgument("bench: KV cache smaller than the prompt");
  StageSeconds t;
  bench::Stopwatch watch;
  end_sequence();
  cache_ = model_.new_cache(capacity);
  prompt_.assign(prompt.begin(), prompt.end());
  generated_.clear();
  t.prepare = watch.lap();
  chunk = std::max<int64_t>(chunk, 1);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t rows = std::min(chunk, n - begin);
    const bool last = begin + rows == n;
    const int64_t last_row = rows - 1;
    model_.forward(prompt.subspan(static_cast<size_t>(begin), static_cast<size_t>(rows)), cache_,
                   last ? std::span<const int64_t>(&last_row, 1) : std::span<const int64_t>(),
                   last ? std::span<float>(logits_) : std::span<float>());
  }
  t.forward = watch.lap();
  generated_.push_back(sampler_.sample(logits_, prompt_, generated_));
  t.postprocess = watch.lap();
  return t;
}

std::vector<StageSeconds> LmBenchAdapter::run_decode_steps(int64_t steps) {
  if (generated_.empty()) throw InvalidArgument("bench: decode before prefill");
  if (cache_.length + steps > cache_.capacity)
    throw InvalidArgument("bench: " + std::to_string(steps) +
                          " decode steps exceed the KV cache capacity");
  std::vector<StageSeconds> out;
  out.reserve(static_cast<size_t>(steps));
  const int64_t row = 0;
  for (int64_t s = 0; s < steps; ++s) {
    StageSeconds t;
    bench::Stopwatch watch;
    const std::span<const int32_t> token(&generated_.back(), 1);
    t.prepare = watch.lap();
    model_.forward(token, cache_, std::span<const int64_t>(&row, 1), logits_);
    t.forward = watch.lap();
    generated_.push_back(sampler_.sample(logits_, prompt_, generated_));
    t.postprocess = watch.lap();
    out.push_back(t);
  }
  return out;
}

void LmBenchAdapter::end_sequence() { cache_ = KvCache{}; }

}  // namespace infera::cli
