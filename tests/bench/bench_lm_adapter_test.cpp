// `infera bench` runs the model the way the engine does and costs it correctly: the adapter's
// greedy tokens equal transformers' greedy reference on the fixtures (so the benchmark measures
// real work), the bytes it says a decode step streams equal the weight bytes in the
// safetensors file, and its FLOP count equals the matmul shapes of the Qwen3-0.6B config.
#include "bench_lm_adapter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "../model/fixture_cases.h"
#include "infera/error.h"

namespace infera::cli {
namespace {

// Sum of the tensors' byte ranges in a safetensors header, read here independently of io/.
struct FileWeights {
  double total_bytes = 0, embed_bytes = 0;
};
FileWeights safetensors_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  FileWeights w;
  const nlohmann::json j = nlohmann::json::parse(header);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const nlohmann::json& offsets = it.value().at("data_offsets");
    const double bytes = offsets.at(1).get<double>() - offsets.at(0).get<double>();
    w.total_bytes += bytes;
    if (name == "model.embed_tokens.weight") w.embed_bytes = bytes;
  }
  return w;
}

BenchModel load(const char* fixture, int threads) {
  BenchModel m = start_bench_backend("cpu", threads);
  load_bench_model(m, test::fixture(fixture), {});
  return m;
}

class AdapterTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AdapterTest, GreedyTokensEqualReference) {
  BenchModel m = load(GetParam(), 2);
  // A block size that does not divide the prompts, so sequences span partial blocks.
  LmBenchAdapter lm(*m.model, {.dtype = DType::F32, .block_size = 5});
  for (const test::LmCase& c : test::load_lm_cases(GetParam())) {
    SCOPED_TRACE(c.name);
    const auto steps = static_cast<int64_t>(c.greedy_new_ids.size()) - 1;
    const auto n = static_cast<int64_t>(c.input_ids.size());
    const StageSeconds p = lm.run_prefill(c.input_ids, n + steps, /*chunk=*/7);
    for (double s : {p.prepare, p.forward, p.postprocess}) EXPECT_TRUE(std::isfinite(s) && s >= 0);
    const std::vector<StageSeconds> t = lm.run_decode_steps(steps);
    EXPECT_EQ(static_cast<int64_t>(t.size()), steps);
    EXPECT_EQ(lm.generated(), c.greedy_new_ids);
    EXPECT_EQ(lm.context_length(), n + steps);
    EXPECT_THROW(lm.run_decode_steps(1), InvalidArgument);  // the cache is full
    lm.end_sequence();
  }
}

TEST_P(AdapterTest, DecodeBytesAreTheStreamedWeights) {
  BenchModel m = load(GetParam(), 1);
  const ModelInfo& info = m.model->info();
  const LmBenchAdapter lm(*m.model);
  const FileWeights w = safetensors_bytes(test::fixture(GetParam()) / "model.safetensors");
  // Tied: every tensor is read per token (the table is the LM head). Untied: all but the
  // embedding table, of which one row is gathered.
  const double streamed = info.tied_embeddings ? w.total_bytes : w.total_bytes - w.embed_bytes;
  EXPECT_EQ(lm.cost().weight_bytes_per_decode_token, streamed);
  // F32 K and V per position, every layer.
  EXPECT_EQ(lm.cost().kv_bytes_per_position,
            2.0 * static_cast<double>(info.layers * info.kv_heads * info.head_dim) * 4);
  EXPECT_EQ(lm.cost().decode_bytes(10), streamed + 10 * lm.cost().kv_bytes_per_position);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AdapterTest,
                         ::testing::Values("qwen3-micro", "qwen3-small-untied"));

TEST(AdapterErrors, DecodeBeforePrefillAndSmallCache) {
  BenchModel m = load("qwen3-micro", 1);
  LmBenchAdapter lm(*m.model);
  EXPECT_THROW(lm.run_decode_steps(1), InvalidArgument);
  const std::vector<int32_t> prompt = lm.synthetic_prompt(4);
  EXPECT_THROW(lm.run_prefill(prompt, 3, 512), InvalidArgument);
  EXPECT_THROW(lm.run_prefill({}, 3, 512), InvalidArgument);
}

TEST(CostModel, Qwen3_0_6BFlopsFromTheConfigShapes) {
  // ../shared/models/qwen3-0.6b/config.json, by hand: per layer q [2048, 1024], k and v
  // [1024, 1024], o [1024, 2048], gate/up [3072, 1024], down [1024, 3072]; norms 2 x 1024 +
  // 2 x 128; a tied [151936, 1024] table and a final norm of 1024.
  const double hidden = 1024, inter = 3072, vocab = 151936, layers = 28, q = 16, kv = 8, hd = 128;
  const double layer_matmul =
      hidden * q * hd + 2 * hidden * kv * hd + q * hd * hidden + 3 * hidden * inter;
  const double norms = 2 * hidden + 2 * hd;
  ModelInfo info;
  info.layers = 28, info.hidden = 1024, info.q_heads = 16, info.kv_heads = 8, info.head_dim = 128;
  info.vocab = 151936, info.tied_embeddings = true, info.weight_dtype = DType::BF16;
  info.parameters = static_cast<int64_t>(layers * (layer_matmul + norms) + vocab * hidden + hidden);
  ASSERT_EQ(info.parameters, 596049920);  // the model card's 0.6B (0.44B without embeddings)

  const LmCostModel c =
      make_lm_cost_model(info, {.layers = 28, .kv_heads = 8, .head_dim = 128}, DType::F32);
  const double n = 512;
  // Causal attention: query i attends to i + 1 keys; q.k and p.v are head_dim MACs each.
  const double attention = layers * q * 4 * hd * n * (n + 1) / 2;
  const double expected = 2 * layers * layer_matmul * n + 2 * vocab * hidden + attention;
  // The cost model counts norm weights as matmul weights: 0.011% of the layer weights.
  EXPECT_NEAR(c.prefill_flops(512), expected, 2e-4 * expected);
  EXPECT_EQ(c.weight_bytes_per_decode_token, 2.0 * 596049920);  // bf16, the whole model
  EXPECT_EQ(c.kv_bytes_per_position, 2.0 * layers * kv * hd * 4);
  const LmCostModel half =
      make_lm_cost_model(info, {.layers = 28, .kv_heads = 8, .head_dim = 128}, DType::BF16);
  EXPECT_EQ(half.kv_bytes_per_position, 2.0 * layers * kv * hd * 2);
  // Prefilling after a cached prefix adds the prefix to every query's keys.
  EXPECT_NEAR(c.prefill_flops(4, 10) - c.prefill_flops(4, 0), layers * q * 4 * hd * 4 * 10, 1e-6);
}

}  // namespace
}  // namespace infera::cli
