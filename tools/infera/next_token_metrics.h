// How far a candidate model's next-token distributions are from a reference model's, row by row:
// the quality gate of quantized weights (`infera eval`), and the perplexity terms.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace infera::cli {

// -log softmax(logits)[target], in double. Throws infera::Error on non-finite logits.
double negative_log_likelihood(std::span<const float> logits, int32_t target);

struct RowComparison {
  double kl;             // KL(P || Q) in nats, P = softmax(reference), Q = softmax(candidate)
  bool same_top1;        // argmax P == argmax Q (ties: the lowest id)
  double reference_nll;  // -log P(target)
  double candidate_nll;  // -log Q(target)
};

// Both rows must be finite and of equal length; KL is computed in double over the full
// vocabulary (log-softmax on each side, then sum p * (log p - log q)) and is >= 0 up to
// rounding (a result below 0 by rounding is reported as 0).
RowComparison compare_rows(std::span<const float> reference, std::span<const float> candidate,
                           int32_t target);

// Running totals over rows.
struct ComparisonTotals {
  std::vector<double> kl;  // one per row, for percentiles
  int64_t same_top1 = 0;
  double reference_nll = 0, candidate_nll = 0;
  void add(const RowComparison& c);
  int64_t rows() const { return static_cast<int64_t>(kl.size()); }
};

}  // namespace infera::cli
