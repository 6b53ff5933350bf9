// Sampler: the Hugging Face logits-processor pipeline over one row of logits, done with candidate
// index lists instead of full-vocabulary sorts (a 151,936-token vocabulary is the common case).
//
// After sample() returns, `logits` holds the processed scores, as HF's `scores_processed`:
// penalties and temperature applied, every filtered-out token set to -inf. Tests and callers may
// rely on it.
#include "sample/sampler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/float_scan.h"
#include "infera/error.h"

namespace infera {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Shortest round-trip text of a float ("1.5", not "1.500000"), so messages echo what the user
// typed.
std::string format_value(float v) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

[[noreturn]] void throw_field(const char* field, const char* rule, float value) {
  throw InvalidArgument(std::string(field) + " must be " + rule + ", got " + format_value(value));
}

// Uniform double in [0, 1) from the top 53 bits of one raw mt19937_64 output. The engine's output
// is fixed by the standard; std::uniform_real_distribution's is not, so it is not used.
double uniform01(uint64_t raw) { return static_cast<double>(raw >> 11) * 0x1.0p-53; }

// Relative weight exp(l - max), i.e. p_i / p_max. Written so that a +inf maximum gives its ties
// weight 1 and every finite logit weight 0, instead of the NaN that exp(inf - inf) would give.
float relative_weight(float logit, float max_logit) {
  return logit == max_logit ? 1.0f : std::exp(logit - max_logit);
}

// Total order for every sort: larger logit first, ties to the lower index. Any conforming sort
// yields the same sequence under a total order, so draws do not depend on the standard library.
struct ByLogitDesc {
  const float* logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// Candidates are kept either in index order or sorted by ByLogitDesc; both are canonical.
struct Candidates {
  std::vector<int32_t>& ids;
  bool sorted = false;

  float max_logit(const float* l) const {
    return sorted ? l[ids[0]] : l[*std::min_element(ids.begin(), ids.end(), ByLogitDesc{l})];
  }
};

// Weights of the candidates, position by position; returns their sum, accumulated in double in
// candidate order so that it is the same on every run.
double fill_weights(const float* l, const Candidates& c, std::vector<float>& weights) {
  const float max_logit = c.max_logit(l);
  weights.resize(c.ids.size());
  double total = 0.0;
  for (size_t j = 0; j < c.ids.size(); ++j)
    total += weights[j] = relative_weight(l[c.ids[j]], max_logit);
  return total;
}

// HF RepetitionPenaltyLogitsProcessor: gather/scatter applies the penalty once per distinct id,
// however often it occurs, so ids are deduplicated first.
void apply_repetition_penalty(std::span<float> l, float penalty, std::span<const int32_t> prompt,
                              std::span<const int32_t> generated, std::vector<int32_t>& ids) {
  const auto vocab = static_cast<int32_t>(l.size());
  ids.clear();
  for (auto part : {prompt, generated})
    for (int32_t id : part)
      if (id >= 0 && id < vocab) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (int32_t id : ids) l[id] = l[id] < 0.0f ? l[id] * penalty : l[id] / penalty;
}

// OpenAI presence/frequency penalties over generated ids, counted by sorting a copy.
void apply_presence_frequency(std::span<float> l, float presence, float frequency,
                              std::span<const int32_t> generated, std::vector<int32_t>& ids) {
  const auto vocab = static_cast<int32_t>(l.size());
  ids.clear();
  for (int32_t id : generated)
    if (id >= 0 && id < vocab) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j < ids.size() && ids[j] == ids[i]) ++j;
    l[ids[i]] -= presence + frequency * static_cast<float>(j - i);
    i = j;
  }
}

// The k-th largest live logit, or -inf when fewer than k are live. A size-k min-heap costs one
// comparison for most logits, cheaper than collecting all of them for nth_element.
float kth_largest(std::span<const float> l, size_t k, std::vector<float>& heap) {
  heap.clear();
  // Only values above the heap's least (or, until it holds k, above -inf) change it: the SIMD
  // scan skips to the next of them (NaNs were scrubbed before).
  const auto n = static_cast<int64_t>(l.size());
  for (int64_t i = next_above_f32(l.data(), n, 0, kNegInf); i < n;
       i = next_above_f32(l.data(), n, i + 1, heap.size() < k ? kNegInf : heap.front())) {
    const float v = l[static_cast<size_t>(i)];
    if (heap.size() < k) {
      heap.push_back(v);
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    } else if (v > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<>());
      heap.back() = v;
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  }
  return heap.size() < k ? kNegInf : heap.front();
}

// HF TopPLogitsWarper: on the ascending sort, remove tokens whose cumulative probability is
// <= 1 - top_p, always keeping the largest. Seen from the top, the token at rank m goes when the
// mass of itself and everything below it, (S - mass of the m tokens above it) / S, is <= 1 - top_p;
// the removed tokens form a tail, so the answer is a count m of top tokens. No full sort is needed.
// Ties at the cut: torch.sort(stable=False) fixes no order; ByLogitDesc keeps the lower index.
void apply_top_p(std::span<const float> logits, float top_p, Candidates& c,
                 std::vector<float>& weights) {
  const float* l = logits.data();
  const double total = fill_weights(l, c, weights);
  const double bar = (1.0 - static_cast<double>(top_p)) * total;  // removed when tail mass <= bar
  const float max_logit = c.max_logit(l);
  const ByLogitDesc desc{l};

  if (c.sorted) {  // a short top-k list: walk it from the top
    double above = 0.0;
    size_t m = 1;
    for (; m < c.ids.size(); ++m) {
      above += weights[m - 1];
      if (total - above <= bar) break;
    }
    c.ids.resize(m);
    return;
  }
  // A token of weight w has at most n * w of mass at or below it, so w * n < bar means it goes:
  // dropping those first shrinks a peaked row a lot. The maximum (weight 1 >= S / n) stays.
  const double weight_bar = bar / static_cast<double>(c.ids.size());
  size_t n = 0;
  for (size_t j = 0; j < c.ids.size(); ++j)
    if (weights[j] >= weight_bar) c.ids[n++] = c.ids[j];
  c.ids.resize(n);
  // Weighted selection of the count m: [0, lo) holds the top lo tokens (mass `above`), [lo, hi) the
  // next ones, and the answer lies in (lo, hi]. Each step splits [lo, hi) at its middle.
  size_t lo = 0, hi = n;
  double above = 0.0;
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(c.ids.begin() + lo, c.ids.begin() + mid, c.ids.begin() + hi, desc);
    double half = 0.0;
    for (size_t j = lo; j < mid; ++j) half += relative_weight(l[c.ids[j]], max_logit);
    if (total - (above + half) <= bar) {
      hi = mid;
    } else {
      above += half;
      lo = mid;
    }
  }
  // ids[lo] is the lowest kept token. Rebuild the kept set in index order: nth_element's
  // arrangement differs between standard libraries, index order does not.
  const int32_t last = c.ids[lo];
  c.ids.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i)
    if (i == last || desc(i, last)) c.ids.push_back(i);
}

// HF MinPLogitsWarper: remove p_i < min_p * p_max. The relative weight is p_i / p_max, so no
// normalisation is needed; the maximum (weight 1 >= min_p) always stays.
void apply_min_p(const float* l, float min_p, Candidates& c) {
  const float max_logit = c.max_logit(l);
  const auto removed = [&](int32_t i) { return relative_weight(l[i], max_logit) < min_p; };
  c.ids.erase(std::remove_if(c.ids.begin(), c.ids.end(), removed), c.ids.end());
}

// Inverse-CDF draw over the candidates in their canonical order.
int32_t draw(const float* l, const Candidates& c, std::vector<float>& weights, double u) {
  const double total = fill_weights(l, c, weights);
  const double target = u * total;
  int32_t chosen = c.ids[0];  // the maximum; only a rounding slip past the end could need it
  double cumulative = 0.0;
  for (size_t j = 0; j < c.ids.size(); ++j) {
    cumulative += weights[j];
    if (weights[j] > 0.0f) chosen = c.ids[j];  // the last token with weight, should u*S round up
    if (target < cumulative) break;
  }
  return chosen;
}

}  // namespace

void SamplingParams::validate() const {
  // Each test is written so that NaN fails it.
  if (!(temperature >= 0.0f && std::isfinite(temperature)))
    throw_field("temperature", "finite and >= 0", temperature);
  if (top_k < 0) throw InvalidArgument("top_k must be >= 0, got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) throw_field("top_p", "in (0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) throw_field("min_p", "in [0, 1]", min_p);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    throw_field("repetition_penalty", "finite and > 0", repetition_penalty);
  if (!std::isfinite(presence_penalty)) throw_field("presence_penalty", "finite", presence_penalty);
  if (!std::isfinite(frequency_penalty))
    throw_field("frequency_penalty", "finite", frequency_penalty);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  params_.validate();
}

double Sampler::next_uniform() {
  if (!has_returned_) last_raw_ = rng_();
  has_returned_ = false;
  return uniform01(last_raw_);
}

void Sampler::unuse_uniform() { has_returned_ = true; }

int32_t argmax(std::span<const float> values) {
  if (values.empty()) throw InvalidArgument("argmax: empty input");
  // The first of equal maxima, NaN skipped; 0 when nothing is above -inf.
  const int64_t best = first_argmax_f32(values.data(), static_cast<int64_t>(values.size()));
  return best < 0 ? 0 : static_cast<int32_t>(best);
}

int32_t Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt,
                        std::span<const int32_t> generated) {
  if (logits.empty()) throw InvalidArgument("sampler: empty logits");
  if (logits.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw InvalidArgument("sampler: vocabulary of " + std::to_string(logits.size()) +
                          " entries does not fit int32 token ids");
  // NaNs become -inf (in vectors: this and argmax were ~200 us of a 151,936-logit decode step).
  if (!scrub_nan_any_live(logits.data(), static_cast<int64_t>(logits.size())))
    throw InvalidArgument("sampler: all logits are -inf/NaN");

  if (params_.repetition_penalty != 1.0f)
    apply_repetition_penalty(logits, params_.repetition_penalty, prompt, generated, order_);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f)
    apply_presence_frequency(logits, params_.presence_penalty, params_.frequency_penalty, generated,
                             order_);
  // Every filter keeps the maximum and temperature keeps the order, so greedy is decided here.
  if (params_.greedy()) return argmax(logits);
  if (params_.temperature != 1.0f) {
    // The rule for tiny temperatures: when the largest (finite) logit divided by the temperature is
    // not finite in float32, the temperature acts as 0, i.e. greedy. Dividing anyway would turn
    // every positive logit into +inf, tied at the top, and sample uniformly among them (or, with
    // only negative logits, leave nothing live). Greedy is also the right answer: a logit below
    // the maximum m differs from it by at least one float32 ulp, about |m| * 2^-24, so at such a
    // temperature its weight exp(-(m - l) / T) <= exp(-FLT_MAX * 2^-24) is exactly 0 in float32.
    // Ties for the maximum go to the lowest id, as greedy's do.
    const int32_t top = argmax(logits);
    if (std::isfinite(logits[top]) && !std::isfinite(logits[top] / params_.temperature)) return top;
    for (float& v : logits) v /= params_.temperature;
  }

  // Candidates: live tokens (a huge penalty or tiny temperature can overflow more to -inf), cut to
  // those >= the k-th largest for top-k (HF TopKLogitsWarper: ties with the k-th value all stay).
  const float* l = logits.data();
  const bool use_top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < logits.size();
  const float floor = use_top_k ? kth_largest(logits, params_.top_k, weights_) : kNegInf;
  Candidates c{order_};
  c.ids.clear();
  const auto n = static_cast<int64_t>(logits.size());
  size_t live = 0;
  if (floor == kNegInf) {  // every live token
    for (int32_t i = 0; i < static_cast<int32_t>(n); ++i)
      if (l[i] != kNegInf) c.ids.push_back(i);
    live = c.ids.size();
  } else {  // the few >= the top-k floor, found a vector at a time
    live = static_cast<size_t>(count_above_f32(l, n, kNegInf));
    for (int64_t i = next_at_least_f32(l, n, 0, floor); i < n;
         i = next_at_least_f32(l, n, i + 1, floor))
      c.ids.push_back(static_cast<int32_t>(i));
  }
  if (live == 0)
    throw InvalidArgument("sampler: all logits became -inf after penalties/temperature");
  if (use_top_k) {
    std::sort(c.ids.begin(), c.ids.end(), ByLogitDesc{l});  // k entries (plus ties): cheap
    c.sorted = true;
  }
  if (params_.top_p < 1.0f) apply_top_p(logits, params_.top_p, c, weights_);
  if (params_.min_p > 0.0f) apply_min_p(l, params_.min_p, c);
  const int32_t chosen = draw(l, c, weights_, next_uniform());

  // Leave the processed scores in `logits`: filtered tokens become -inf (HF's filter_value).
  if (c.ids.size() < live) {
    weights_.resize(c.ids.size());
    for (size_t j = 0; j < c.ids.size(); ++j) weights_[j] = l[c.ids[j]];
    std::fill(logits.begin(), logits.end(), kNegInf);
    for (size_t j = 0; j < c.ids.size(); ++j) logits[c.ids[j]] = weights_[j];
  }
  return chosen;
}

}  // namespace infera
