// Backend::sample_rows on the GPU against the host Sampler (sample/sampler.cpp, the reference: a
// scalar implementation of the Hugging Face pipeline with its own tests): both get the same
// uniform number per row (Sampler::next_uniform of a sampler seeded alike), so the chosen ids must
// be equal, row by row, over rows with ties, -inf and NaN entries at the vocabulary of Qwen3
// (151,936). Then the generator end to end: sampling on the device gives the tokens of sampling on
// the host. Every test skips, saying so, where no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../test_paths.h"
#include "backend/cuda/cuda_backend.h"
#include "engine/generator.h"
#include "infera/error.h"
#include "model/causal_lm.h"
#include "sample/sampler.h"

namespace infera {
namespace {

constexpr int64_t kVocab = 151936;
constexpr float kInf = std::numeric_limits<float>::infinity();

class CudaSamplingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
    backend_ = make_cuda_backend(0, {});
  }
  Tensor upload(const std::vector<float>& rows, int64_t n, int64_t width = kVocab) {
    const Tensor host("logits", DType::F32, Shape{n, width}, Device::CPU,
                      const_cast<float*>(rows.data()), nullptr);
    return backend_->prepare_weight(host);
  }
  std::unique_ptr<Backend> backend_;
};

// Row kinds: 0 spread logits, 1 logits on a coarse grid (many ties, also at the top-k and top-p
// cuts), 2 a peaked row (one token far above), 3 a row with -inf and NaN entries and a tied
// maximum, 4 a flat row (every logit equal).
std::vector<float> make_row(int kind, std::mt19937_64& rng, int64_t width = kVocab) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(static_cast<size_t>(width));
  for (float& v : row) v = normal(rng);
  if (kind == 1)
    for (float& v : row) v = std::round(v * 2.0f) / 2.0f;
  if (kind == 2) row[static_cast<size_t>(rng() % static_cast<uint64_t>(width))] = 40.0f;
  if (kind == 3) {
    for (size_t i = 0; i < row.size(); i += 7) row[i] = -kInf;
    for (size_t i = 3; i < row.size(); i += 101) row[i] = std::numeric_limits<float>::quiet_NaN();
    row[row.size() / 151] = row[row.size() * 3 / 5] = 15.0f;
  }
  if (kind == 4) std::fill(row.begin(), row.end(), 1.25f);
  return row;
}

struct Case {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
};

// The n rows of `logits` (width each) sampled on the device and by host Samplers seeded alike
// for each case; returns the number of rows compared (mismatches are test failures).
int compare_rows(Backend& backend, std::vector<float>& logits, int n, int64_t width,
                 const std::vector<Case>& cases, int rows_per_kind) {
  const Tensor host_x("logits", DType::F32, Shape{n, width}, Device::CPU, logits.data(), nullptr);
  const Tensor x = backend.prepare_weight(host_x);
  int compared = 0;
  uint64_t seed = 1;
  for (const Case& c : cases) {
    std::vector<RowSampling> rows;
    std::vector<int32_t> want;
    for (int r = 0; r < n; ++r, ++seed) {
      SamplingParams sp;
      sp.temperature = c.temperature;
      sp.top_k = c.top_k;
      sp.top_p = c.top_p;
      sp.min_p = c.min_p;
      sp.seed = seed;
      Sampler host(sp), twin(sp);
      std::vector<float> row(logits.begin() + r * width, logits.begin() + (r + 1) * width);
      want.push_back(host.sample(row, {}, {}));
      rows.push_back({c.temperature, c.top_k, c.top_p, c.min_p, twin.next_uniform()});
    }
    std::vector<SampledId> got(rows.size());
    backend.sample_rows(x, rows, got);
    for (int r = 0; r < n; ++r, ++compared) {
      EXPECT_EQ(got[r].drew, 1);
      EXPECT_EQ(got[r].id, want[r]) << "width " << width << " T " << c.temperature << " top_k "
                                    << c.top_k << " top_p " << c.top_p << " min_p " << c.min_p
                                    << " row " << r << " (kind " << r / rows_per_kind << ")";
    }
  }
  return compared;
}

// Rows of every kind at `width`, compared as compare_rows.
int compare_with_host(Backend& backend, int64_t width, int rows_per_kind,
                      const std::vector<Case>& cases) {
  constexpr int kKinds = 5;
  const int n = rows_per_kind * kKinds;
  std::mt19937_64 rng(20261130 + static_cast<uint64_t>(width));
  std::vector<float> logits;
  for (int kind = 0; kind < kKinds; ++kind)
    for (int i = 0; i < rows_per_kind; ++i) {
      const std::vector<float> row = make_row(kind, rng, width);
      logits.insert(logits.end(), row.begin(), row.end());
    }
  return compare_rows(backend, logits, n, width, cases, rows_per_kind);
}

TEST_F(CudaSamplingTest, SampleRowsEqualsTheHostSamplerGivenTheSameUniforms) {
  std::vector<Case> cases;
  for (const float t : {1.0f, 0.7f})
    for (const int32_t k : {0, 1, 40, static_cast<int32_t>(kVocab)})
      for (const float p : {0.1f, 0.9f, 1.0f}) cases.push_back({t, k, p, 0.0f});
  cases.push_back({1.0f, 0, 1.0f, 0.05f});   // min-p alone
  cases.push_back({0.8f, 50, 0.95f, 0.1f});  // everything at once
  cases.push_back({1.3f, 1000, 0.5f, 0.0f});
  const int compared = compare_with_host(*backend_, kVocab, 3, cases);
  std::printf("  %d rows of %lld compared\n", compared, static_cast<long long>(kVocab));
}

// Widths that leave threads idle (below one block of 1024, not a multiple of it): a small case
// list, also the one compute-sanitizer's racecheck runs.
TEST_F(CudaSamplingTest, NarrowRowsEqualTheHostSampler) {
  const std::vector<Case> cases = {{1.0f, 0, 0.9f, 0.0f},
                                   {0.7f, 40, 0.9f, 0.0f},
                                   {1.0f, 3, 1.0f, 0.0f},
                                   {1.0f, 0, 1.0f, 0.05f},
                                   {0.9f, 0, 0.3f, 0.0f}};
  int compared = 0;
  for (const int64_t width : {300, 5003}) compared += compare_with_host(*backend_, width, 2, cases);
  std::printf("  %d narrow rows compared\n", compared);
}

// The kernel finds top-k's cut on the unscaled row and maps it through the division: rows whose
// logits are neighbouring floats (so that dividing by a temperature > 1 merges some of them into
// ties, also at the cut), and rows where a small temperature sends large negative logits to -inf
// (fewer than k live values remain, all of them stay).
TEST_F(CudaSamplingTest, TopKCutSurvivesTiesMadeByTheTemperature) {
  constexpr int kRows = 6;
  std::mt19937_64 rng(1130);
  std::vector<float> logits;
  for (int r = 0; r < kRows; ++r) {
    std::vector<float> row(static_cast<size_t>(kVocab));
    if (r < 4) {
      std::uniform_int_distribution<int> ulps(0, 3000);
      const auto base = std::bit_cast<uint32_t>(1.0f + static_cast<float>(r));
      for (float& v : row) v = std::bit_cast<float>(base + static_cast<uint32_t>(ulps(rng)));
    } else {
      std::normal_distribution<float> normal(0.0f, 1e-10f);
      for (size_t i = 0; i < row.size(); ++i) row[i] = i % 500 == 0 ? normal(rng) : -1e10f;
    }
    logits.insert(logits.end(), row.begin(), row.end());
  }
  const std::vector<Case> cases = {{3.0f, 40, 1.0f, 0.0f},     {3.0f, 500, 0.9f, 0.0f},
                                   {7.3f, 2000, 1.0f, 0.0f},   {1.7f, 1, 1.0f, 0.0f},
                                   {1e-30f, 1000, 1.0f, 0.0f}, {1e-30f, 100, 1.0f, 0.0f}};
  const int compared = compare_rows(*backend_, logits, kRows, kVocab, cases, kRows);
  std::printf("  %d rows with temperature-made ties compared\n", compared);
}

// Greedy rows pick the first of tied maxima, as the host's argmax; a temperature so small that
// the maximum overflows when divided is greedy too and does not consume the uniform number; a row
// without any value above -inf reports -1 (the host sampler throws for it).
TEST_F(CudaSamplingTest, GreedyRowsAreTheFirstArgmax) {
  std::mt19937_64 rng(7);
  std::vector<float> logits;
  for (int kind : {0, 1, 3, 4}) {
    const std::vector<float> row = make_row(kind, rng);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::vector<float> dead(static_cast<size_t>(kVocab), -kInf);
  dead[5] = std::numeric_limits<float>::quiet_NaN();
  logits.insert(logits.end(), dead.begin(), dead.end());
  const Tensor x = upload(logits, 5);
  // 1e-39 (subnormal): every row's maximum (1.25 at least) divided by it overflows float32.
  for (const float t : {0.0f, 1e-39f}) {
    std::vector<RowSampling> rows(5, RowSampling{t, 40, 0.9f, 0.0f, 0.5});
    std::vector<SampledId> got(5);
    backend_->sample_rows(x, rows, got);
    for (int r = 0; r < 4; ++r) {
      const std::span<const float> row(logits.data() + r * kVocab, static_cast<size_t>(kVocab));
      EXPECT_EQ(got[r].id, argmax(row)) << "row " << r << " temperature " << t;
      EXPECT_EQ(got[r].drew, 0) << "row " << r;
      SamplingParams sp;
      sp.temperature = t;
      sp.top_k = 40;
      sp.top_p = 0.9f;
      Sampler host(sp);
      std::vector<float> copy(row.begin(), row.end());
      EXPECT_EQ(got[r].id, host.sample(copy, {}, {})) << "row " << r;
    }
    EXPECT_EQ(got[4].id, -1);
  }
}

TEST_F(CudaSamplingTest, RejectsRowsOutsideTheSamplersRanges) {
  std::vector<float> logits(static_cast<size_t>(kVocab), 0.0f);
  const Tensor x = upload(logits, 1);
  std::vector<SampledId> got(1);
  for (const RowSampling bad :
       {RowSampling{1.0f, 0, 0.0f, 0.0f, 0.5}, RowSampling{1.0f, 0, 1.0f, 0.0f, 1.0},
        RowSampling{NAN, 0, 1.0f, 0.0f, 0.5}, RowSampling{1.0f, -1, 1.0f, 0.0f, 0.5}}) {
    std::vector<RowSampling> rows{bad};
    EXPECT_THROW(backend_->sample_rows(x, rows, got), InvalidArgument);
  }
}

// The generator samples on the device when it can; with the same seeds its tokens are the host
// sampler's (the logits are the same: one backend, one model). A request with a penalty in the
// same batch sends the whole step to the host, which must not change anything either.
TEST_F(CudaSamplingTest, GeneratorSamplesOnTheDeviceLikeTheHost) {
  auto model = load_causal_lm(test::fixture("qwen3-micro"), *backend_, {});
  const auto vocab = static_cast<int32_t>(model->info().vocab);
  std::vector<GenerationRequest> requests(4);
  const SamplingParams kinds[4] = {{.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .seed = 11},
                                   {.temperature = 1.0f, .seed = 12},
                                   {.temperature = 1.2f, .top_p = 0.7f, .min_p = 0.02f, .seed = 13},
                                   {.temperature = 0.0f}};
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt = {static_cast<int32_t>((17 * i + 3) % vocab), 5 % vocab, 9 % vocab};
    requests[i].max_new_tokens = 24;
    requests[i].sampling = kinds[i];
  }
  ASSERT_TRUE(backend_->supports(Op::SampleRows, {DType::F32}));  // else both runs are the host's
  GeneratorOptions on, off;
  off.device_sampling = false;
  const auto device = Generator(*model, on).generate(requests);
  const auto host = Generator(*model, off).generate(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(device[i].tokens, host[i].tokens) << "request " << i;
    EXPECT_EQ(device[i].tokens.size(), 24u) << "request " << i;
  }
  requests[1].sampling.repetition_penalty = 1.1f;  // this batch samples on the host
  const auto mixed_device = Generator(*model, on).generate(requests);
  const auto mixed_host = Generator(*model, off).generate(requests);
  for (size_t i = 0; i < requests.size(); ++i)
    EXPECT_EQ(mixed_device[i].tokens, mixed_host[i].tokens) << "request " << i;
}

}  // namespace
}  // namespace infera
