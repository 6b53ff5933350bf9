// Test helper: one sequence over its own paged KV cache, run step by step through the batch
// contract, with explicit output rows (as the parity fixtures list positions).
#pragma once

#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"

namespace infera::test {

class SequenceRunner {
 public:
  SequenceRunner(CausalLM& model, int64_t capacity, DType kv_dtype = DType::F32,
                 int64_t block_size = 16)
      : model_(model),
        cache_(model.backend(), model.kv_shape(),
               {.block_size = block_size,
                .num_blocks = (capacity + block_size - 1) / block_size,
                .dtype = kv_dtype}),
        seq_(cache_.add_sequence()) {
    cache_.reserve(seq_, capacity);
  }

  // Runs `tokens` after what is cached; returns the logits of `rows` (indices into tokens).
  std::vector<float> run(std::span<const int32_t> tokens, std::span<const int64_t> rows) {
    const SeqChunk chunk{seq_, tokens, OutputRows::None};
    BatchDesc batch = build_batch(cache_, std::span<const SeqChunk>(&chunk, 1));
    for (int64_t r : rows) batch.output_rows.push_back(static_cast<int32_t>(r));
    std::vector<float> logits(rows.size() * static_cast<size_t>(model_.info().vocab));
    model_.forward(batch, cache_.pool(), logits);
    cache_.commit(seq_, static_cast<int64_t>(tokens.size()));
    return logits;
  }
  std::vector<float> run_last(std::span<const int32_t> tokens) {
    const int64_t last = static_cast<int64_t>(tokens.size()) - 1;
    return run(tokens, std::span<const int64_t>(&last, 1));
  }
  int64_t length() const { return cache_.length(seq_); }
  KvCache& cache() { return cache_; }
  SeqId seq() const { return seq_; }

 private:
  CausalLM& model_;
  KvCache cache_;
  SeqId seq_;
};

}  // namespace infera::test
