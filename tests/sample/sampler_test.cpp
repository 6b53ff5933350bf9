// Sampler tests. torch/transformers are not installed here, so expected values are worked out by
// hand from the definitions of HF's processors (quoted in each test); boundary cases are chosen
// with a margin, because at an exact tie of cumulative probability and 1 - top_p the result depends
// on float rounding in HF as well.
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "infera/error.h"

namespace infera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

SamplingParams with(auto&& edit) {
  SamplingParams p;
  edit(p);
  return p;
}

// The processed scores that sample() leaves in place of the logits.
std::vector<float> processed(const SamplingParams& p, std::vector<float> logits,
                             std::vector<int32_t> prompt = {},
                             std::vector<int32_t> generated = {}) {
  Sampler sampler(p);
  sampler.sample(logits, prompt, generated);
  return logits;
}

// Indices that survived filtering (not -inf).
std::set<int32_t> kept(const std::vector<float>& scores) {
  std::set<int32_t> out;
  for (size_t i = 0; i < scores.size(); ++i)
    if (scores[i] != -kInf) out.insert(static_cast<int32_t>(i));
  return out;
}

std::set<int32_t> kept_after(const SamplingParams& p, const std::vector<float>& logits) {
  return kept(processed(p, logits));
}

std::vector<float> log_of(std::vector<double> probs) {
  std::vector<float> out;
  for (double q : probs) out.push_back(static_cast<float>(std::log(q)));
  return out;
}

// Draws once per seed 0..n-1 (a fresh sampler each time) and returns the set of ids drawn.
std::set<int32_t> drawn_over_seeds(SamplingParams p, const std::vector<float>& logits, int n) {
  std::set<int32_t> out;
  for (int seed = 0; seed < n; ++seed) {
    p.seed = static_cast<uint64_t>(seed);
    Sampler sampler(p);
    std::vector<float> row = logits;
    out.insert(sampler.sample(row, {}, {}));
  }
  return out;
}

// ---- argmax and greedy -------------------------------------------------------------------------

TEST(Argmax, FirstMaximumWins) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-5}), 0);
  EXPECT_EQ(argmax(std::vector<float>{kNaN, 2, kNaN, 2}), 1);  // NaN never wins
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_THROW(argmax(std::span<const float>{}), InvalidArgument);
}

TEST(Greedy, TemperatureZeroIsArgmaxWithTiesToLowestIndex) {
  Sampler sampler(with([](auto& p) { p.temperature = 0.0f; }));
  for (int i = 0; i < 3; ++i) {
    std::vector<float> logits{0.5f, 2.0f, 2.0f, -1.0f};
    EXPECT_EQ(sampler.sample(logits, {}, {}), 1);
  }
}

TEST(Greedy, PenaltiesApplyBeforeArgmax) {
  // 2.0 / 1.2 = 1.667 < 1.9, so the penalised token 0 loses to token 1 (HF applies the
  // repetition processor before greedy search's argmax too).
  Sampler sampler(with([](auto& p) {
    p.temperature = 0.0f;
    p.repetition_penalty = 1.2f;
  }));
  std::vector<float> logits{2.0f, 1.9f};
  std::vector<int32_t> prompt{0};
  EXPECT_EQ(sampler.sample(logits, prompt, {}), 1);
  EXPECT_EQ(logits[0], 2.0f / 1.2f);
}

// ---- penalties
// -----------------------------------------------------------------------------------

TEST(RepetitionPenalty, DividesPositiveMultipliesNegativeOncePerDistinctId) {
  // HF: score = where(score < 0, score * penalty, score / penalty), gathered and scattered once per
  // id, so duplicates (1 appears three times, 2 twice) are penalised once. 99 and -5 are outside
  // the vocabulary and ignored; 4 and 5 are not in the ids.
  const auto p = with([](auto& p) {
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
  });
  const auto out =
      processed(p, {2.0f, -2.0f, 0.5f, 3.0f, -1.0f, 0.0f}, {0, 1, 1, 5}, {1, 2, 99, -5, 2});
  EXPECT_EQ(out, (std::vector<float>{1.0f, -4.0f, 0.25f, 3.0f, -1.0f, 0.0f}));
}

TEST(RepetitionPenalty, NonPowerOfTwoPenaltyAndSamplingPathAgree) {
  const auto p = with([](auto& p) { p.repetition_penalty = 1.3f; });  // temperature 1, no filters
  const auto out = processed(p, {2.0f, -2.0f, 1.0f}, {0}, {1});
  EXPECT_NEAR(out[0], 1.5384615f, 1e-6f);  // 2 / 1.3
  EXPECT_NEAR(out[1], -2.6f, 1e-6f);       // -2 * 1.3
  EXPECT_EQ(out[2], 1.0f);
}

TEST(PresenceFrequency, GeneratedOnlyCountsTimesFrequencyPlusPresence) {
  // logit -= presence * (count > 0) + frequency * count; the prompt id 0 is not counted.
  // id 1: 1 - (0.5 + 0.25 * 3) = -0.25; id 2: 1 - (0.5 + 0.25) = 0.25.
  const auto p = with([](auto& p) {
    p.temperature = 0.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
  });
  const auto out = processed(p, {1.0f, 1.0f, 1.0f, 1.0f}, {0}, {1, 1, 2, 1});
  EXPECT_EQ(out, (std::vector<float>{1.0f, -0.25f, 0.25f, 1.0f}));
}

TEST(PresenceFrequency, NegativePenaltiesEncourage) {
  const auto p = with([](auto& p) {
    p.temperature = 0.0f;
    p.presence_penalty = -1.0f;
  });
  EXPECT_EQ(processed(p, {0.0f, 0.5f}, {}, {0}), (std::vector<float>{1.0f, 0.5f}));
}

TEST(Penalties, RepetitionRunsBeforePresence) {
  // (2 / 2) - 1 = 0; the other order would give (2 - 1) / 2 = 0.5.
  const auto p = with([](auto& p) {
    p.temperature = 0.0f;
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 1.0f;
  });
  EXPECT_EQ(processed(p, {2.0f, -3.0f}, {}, {0})[0], 0.0f);
}

// ---- temperature
// ---------------------------------------------------------------------------------

TEST(Temperature, DividesLogits) {
  EXPECT_EQ(processed(with([](auto& p) { p.temperature = 2.0f; }), {1, 2, 4}),
            (std::vector<float>{0.5f, 1.0f, 2.0f}));
  EXPECT_EQ(processed(with([](auto& p) { p.temperature = 0.5f; }), {1, -2, 4}),
            (std::vector<float>{2.0f, -4.0f, 8.0f}));
}

// The stated rule (sampler.h): a temperature at which max logit / T overflows float32 acts as 0.
// At 1e-45 (the smallest float) dividing would make every positive logit +inf; before the rule
// those tied at +inf were drawn uniformly, and an all-negative row threw.
TEST(Temperature, OverflowingTemperatureActsAsGreedy) {
  const std::vector<std::vector<float>> rows{
      {1.0f, 3.0f, 2.0f, 2.5f, 0.5f},  // positive: all would be +inf
      {-2.0f, -1.0f, -3.0f},           // negative: all would be -inf
      {0.0f, 1e-3f, -1e-3f},           // 1e-3 / 1e-45 overflows too
      {4.0f, 7.0f, 7.0f, -1.0f},       // tied maximum: the lowest id, as greedy
  };
  for (const auto& logits : rows) {
    std::vector<float> row = logits;
    const int32_t want = Sampler(with([](auto& p) { p.temperature = 0.0f; })).sample(row, {}, {});
    for (float t : {1e-45f, 1e-40f, 1e-38f * 0.5f}) {
      for (int top_k : {0, 2}) {
        auto p = with([&](auto& p) {
          p.temperature = t;
          p.top_k = top_k;
          p.top_p = top_k ? 0.9f : 1.0f;
        });
        EXPECT_EQ(drawn_over_seeds(p, logits, 64), (std::set<int32_t>{want}))
            << "temperature " << t << " top_k " << top_k << " row[0] " << logits[0];
      }
    }
  }
}

// Just above the overflow the division is done and the gaps are so large that the distribution
// is already a point mass: the rule changes nothing there, so the two sides agree.
TEST(Temperature, JustBelowOverflowIsAlreadyAPointMass) {
  const std::vector<float> logits{1.0f, std::nextafter(1.0f, 0.0f), 0.5f};
  const auto p = with([](auto& p) { p.temperature = 1e-37f; });  // 1 / 1e-37 = 1e37, finite
  EXPECT_EQ(drawn_over_seeds(p, logits, 64), (std::set<int32_t>{0}));
  const auto scores = processed(p, logits);
  EXPECT_TRUE(std::isfinite(scores[0])) << scores[0];
}

// ---- top-k
// ---------------------------------------------------------------------------------------

TEST(TopK, KeepsExactlyTheKLargestAndDrawsAllOfThem) {
  const std::vector<float> logits{0.1f, 2.0f, -1.0f, 1.5f, 3.0f, 0.2f, 1.0f, -0.5f};
  const auto p = with([](auto& p) { p.top_k = 3; });
  const std::set<int32_t> expected{4, 1, 3};  // 3.0, 2.0, 1.5
  const auto out = processed(p, logits);
  EXPECT_EQ(kept(out), expected);
  for (int32_t i : expected) EXPECT_EQ(out[i], logits[i]);  // survivors untouched
  // 300 seeds: every draw in the set, every member drawn (each has probability >= 0.17).
  EXPECT_EQ(drawn_over_seeds(p, logits, 300), expected);
}

TEST(TopK, TiesWithTheKthValueAreAllKept) {
  // HF: remove scores < topk(scores, k).values[-1]; with k = 2 the 2nd value is 2, both 2s stay.
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_k = 2; }), {1, 3, 2, 2, 0}),
            (std::set<int32_t>{1, 2, 3}));
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_k = 1; }), {5, 5, 1}), (std::set<int32_t>{0, 1}));
}

TEST(TopK, KAtLeastVocabularyOrMinusInfTailKeepsEverythingLive) {
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_k = 10; }), {1, 2, 3}),
            (std::set<int32_t>{0, 1, 2}));
  // Only two live tokens and k = 3: HF's k-th value is -inf, nothing is removed.
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_k = 3; }), {1, -kInf, 3, -kInf}),
            (std::set<int32_t>{0, 2}));
}

// ---- top-p
// ---------------------------------------------------------------------------------------

// probs [0.5, 0.3, 0.15, 0.05]: HF sorts ascending -> [0.05, 0.15, 0.3, 0.5], cumulative
// [0.05, 0.20, 0.50, 1.00], and removes entries with cumulative <= 1 - top_p (the last always
// stays).
TEST(TopP, MatchesHfCumulativeRule) {
  const auto logits = log_of({0.5, 0.3, 0.15, 0.05});
  auto top_p = [&](float v) { return kept_after(with([&](auto& p) { p.top_p = v; }), logits); };
  // 1 - 0.79 = 0.21: 0.05 and 0.20 are <= 0.21 -> {0, 1}.
  EXPECT_EQ(top_p(0.79f), (std::set<int32_t>{0, 1}));
  // 1 - 0.81 = 0.19: only 0.05 -> {0, 1, 2}.
  EXPECT_EQ(top_p(0.81f), (std::set<int32_t>{0, 1, 2}));
  // 1 - 0.55 = 0.45: 0.05, 0.20 removed, 0.50 > 0.45 stays -> {0, 1}; token 0 alone (0.5) is not
  // enough mass, HF keeps the smallest head whose mass reaches top_p.
  EXPECT_EQ(top_p(0.55f), (std::set<int32_t>{0, 1}));
  // 1 - 0.45 = 0.55: 0.05, 0.20, 0.50 removed -> {0}.
  EXPECT_EQ(top_p(0.45f), (std::set<int32_t>{0}));
  // Tiny top_p removes everything but the largest, which min_tokens_to_keep = 1 keeps.
  EXPECT_EQ(top_p(0.01f), (std::set<int32_t>{0}));
  // 1 - 0.999 = 0.001 < 0.05: nothing removed.
  EXPECT_EQ(top_p(0.999f), (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(top_p(1.0f), (std::set<int32_t>{0, 1, 2, 3}));
}

TEST(TopP, ExactBoundaryIsRemovedAsHfLessOrEqual) {
  // Four equal logits: probabilities are exactly 0.25 and cumulative sums exactly 0.25, 0.5, 0.75
  // in float and double alike, and 1 - 0.75 = 0.25, 1 - 0.5 = 0.5 exactly. HF's `<=` removes the
  // entry that sits on the boundary (a strict `<` would keep all four / three).
  const std::vector<float> logits{1.5f, 1.5f, 1.5f, 1.5f};
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_p = 0.75f; }), logits),
            (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_p = 0.5f; }), logits), (std::set<int32_t>{0, 1}));
  // Same through the top-k path (top_k = 2 keeps all four ties, then the sorted list is walked).
  EXPECT_EQ(kept_after(with([](auto& p) {
                         p.top_k = 2;
                         p.top_p = 0.75f;
                       }),
                       logits),
            (std::set<int32_t>{0, 1, 2}));
}

TEST(TopP, LongTailOfSmallTokensIsCutByMass) {
  // One token of weight 1 and 100 of weight 0.02: S = 3, each small prob 0.00667. top_p 0.45
  // removes ascending cumulative <= 0.55, i.e. 82 of the small ones (82 * 0.00667 = 0.547,
  // 83 * 0.00667 = 0.553), leaving 18. The small ones tie, so the lower indices 1..18 stay. (This
  // guards the sampler's pre-filter, which may only drop tokens with weight * n < 0.55 * S.)
  std::vector<float> logits(101, static_cast<float>(std::log(0.02)));
  logits[0] = 0.0f;
  std::set<int32_t> expected;
  for (int32_t i = 0; i <= 18; ++i) expected.insert(i);
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_p = 0.45f; }), logits), expected);
}

TEST(TopP, TiesAtTheCutKeepTheLowerIndex) {
  // Four equal tokens, top_p 0.6: cumulative [0.25, 0.5, 0.75, 1] vs 0.4 removes one of them.
  // torch.sort(stable=False) fixes no order among ties; this sampler keeps lower indices.
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_p = 0.6f; }), {0, 0, 0, 0}),
            (std::set<int32_t>{0, 1, 2}));
}

TEST(TopP, RunsOnTheRenormalisedTopKOutput) {
  // probs [0.4, 0.3, 0.2, 0.1], top_p 0.5 (remove cumulative <= 0.5):
  // alone: cumulative [0.1, 0.3, 0.6, 1] -> {0, 1}.
  // after top_k = 2: renormalised [0.4286, 0.5714] ascending -> 0.4286 <= 0.5 removed -> {0}.
  const auto logits = log_of({0.4, 0.3, 0.2, 0.1});
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_p = 0.5f; }), logits), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(kept_after(with([](auto& p) {
                         p.top_p = 0.5f;
                         p.top_k = 2;
                       }),
                       logits),
            (std::set<int32_t>{0}));
}

TEST(TopP, TemperatureAppliesBeforeTopP) {
  // Logits [ln 0.5, ln 0.3, ln 0.15, ln 0.05] at temperature 0.5 become probs proportional to
  // p^2 = [0.25, 0.09, 0.0225, 0.0025] / 0.365 = [0.685, 0.247, 0.062, 0.007]. top_p 0.9:
  // cumulative ascending [0.007, 0.068, 0.315, 1] vs 0.1 -> {0, 1}. Without temperature the same
  // top_p keeps {0, 1, 2} (cumulative [0.05, 0.2, ...] vs 0.1).
  const auto logits = log_of({0.5, 0.3, 0.15, 0.05});
  EXPECT_EQ(kept_after(with([](auto& p) { p.top_p = 0.9f; }), logits),
            (std::set<int32_t>{0, 1, 2}));
  EXPECT_EQ(kept_after(with([](auto& p) {
                         p.top_p = 0.9f;
                         p.temperature = 0.5f;
                       }),
                       logits),
            (std::set<int32_t>{0, 1}));
}

// ---- min-p
// ---------------------------------------------------------------------------------------

TEST(MinP, RemovesBelowMinPTimesMaxProbability) {
  // HF: remove probs < min_p * max_prob, max_prob = 0.5 here.
  const auto logits = log_of({0.5, 0.3, 0.15, 0.05});
  auto min_p = [&](float v) { return kept_after(with([&](auto& p) { p.min_p = v; }), logits); };
  EXPECT_EQ(min_p(0.2f), (std::set<int32_t>{0, 1, 2}));  // bar 0.1: only 0.05 goes
  EXPECT_EQ(min_p(0.4f), (std::set<int32_t>{0, 1}));     // bar 0.2: 0.15 goes too
  EXPECT_EQ(min_p(1.0f), (std::set<int32_t>{0}));        // bar 0.5: only the maximum
  EXPECT_EQ(min_p(0.0f), (std::set<int32_t>{0, 1, 2, 3}));
  // Equal maxima are never below min_p * max.
  EXPECT_EQ(kept_after(with([](auto& p) { p.min_p = 1.0f; }), {2, 2, 1}),
            (std::set<int32_t>{0, 1}));
}

TEST(MinP, UsesTemperatureScaledProbabilities) {
  // At temperature 0.5 the ratios square: 0.3/0.5 = 0.6 -> 0.36 < 0.4 is removed, 0.6 alone is not.
  const auto logits = log_of({0.5, 0.3, 0.15, 0.05});
  EXPECT_EQ(kept_after(with([](auto& p) { p.min_p = 0.4f; }), logits), (std::set<int32_t>{0, 1}));
  EXPECT_EQ(kept_after(with([](auto& p) {
                         p.min_p = 0.4f;
                         p.temperature = 0.5f;
                       }),
                       logits),
            (std::set<int32_t>{0}));
}

// ---- full vocabulary against a straightforward HF-style reference ------------------------------

// Reference: the HF warpers written literally (full ascending sort, softmax, cumulative sum) in
// double. Logits are distinct, so tie order does not matter.
std::set<int32_t> reference_kept(std::vector<double> s, int top_k, double top_p, double min_p) {
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const size_t n = s.size();
  if (top_k > 0 && static_cast<size_t>(top_k) < n) {
    std::vector<double> sorted = s;
    std::sort(sorted.begin(), sorted.end(), std::greater<>());
    const double kth = sorted[top_k - 1];
    for (double& v : s)
      if (v < kth) v = neg_inf;
  }
  auto softmax = [&](const std::vector<double>& x) {
    const double mx = *std::max_element(x.begin(), x.end());
    std::vector<double> p(n);
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += p[i] = std::exp(x[i] - mx);
    for (double& v : p) v /= sum;
    return p;
  };
  if (top_p < 1.0) {
    std::vector<size_t> asc(n);
    std::iota(asc.begin(), asc.end(), 0);
    std::sort(asc.begin(), asc.end(), [&](size_t a, size_t b) { return s[a] < s[b]; });
    const auto p = softmax(s);
    double cum = 0;
    for (size_t j = 0; j + 1 < n; ++j) {
      cum += p[asc[j]];
      if (cum <= 1.0 - top_p) s[asc[j]] = neg_inf;
    }
  }
  if (min_p > 0.0) {
    const auto p = softmax(s);
    const double bar = min_p * *std::max_element(p.begin(), p.end());
    for (size_t i = 0; i < n; ++i)
      if (p[i] < bar) s[i] = neg_inf;
  }
  std::set<int32_t> out;
  for (size_t i = 0; i < n; ++i)
    if (s[i] != neg_inf) out.insert(static_cast<int32_t>(i));
  return out;
}

TEST(FullVocabulary, FiltersMatchReferenceOnQwenSizedRows) {
  constexpr size_t kVocab = 151936;
  std::mt19937_64 gen(7);
  auto u01 = [&] { return static_cast<double>(gen() >> 11) * 0x1.0p-53; };
  std::vector<float> peaky(kVocab), flat(kVocab);
  for (size_t i = 0; i < kVocab; ++i) {
    peaky[i] = static_cast<float>(12.0 * u01() * u01() * u01());  // a few dominant tokens
    flat[i] = static_cast<float>(u01());  // top_p keeps ~90% of the row: many sort extensions
  }
  struct Case {
    const std::vector<float>* logits;
    int top_k;
    float top_p, min_p;
  };
  const Case cases[] = {{&peaky, 0, 0.9f, 0.0f},  {&peaky, 50, 0.9f, 0.0f},
                        {&peaky, 0, 1.0f, 0.05f}, {&peaky, 40, 0.95f, 0.1f},
                        {&flat, 0, 0.9f, 0.0f},   {&flat, 1000, 1.0f, 0.0f},
                        {&flat, 0, 1.0f, 0.5f}};
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << "top_k=" << c.top_k << " top_p=" << c.top_p << " min_p="
                                    << c.min_p << (c.logits == &flat ? " flat" : " peaky"));
    const auto p = with([&](auto& p) {
      p.top_k = c.top_k;
      p.top_p = c.top_p;
      p.min_p = c.min_p;
    });
    const auto got = kept_after(p, *c.logits);
    const auto want = reference_kept(std::vector<double>(c.logits->begin(), c.logits->end()),
                                     c.top_k, c.top_p, c.min_p);
    EXPECT_GT(want.size(), 1u);
    EXPECT_LT(want.size(), kVocab);
    EXPECT_EQ(got, want);
  }
}

// ---- randomness
// ----------------------------------------------------------------------------------

TEST(Draw, UniformRowDrawIsTopTwoBitsOfMt19937_64) {
  // Four equal logits have weight 1 each (total 4 exactly), u = (x >> 11) * 2^-53 and the draw is
  // floor(4u) = x >> 62. This pins the uniform derivation, which depends only on the standard's
  // fully specified mt19937_64, so every platform gives this sequence.
  for (uint64_t seed : {0ull, 42ull, 123456789ull}) {
    Sampler sampler(with([&](auto& p) { p.seed = seed; }));
    std::mt19937_64 engine(seed);
    for (int i = 0; i < 64; ++i) {
      std::vector<float> logits{0.25f, 0.25f, 0.25f, 0.25f};
      ASSERT_EQ(sampler.sample(logits, {}, {}), static_cast<int32_t>(engine() >> 62)) << i;
    }
  }
}

std::vector<int32_t> sequence(uint64_t seed, int n) {
  Sampler sampler(with([&](auto& p) {
    p.seed = seed;
    p.temperature = 0.8f;
    p.top_k = 6;
  }));
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> logits{0.3f, 1.2f, -0.4f, 0.9f, 0.0f, 1.0f, 0.5f, -2.0f};
    out.push_back(sampler.sample(logits, {}, {}));
  }
  return out;
}

TEST(Draw, SameSeedSameSequenceDifferentSeedDifferent) {
  const auto a = sequence(1234, 100);
  EXPECT_EQ(a, sequence(1234, 100));
  EXPECT_NE(a, sequence(1235, 100));
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 3u);  // it is not stuck on one token
}

void expect_frequencies(const SamplingParams& params, const std::vector<float>& logits,
                        const std::vector<double>& expected) {
  constexpr int kDraws = 20000;
  Sampler sampler(params);
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> row = logits;
    ++counts[sampler.sample(row, {}, {})];
  }
  // One standard deviation of a frequency is sqrt(p(1-p)/20000) <= 0.0036; 0.012 is > 3 sigma.
  // The seed is fixed, so the outcome is deterministic, not flaky.
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_NEAR(counts[i] / double(kDraws), expected[i], 0.012) << "token " << i;
}

TEST(Draw, FrequenciesMatchSoftmaxAtTemperatureOne) {
  // softmax([1, 0.5, 0, -1, 2]): exp = [2.718, 1.649, 1, 0.368, 7.389], sum 13.124.
  expect_frequencies(with([](auto& p) { p.seed = 99; }), {1.0f, 0.5f, 0.0f, -1.0f, 2.0f},
                     {0.20711, 0.12562, 0.07619, 0.02803, 0.56304});
}

TEST(Draw, FrequenciesMatchRenormalisedTopKAtTemperatureHalf) {
  // Logits / 0.5 = [2, 1, 0, -2, 4]; top_k 3 keeps {4, 0, 1}: exp = [7.389, 2.718, 54.598],
  // sum 64.705 -> [0.11420, 0.04201, 0, 0, 0.84380].
  expect_frequencies(with([](auto& p) {
                       p.seed = 5;
                       p.temperature = 0.5f;
                       p.top_k = 3;
                     }),
                     {1.0f, 0.5f, 0.0f, -1.0f, 2.0f}, {0.11420, 0.04201, 0.0, 0.0, 0.84380});
}

// ---- special values and errors
// -------------------------------------------------------------------

TEST(SpecialValues, NaNIsTreatedAsMinusInf) {
  const std::vector<float> logits{kNaN, 1.0f, kNaN, 0.5f};
  std::vector<float> row = logits;
  Sampler greedy(with([](auto& p) { p.temperature = 0.0f; }));
  EXPECT_EQ(greedy.sample(row, {}, {}), 1);
  const auto out = processed(SamplingParams{}, logits);
  EXPECT_EQ(out[0], -kInf);
  EXPECT_EQ(out[2], -kInf);
  EXPECT_EQ(drawn_over_seeds(SamplingParams{}, logits, 200), (std::set<int32_t>{1, 3}));
}

TEST(SpecialValues, AllMinusInfOrNaNThrows) {
  for (auto logits : {std::vector<float>{kNaN, -kInf}, std::vector<float>{-kInf}}) {
    for (float t : {0.0f, 1.0f}) {
      Sampler sampler(with([&](auto& p) { p.temperature = t; }));
      try {
        sampler.sample(logits, {}, {});
        ADD_FAILURE() << "no throw";
      } catch (const InvalidArgument& e) {
        EXPECT_STREQ(e.what(), "sampler: all logits are -inf/NaN");
      }
    }
  }
  Sampler sampler{SamplingParams{}};
  EXPECT_THROW(sampler.sample(std::span<float>{}, {}, {}), InvalidArgument);
}

TEST(SpecialValues, PlusInfinityTokensShareAllTheMass) {
  const std::vector<float> logits{0.0f, kInf, 5.0f, kInf};
  EXPECT_EQ(drawn_over_seeds(SamplingParams{}, logits, 100), (std::set<int32_t>{1, 3}));
}

std::string validate_message(const SamplingParams& p) {
  try {
    p.validate();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "(valid)";
}

TEST(Validate, NamesTheFieldAndValue) {
  EXPECT_EQ(validate_message(SamplingParams{}), "(valid)");
  EXPECT_EQ(validate_message(with([](auto& p) {
              p.temperature = 0.0f;
              p.top_p = 1.0f;
              p.min_p = 1.0f;
              p.top_k = 0;
            })),
            "(valid)");
  EXPECT_EQ(validate_message(with([](auto& p) { p.top_p = 1.5f; })),
            "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(validate_message(with([](auto& p) { p.top_p = 0.0f; })),
            "top_p must be in (0, 1], got 0");
  EXPECT_EQ(validate_message(with([](auto& p) { p.top_p = kNaN; })),
            "top_p must be in (0, 1], got nan");
  EXPECT_EQ(validate_message(with([](auto& p) { p.temperature = -1.0f; })),
            "temperature must be finite and >= 0, got -1");
  EXPECT_EQ(validate_message(with([](auto& p) { p.temperature = kInf; })),
            "temperature must be finite and >= 0, got inf");
  EXPECT_EQ(validate_message(with([](auto& p) { p.top_k = -3; })), "top_k must be >= 0, got -3");
  EXPECT_EQ(validate_message(with([](auto& p) { p.min_p = 1.25f; })),
            "min_p must be in [0, 1], got 1.25");
  EXPECT_EQ(validate_message(with([](auto& p) { p.min_p = -0.5f; })),
            "min_p must be in [0, 1], got -0.5");
  EXPECT_EQ(validate_message(with([](auto& p) { p.repetition_penalty = 0.0f; })),
            "repetition_penalty must be finite and > 0, got 0");
  EXPECT_EQ(validate_message(with([](auto& p) { p.presence_penalty = kInf; })),
            "presence_penalty must be finite, got inf");
  EXPECT_EQ(validate_message(with([](auto& p) { p.frequency_penalty = kNaN; })),
            "frequency_penalty must be finite, got nan");
}

TEST(Validate, ConstructorRejectsInvalidParams) {
  EXPECT_THROW(Sampler(with([](auto& p) { p.top_p = 2.0f; })), InvalidArgument);
}

// next_uniform is the number the next draw of sample() uses (a device sampler draws with it), and
// unuse_uniform hands it back: the stream then continues as if it had never been taken.
TEST(Uniforms, NextUniformIsTheDrawsNumberAndCanBeHandedBack) {
  const SamplingParams p = with([](SamplingParams& s) { s.seed = 99; });
  Sampler a(p), b(p);
  const double u1 = b.next_uniform();
  EXPECT_GE(u1, 0.0);
  EXPECT_LT(u1, 1.0);
  b.unuse_uniform();
  EXPECT_EQ(b.next_uniform(), u1);
  const double u2 = b.next_uniform();
  EXPECT_NE(u1, u2);
  EXPECT_EQ(a.next_uniform(), u1);
  EXPECT_EQ(a.next_uniform(), u2);
  // The draw of sample() is the inverse CDF at next_uniform(): over four equal weights, token
  // floor(4u) (candidates in index order). A handed-back number is the one sample() then uses.
  Sampler c(p), d(p);
  const double u = d.next_uniform();
  d.unuse_uniform();
  std::vector<float> flat(4, 0.5f), copy = flat;
  const int32_t id = c.sample(flat, {}, {});
  EXPECT_EQ(id, static_cast<int32_t>(u * 4.0));
  EXPECT_EQ(d.sample(copy, {}, {}), id);
}

}  // namespace
}  // namespace infera
