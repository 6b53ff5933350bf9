// One engine step: the chunks of tokens scheduled for some sequences become one BatchDesc (the
// batch contract of ops/batch.h), one forward pass, and the cache lengths move on.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "model/causal_lm.h"
#include "ops/batch.h"

namespace infera {

enum class OutputRows : uint8_t { None, Last, All };

struct SeqChunk {
  SeqId seq = 0;
  std::span<const int32_t> tokens;  // continues the sequence at position cache.length(seq)
  OutputRows outputs = OutputRows::Last;
};

// Rows of a batch in chunk order; each chunk's tokens sit at positions [length, length + n) and
// write their keys and values to the slots their sequence's block table gives. Output rows are
// listed chunk by chunk. Throws InvalidArgument for an empty chunk, a sequence named twice, or a
// chunk that does not fit the blocks reserved for its sequence.
BatchDesc build_batch(const KvCache& cache, std::span<const SeqChunk> chunks);

// Output rows of `chunks`, and their count.
int64_t count_outputs(std::span<const SeqChunk> chunks);

// build_batch, forward, then commit every chunk's tokens to the cache. `logits` receives
// [count_outputs(chunks), vocab]. On an exception nothing is committed.
void run_step(CausalLM& model, KvCache& cache, std::span<const SeqChunk> chunks,
              std::span<float> logits);
// run_step with a greedy choice per output row instead of logits (CausalLM::forward_argmax):
// `ids` receives [count_outputs(chunks)] ids, -1 for a row with no logit above -inf.
void run_step_argmax(CausalLM& model, KvCache& cache, std::span<const SeqChunk> chunks,
                     std::span<int32_t> ids);
// run_step with the backend's sampling per output row (CausalLM::forward_sample): `rows` and
// `out` have count_outputs(chunks) entries.
void run_step_sample(CausalLM& model, KvCache& cache, std::span<const SeqChunk> chunks,
                     std::span<const RowSampling> rows, std::span<SampledId> out);

}  // namespace infera
