// 8-bit and 4-bit group-64 weights for the decision model's encoder and head layers:
// the quantizers' own properties (one scale per 64 weights shared by both 32-blocks, every value
// within its rounding step, dequantized by the reference dequantizer of tests/quant), the
// divisibility report, and quality against full precision on decision-micro's reference cases.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/cpu/cpu_backend.h"
#include "core/dtype_convert.h"
#include "decision/decision_model.h"
#include "infera/error.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"
#include "test_backend.h"
#include "test_compare.h"
#include "test_paths.h"

namespace infera::decision {
namespace {

std::vector<float> random_row(int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> x(static_cast<size_t>(k));
  for (float& v : x) v = dist(rng);
  x[70] = 0.9f;  // an outlier in the second group: its scale must not leak into the first
  return x;
}

TEST(Group64, EightBitSharesOneScalePerGroup) {
  const int64_t k = 192;
  const auto x = random_row(k, 1);
  std::vector<quant::BlockQ8_0> blocks(static_cast<size_t>(k / 32));
  quant::quantize_row_q8_0_g64(x.data(), k, blocks.data());
  std::vector<float> y(static_cast<size_t>(k));
  quant::dequantize_row_q8_0(blocks.data(), k, y.data());
  for (int64_t g = 0; g < k / 64; ++g) {
    float amax = 0;
    for (int64_t i = 0; i < 64; ++i)
      amax = std::max(amax, std::fabs(x[static_cast<size_t>(g * 64 + i)]));
    const uint16_t want = f32_to_f16(amax / 127.0f);
    EXPECT_EQ(blocks[static_cast<size_t>(2 * g)].d, want) << "group " << g;
    EXPECT_EQ(blocks[static_cast<size_t>(2 * g + 1)].d, want) << "group " << g;
    const float d = f16_to_f32(want);
    for (int64_t i = 0; i < 64; ++i) {
      const auto j = static_cast<size_t>(g * 64 + i);
      EXPECT_LE(std::fabs(y[j] - x[j]), 0.5f * d + 1e-3f * amax) << j;
    }
  }
  EXPECT_THROW(quant::quantize_row_q8_0_g64(x.data(), 96, blocks.data()), InvalidArgument);
}

TEST(Group64, FourBitSharesOneScalePerGroup) {
  const int64_t k = 192;
  const auto x = random_row(k, 2);
  std::vector<quant::BlockQ4_0> blocks(static_cast<size_t>(k / 32));
  quant::quantize_row_q4_0_g64(x.data(), k, blocks.data());
  std::vector<float> y(static_cast<size_t>(k));
  quant::dequantize_row_q4_0(blocks.data(), k, y.data());
  for (int64_t g = 0; g < k / 64; ++g) {
    float amax = 0, max = 0;
    for (int64_t i = 0; i < 64; ++i) {
      const float v = x[static_cast<size_t>(g * 64 + i)];
      if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
    }
    const uint16_t want = f32_to_f16(max / -8.0f);
    EXPECT_EQ(blocks[static_cast<size_t>(2 * g)].d, want);
    EXPECT_EQ(blocks[static_cast<size_t>(2 * g + 1)].d, want);
    const float d = std::fabs(f16_to_f32(want));
    for (int64_t i = 0; i < 64; ++i) {
      const auto j = static_cast<size_t>(g * 64 + i);
      // Round to nearest (d / 2), except values past +7 d on the side opposite the extreme,
      // which clamp to 7 (at most d).
      EXPECT_LE(std::fabs(y[j] - x[j]), d + 1e-3f * amax) << j;
    }
  }
}

std::vector<std::vector<int32_t>> fixture_inputs() {
  std::ifstream in(test::fixture("decision-micro") / "cases.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> ids;
  for (const auto& c : j["cases"]) ids.push_back(c["input_ids"].get<std::vector<int32_t>>());
  return ids;
}

// Both run on $INFERA_TEST_DEVICE (tests/test_backend.h): on CUDA the quantized weights go
// through its Q8_0/Q4_0 matmul (the report's 20 quantized matrices prove that path was taken).
std::unique_ptr<Backend> device_backend(int threads) {
  std::string why;
  auto b = test::make_test_backend(threads, &why);
  if (!b) std::printf("%s\n", why.c_str());
  return b;
}

TEST(DecisionQuant, ReportNamesEveryTensorKeptInFullPrecision) {
  auto backend = device_backend(1);
  if (!backend) GTEST_SKIP() << "no backend for INFERA_TEST_DEVICE=" << test::test_device();
  ModelOptions o;
  o.weights = WeightFormat::Int8Group64;
  auto m = DecisionModel::load(test::fixture("decision-micro"), *backend, o);
  const QuantReport& r = m->quant_report();
  std::map<std::string, std::string> kept;
  for (const auto& k : r.kept) kept[k.tensor] = k.reason;
  for (int l = 0; l < 4; ++l) {
    const std::string name = "encoder.layers." + std::to_string(l) + ".mlp.Wo.weight";
    ASSERT_TRUE(kept.count(name)) << name;
    EXPECT_NE(kept[name].find("96 is not a multiple of the group size 64"), std::string::npos);
  }
  for (const char* name : {"action.0.weight", "action.2.weight", "scorer.weight"})
    EXPECT_NE(kept[name].find("always stay full precision"), std::string::npos) << name;
  EXPECT_TRUE(kept.count("encoder.embeddings.tok_embeddings.weight"));
  // Everything else that is a matrix is quantized: 4 x (Wqkv, Wo, Wi) + 2 x (Wqkv, Wo, W1, W2).
  EXPECT_EQ(r.quantized.size(), 20u);
  for (const std::string& name : r.quantized) EXPECT_EQ(kept.count(name), 0u) << name;
}

TEST(DecisionQuant, QualityAgainstFullPrecisionOnTheReferenceCases) {
  auto backend = device_backend(2);
  if (!backend) GTEST_SKIP() << "no backend for INFERA_TEST_DEVICE=" << test::test_device();
  const auto inputs = fixture_inputs();
  auto full = DecisionModel::load(test::fixture("decision-micro"), *backend, {});
  const auto ref = full->forward(inputs);
  // Bounds: group-64 rounding of weights ~N(0, s) moves logits by O(step * sqrt(D)) relative;
  // measured below (printed), the bounds leave ~3x room and still catch a wrong scale or a
  // quantizer that ignores its groups (which moves probabilities by > 0.1).
  const std::pair<WeightFormat, double> formats[] = {{WeightFormat::Int8Group64, 0.005},
                                                     {WeightFormat::Int4Group64, 0.05}};
  for (const auto& [format, bound] : formats) {
    ModelOptions o;
    o.weights = format;
    auto q = DecisionModel::load(test::fixture("decision-micro"), *backend, o);
    const auto got = q->forward(inputs);
    double worst = 0;
    int agree = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const double d = test::max_abs_diff(got[i].option_probs, ref[i].option_probs);
      worst = std::fmax(worst, d);
      const auto top = [](const std::vector<float>& p) {
        return std::max_element(p.begin(), p.end()) - p.begin();
      };
      agree += top(got[i].option_probs) == top(ref[i].option_probs);
      std::printf("%s case %zu: max |dp| %.5f, top-1 %s\n",
                  std::string(weight_format_name(format)).c_str(), i, d,
                  top(got[i].option_probs) == top(ref[i].option_probs) ? "same" : "differs");
    }
    EXPECT_LE(worst, bound) << weight_format_name(format);
    EXPECT_GT(worst, 0.0) << weight_format_name(format) << ": quantization changed nothing";
    EXPECT_EQ(agree, static_cast<int>(inputs.size())) << weight_format_name(format);
  }
}

}  // namespace
}  // namespace infera::decision
