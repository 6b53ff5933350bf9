// The batch contract end to end: sequences of different lengths run together in one forward pass
// give each the logits it gets alone (prefill, then a mixed step of decode tokens and prompt
// chunks), and reduced-precision KV caches stay within a stated distance of the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "fixture_cases.h"
#include "model/causal_lm.h"
#include "sequence_runner.h"
#include "test_backend.h"
#include "test_compare.h"

namespace infera {
namespace {

using test::max_abs_diff;

class BatchParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = test::make_test_backend(2, &why);
    if (!backend_) GTEST_SKIP() << why;
    model_ = load_causal_lm(test::fixture(GetParam()), *backend_, {});
  }
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<CausalLM> model_;
};

TEST_P(BatchParity, EightSequencesTogetherEqualEachAlone) {
  const int64_t vocab = model_->info().vocab;
  const std::vector<int64_t> lengths = {1, 2, 5, 17, 31, 33, 64, 100};  // around 32-row blocks
  const std::vector<int64_t> more = {3, 1, 40, 1, 1, 2, 1, 7};          // a second, mixed step
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> first(8), second(8);
  for (size_t s = 0; s < 8; ++s) {
    for (int64_t i = 0; i < lengths[s]; ++i) first[s].push_back(int32_t(rng() % uint32_t(vocab)));
    for (int64_t i = 0; i < more[s]; ++i) second[s].push_back(int32_t(rng() % uint32_t(vocab)));
  }
  // Alone: each sequence in its own cache, every row's logits, step by step.
  std::vector<std::vector<float>> alone1(8), alone2(8);
  for (size_t s = 0; s < 8; ++s) {
    test::SequenceRunner seq(*model_, lengths[s] + more[s]);
    std::vector<int64_t> rows1(size_t(lengths[s])), rows2(size_t(more[s]));
    for (size_t i = 0; i < rows1.size(); ++i) rows1[i] = int64_t(i);
    for (size_t i = 0; i < rows2.size(); ++i) rows2[i] = int64_t(i);
    alone1[s] = seq.run(first[s], rows1);
    alone2[s] = seq.run(second[s], rows2);
  }
  // Together: one cache of small blocks (interleaved allocation), one forward per step.
  KvCache cache(*backend_, model_->kv_shape(), {.block_size = 8, .num_blocks = 64});
  std::vector<SeqId> ids;
  for (size_t s = 0; s < 8; ++s) {
    ids.push_back(cache.add_sequence());
    ASSERT_TRUE(cache.reserve(ids.back(), lengths[s] + more[s]));
  }
  for (int step = 0; step < 2; ++step) {
    std::vector<SeqChunk> chunks;
    for (size_t s = 0; s < 8; ++s)
      chunks.push_back({ids[s], step == 0 ? first[s] : second[s], OutputRows::All});
    std::vector<float> logits(size_t(count_outputs(chunks) * vocab));
    run_step(*model_, cache, chunks, logits);
    size_t offset = 0;
    double worst = 0;
    for (size_t s = 0; s < 8; ++s) {
      const auto& want = step == 0 ? alone1[s] : alone2[s];
      const double diff =
          max_abs_diff(std::span<const float>(logits).subspan(offset, want.size()), want);
      // Two GPU runs (different kernels for different batch shapes) may each be off by the
      // tolerance: twice the scale.
      EXPECT_LE(diff, test::logit_tolerance(1e-5, 2 * test::max_abs(want)))
          << "step " << step << " sequence " << s;
      worst = std::max(worst, diff);
      offset += want.size();
    }
    std::printf("  %s step %d: 8 sequences together vs alone, max |logit diff| %.2e\n",
                GetParam().c_str(), step, worst);
    cache.check_invariants();
  }
}

// bf16/f16 keys and values against the transformers reference (computed with an f32 cache).
// Rounding K and V to 8 (bf16) or 11 (f16) significant bits perturbs every attention output by up
// to 2^-9 resp. 2^-12 relative (a one-token prompt makes it exactly the rounding of V), which the
// rest of the network carries to the logits in proportion to their size: measured at 1.8e-3 (bf16)
// and 2.7e-4 (f16) of the largest |logit|. The bounds, 4e-3 and 5e-4 of it, leave 2x room while
// a wrong cache layout or dtype mix-up (errors of order 1) fails.
TEST_P(BatchParity, ReducedPrecisionKvCacheStaysNearTheReference) {
  for (auto [dtype, factor] : {std::pair{DType::BF16, 4e-3}, std::pair{DType::F16, 5e-4}}) {
    double worst = 0;
    for (const auto& c : test::load_lm_cases(GetParam())) {
      double scale = 0;
      for (float v : c.logits) scale = std::max(scale, double(std::fabs(v)));
      test::SequenceRunner seq(*model_, int64_t(c.input_ids.size()), dtype);
      const double diff = max_abs_diff(seq.run(c.input_ids, c.logits_positions), c.logits);
      // On the GPU the compute's own rounding (test_backend.h) adds to the cache's.
      EXPECT_LE(diff, std::max(factor * scale, test::logit_tolerance(0.0, scale)))
          << dtype_name(dtype) << " " << c.name;
      worst = std::max(worst, diff / scale);
    }
    std::printf(
        "  %s KV %s: max |logit diff| vs transformers %.2e of the largest |logit| (bound %.0e)\n",
        GetParam().c_str(), std::string(dtype_name(dtype)).c_str(), worst, factor);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchParity,
                         ::testing::Values("qwen3-micro", "qwen3-small-untied"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace infera
