#include "engine/step.h"

#include <set>
#include <string>

#include "infera/error.h"

namespace infera {

int64_t count_outputs(std::span<const SeqChunk> chunks) {
  int64_t n = 0;
  for (const SeqChunk& c : chunks)
    n += c.outputs == OutputRows::All    ? static_cast<int64_t>(c.tokens.size())
         : c.outputs == OutputRows::Last ? 1
                                         : 0;
  return n;
}

BatchDesc build_batch(const KvCache& cache, std::span<const SeqChunk> chunks) {
  if (chunks.empty()) throw InvalidArgument("a step needs at least one sequence");
  const int64_t bs = cache.config().block_size;
  BatchDesc d;
  size_t max_blocks = 1;
  std::set<SeqId> seen;
  for (const SeqChunk& c : chunks) {
    if (c.tokens.empty())
      throw InvalidArgument("sequence " + std::to_string(c.seq) + " has no tokens in this step");
    if (!seen.insert(c.seq).second)
      throw InvalidArgument("sequence " + std::to_string(c.seq) + " appears twice in one step");
    const int64_t end = cache.length(c.seq) + static_cast<int64_t>(c.tokens.size());
    if (end > cache.capacity(c.seq))
      throw InvalidArgument("sequence " + std::to_string(c.seq) + " needs " + std::to_string(end) +
                            " cache positions, " + std::to_string(cache.capacity(c.seq)) +
                            " are reserved");
    max_blocks = std::max(max_blocks, cache.block_table(c.seq).size());
  }
  d.max_blocks = static_cast<int32_t>(max_blocks);
  d.query_start.push_back(0);
  for (const SeqChunk& c : chunks) {
    const std::vector<int32_t>& table = cache.block_table(c.seq);
    const int64_t start = cache.length(c.seq), n = static_cast<int64_t>(c.tokens.size());
    const auto first_row = static_cast<int32_t>(d.tokens.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = start + i;
      d.tokens.push_back(c.tokens[static_cast<size_t>(i)]);
      d.positions.push_back(static_cast<int32_t>(p));
      d.slots.push_back(static_cast<int32_t>(table[static_cast<size_t>(p / bs)] * bs + p % bs));
    }
    d.query_start.push_back(static_cast<int32_t>(d.tokens.size()));
    d.seq_lens.push_back(static_cast<int32_t>(start + n));
    d.block_table.insert(d.block_table.end(), table.begin(), table.end());
    d.block_table.resize((d.query_start.size() - 1) * max_blocks, -1);  // pad the row
    if (c.outputs == OutputRows::All)
      for (int64_t i = 0; i < n; ++i) d.output_rows.push_back(first_row + static_cast<int32_t>(i));
    else if (c.outputs == OutputRows::Last)
      d.output_rows.push_back(first_row + static_cast<int32_t>(n - 1));
  }
  return d;
}

void run_step(CausalLM& model, KvCache& cache, std::span<const SeqChunk> chunks,
              std::span<float> logits) {
  const BatchDesc batch = build_batch(cache, chunks);
  model.forward(batch, cache.pool(), logits);
  for (const SeqChunk& c : chunks) cache.commit(c.seq, static_cast<int64_t>(c.tokens.size()));
}

void run_step_argmax(CausalLM& model, KvCache& cache, std::span<const SeqChunk> chunks,
                     std::span<int32_t> ids) {
  const BatchDesc batch = build_batch(cache, chunks);
  model.forward_argmax(batch, cache.pool(), ids);
  for (const SeqChunk& c : chunks) cache.commit(c.seq, static_cast<int64_t>(c.tokens.size()));
}

void run_step_sample(CausalLM& model, KvCache& cache, std::span<const SeqChunk> chunks,
                     std::span<const RowSampling> rows, std::span<SampledId> out) {
  const BatchDesc batch = build_batch(cache, chunks);
  model.forward_sample(batch, cache.pool(), rows, out);
  for (const SeqChunk& c : chunks) cache.commit(c.seq, static_cast<int64_t>(c.tokens.size()));
}

}  // namespace infera
