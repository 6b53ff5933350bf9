#include "model/encoder.h"

#include <string>

#include "infera/error.h"

namespace infera {

BatchDesc encoder_batch(std::span<const std::vector<int32_t>> sequences) {
  if (sequences.empty()) throw InvalidArgument("an encoder batch needs at least one sequence");
  BatchDesc d;
  d.query_start.push_back(0);
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<int32_t>& seq = sequences[s];
    if (seq.empty()) throw InvalidArgument("sequence " + std::to_string(s) + " has no tokens");
    if (seq.size() > INT32_MAX / 2 - d.tokens.size())
      throw InvalidArgument("too many tokens in one encoder batch");
    for (size_t i = 0; i < seq.size(); ++i) {
      d.tokens.push_back(seq[i]);
      d.positions.push_back(static_cast<int32_t>(i));
    }
    d.query_start.push_back(static_cast<int32_t>(d.tokens.size()));
    d.seq_lens.push_back(static_cast<int32_t>(seq.size()));
  }
  return d;
}

std::vector<std::vector<int32_t>> unpad(const PaddedIds& p) {
  const auto cells = static_cast<size_t>(p.batch * p.length);
  if (p.batch <= 0 || p.length <= 0 || p.ids.size() != cells || p.attention_mask.size() != cells)
    throw InvalidArgument("padded batch: ids and attention_mask must both hold batch x length = " +
                          std::to_string(p.batch) + " x " + std::to_string(p.length) + " values");
  std::vector<std::vector<int32_t>> seqs(static_cast<size_t>(p.batch));
  for (int64_t b = 0; b < p.batch; ++b) {
    const int32_t* mask = p.attention_mask.data() + b * p.length;
    int64_t len = 0;
    while (len < p.length && mask[len] == 1) ++len;
    for (int64_t i = len; i < p.length; ++i)
      if (mask[i] != 0)
        throw InvalidArgument("padded batch: row " + std::to_string(b) +
                              " attention_mask is not right padding (1s then 0s) at column " +
                              std::to_string(i));
    if (len == 0) throw InvalidArgument("padded batch: row " + std::to_string(b) + " is empty");
    seqs[static_cast<size_t>(b)].assign(p.ids.begin() + b * p.length,
                                        p.ids.begin() + b * p.length + len);
  }
  return seqs;
}

std::vector<float> padded_hidden_states(Encoder& model, const PaddedIds& padded) {
  const std::vector<std::vector<int32_t>> seqs = unpad(padded);
  const BatchDesc batch = encoder_batch(seqs);
  const int64_t dim = model.info().hidden;
  std::vector<float> packed(static_cast<size_t>(batch.num_tokens() * dim));
  model.hidden_states(batch, packed);
  std::vector<float> out(static_cast<size_t>(padded.batch * padded.length * dim), 0.0f);
  for (int64_t b = 0; b < padded.batch; ++b) {
    const int64_t first = batch.query_start[static_cast<size_t>(b)];
    const int64_t rows = batch.query_start[static_cast<size_t>(b + 1)] - first;
    std::copy_n(packed.begin() + first * dim, rows * dim, out.begin() + b * padded.length * dim);
  }
  return out;
}

}  // namespace infera
