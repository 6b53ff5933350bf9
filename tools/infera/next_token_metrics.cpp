#include "next_token_metrics.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "infera/error.h"

namespace infera::cli {

namespace {

// log-sum-exp of the row in double, checking every value is finite.
double log_sum_exp(std::span<const float> row) {
  double max = -INFINITY;
  for (float v : row) {
    if (!std::isfinite(v)) throw Error("non-finite logits: the model's output is not usable");
    max = std::max(max, static_cast<double>(v));
  }
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - max);
  return max + std::log(sum);
}

size_t argmax(std::span<const float> row) {
  return static_cast<size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

}  // namespace

double negative_log_likelihood(std::span<const float> logits, int32_t target) {
  if (logits.empty() || target < 0 || static_cast<size_t>(target) >= logits.size())
    throw InvalidArgument("token id " + std::to_string(target) + " is outside the vocabulary");
  return log_sum_exp(logits) - static_cast<double>(logits[static_cast<size_t>(target)]);
}

RowComparison compare_rows(std::span<const float> reference, std::span<const float> candidate,
                           int32_t target) {
  if (reference.size() != candidate.size())
    throw InvalidArgument("the models' vocabularies differ (" + std::to_string(reference.size()) +
                          " and " + std::to_string(candidate.size()) + " logits)");
  const double lp = log_sum_exp(reference), lq = log_sum_exp(candidate);
  double kl = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    const double log_p = static_cast<double>(reference[i]) - lp;
    const double log_q = static_cast<double>(candidate[i]) - lq;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return {.kl = std::max(0.0, kl),
          .same_top1 = argmax(reference) == argmax(candidate),
          .reference_nll = negative_log_likelihood(reference, target),
          .candidate_nll = negative_log_likelihood(candidate, target)};
}

void ComparisonTotals::add(const RowComparison& c) {
  kl.push_back(c.kl);
  same_top1 += c.same_top1 ? 1 : 0;
  reference_nll += c.reference_nll;
  candidate_nll += c.candidate_nll;
}

}  // namespace infera::cli
