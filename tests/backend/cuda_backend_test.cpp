// What the op harness cannot show about the CUDA backend: graph replay of repeated steps equals
// eager execution bit for bit while each step's indices change, a model's decode on the GPU
// follows the CPU's, out-of-memory and contract violations are clear errors. Every test skips,
// saying so, where no CUDA device is visible.
#include "backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "../model/fixture_cases.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/kernels.h"
#include "core/dtype_convert.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "infera/error.h"
#include "model/causal_lm.h"
#include "test_compare.h"

namespace infera {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
  static std::unique_ptr<Backend> cuda(bool graphs, bool exact = false) {
    CudaOptions o;
    o.graphs = graphs;
    o.exact_f32 = exact;
    return make_cuda_backend(0, o);
  }
};

// Decode steps of three sequences over one paged cache, the rows in a different order every step
// (as the generator rotates them): the logits of every step, per sequence.
std::vector<std::vector<float>> decode_three(CausalLM& model, int steps) {
  const int32_t vocab = static_cast<int32_t>(model.info().vocab);
  KvCache cache(model.backend(), model.kv_shape(),
                {.block_size = 16, .num_blocks = 24, .dtype = DType::BF16});
  const std::vector<std::vector<int32_t>> prompts = {
      {785, 6722, 315, 9625, 374},
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17},
      {42, 9}};  // two rows: a one-row step of the 2-layer fixture (residual_mlp as one kernel)
                 // records fewer launches than the stream prefix, so it would never stream
  std::vector<SeqId> ids;
  std::vector<int32_t> next;
  for (auto p : prompts) {
    for (int32_t& id : p) id %= vocab;
    ids.push_back(cache.add_sequence());
    EXPECT_TRUE(cache.reserve(ids.back(), static_cast<int64_t>(p.size()) + steps + 1));
    const SeqChunk chunk{ids.back(), p, OutputRows::Last};
    std::vector<float> logits(static_cast<size_t>(model.info().vocab));
    run_step(model, cache, std::span<const SeqChunk>(&chunk, 1), logits);
    next.push_back(
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  std::vector<std::vector<float>> out;
  for (int s = 0; s < steps; ++s) {
    std::vector<SeqChunk> chunks;
    std::vector<size_t> order = {0, 1, 2};
    std::rotate(order.begin(), order.begin() + s % 3, order.end());
    for (size_t i : order) chunks.push_back({ids[i], std::span<const int32_t>(&next[i], 1)});
    std::vector<float> logits(static_cast<size_t>(3 * model.info().vocab));
    run_step(model, cache, chunks, logits);
    const auto vocab = static_cast<size_t>(model.info().vocab);
    for (size_t c = 0; c < 3; ++c) {
      const size_t i = order[c];
      out.emplace_back(logits.begin() + static_cast<std::ptrdiff_t>(c * vocab),
                       logits.begin() + static_cast<std::ptrdiff_t>((c + 1) * vocab));
      // Feed a token that depends on the step so that every step's inputs differ.
      next[i] = static_cast<int32_t>((int64_t{next[i]} * 31 + s + 7) % vocab);
    }
  }
  return out;
}

TEST_F(CudaBackendTest, GraphReplayEqualsEagerBitForBit) {
  const auto dir = test::fixture("qwen3-micro");
  auto eager_backend = cuda(false);
  auto graph_backend = cuda(true);
  auto eager = load_causal_lm(dir, *eager_backend, {});
  auto graphed = load_causal_lm(dir, *graph_backend, {});
  const auto want = decode_three(*eager, 8);
  const auto got = decode_three(*graphed, 8);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step/sequence " << i;
  const CudaStats s = *cuda_stats(*graph_backend);
  std::printf("  graphs: %lld captured, %lld launches, %lld eager steps, %lld ops\n",
              static_cast<long long>(s.graph_captures), static_cast<long long>(s.graph_launches),
              static_cast<long long>(s.eager_steps), static_cast<long long>(s.ops));
  // Steps 1 and 2 of the same shape run eagerly and get captured; the other six replay.
  EXPECT_GE(s.graph_launches, 6);
  EXPECT_EQ(cuda_stats(*eager_backend)->graph_launches, 0);
}

// A never-seen step launches its kernels while the host records it (streaming); the results
// are the same as launching at the step's end, and a streamed step is still captured on its
// second sight and replayed after.
TEST_F(CudaBackendTest, StreamedStepsEqualStepsLaunchedAtFlush) {
  const auto dir = test::fixture("qwen3-micro");
  CudaOptions at_flush;
  at_flush.stream_new_steps = false;
  auto flush_backend = make_cuda_backend(0, at_flush);
  auto stream_backend = cuda(true);
  auto flushed = load_causal_lm(dir, *flush_backend, {});
  auto streamed = load_causal_lm(dir, *stream_backend, {});
  const auto want = decode_three(*flushed, 8);
  const auto got = decode_three(*streamed, 8);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "step/sequence " << i;
  const CudaStats s = *cuda_stats(*stream_backend);
  std::printf("  streamed: %lld of %lld eager steps, %lld graph launches\n",
              static_cast<long long>(s.streamed_steps), static_cast<long long>(s.eager_steps),
              static_cast<long long>(s.graph_launches));
  EXPECT_GE(s.streamed_steps, 4);  // three prompts of different lengths, the first decode step
  EXPECT_GE(s.graph_captures, 1);
  EXPECT_GE(s.graph_launches, 6);
  EXPECT_EQ(cuda_stats(*flush_backend)->streamed_steps, 0);
}

// Decode rows (n <= 8) take the f32 GEMV and attention kernels in both modes; the prompts'
// prefill is f32 in exact mode and rounds through bf16 tensor cores otherwise, and both share the
// bf16 KV cache with the CPU run. Bounds: 2e-3 in f32 (summation order, an occasional bf16
// rounding flip of a cached value), 5e-2 with bf16 prefill (operands rounded to 8 bits).
TEST_F(CudaBackendTest, DecodeFollowsTheCpu) {
  const auto dir = test::fixture("qwen3-small-untied");
  auto cpu = make_cpu_backend(2);
  auto ref = load_causal_lm(dir, *cpu, {});
  const auto want = decode_three(*ref, 6);
  for (const bool exact : {true, false}) {
    auto gpu = cuda(true, exact);
    auto model = load_causal_lm(dir, *gpu, {});
    const auto got = decode_three(*model, 6);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, test::max_abs_diff(got[i], want[i]));
    std::printf("  decode vs cpu (%s): max |logit diff| %.2e\n",
                exact ? "exact f32" : "bf16 prefill", worst);
    EXPECT_LE(worst, exact ? 2e-3 : 5e-2);
  }
}

TEST_F(CudaBackendTest, OutOfMemoryNamesTheBytesAskedAndFree) {
  auto b = cuda(true);
  try {
    b->alloc("huge", DType::F32, {int64_t{1} << 40, 1024});
    ADD_FAILURE() << "expected an out-of-memory error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("out of GPU memory allocating huge"), std::string::npos) << m;
    EXPECT_NE(m.find("MiB free"), std::string::npos) << m;
  }
  // The backend stays usable.
  Tensor t = b->alloc("small", DType::F32, {4});
  std::vector<float> v(4, 1.0f);
  b->to_host(t, v);
  EXPECT_EQ(v, std::vector<float>(4, 0.0f));
}

TEST_F(CudaBackendTest, IndexTensorsMustComeFromUploadBatch) {
  auto b = cuda(true);
  BatchDesc d;
  d.tokens = {1, 2};
  const Batch batch = b->upload_batch(d);
  Tensor table = b->alloc("table", DType::F32, {8, 4});
  Tensor out = b->alloc("out", DType::F32, {2, 4});
  EXPECT_NO_THROW(b->embedding(table, batch.tokens, out));
  Tensor not_a_batch = b->alloc("ids", DType::F32, {2});
  EXPECT_THROW(b->embedding(table, not_a_batch, out), InvalidArgument);
  Tensor host("host", DType::F32, {2, 4}, Device::CPU, nullptr, nullptr);
  EXPECT_THROW(b->add(host, out, out), InvalidArgument);
}

// prepare_weights: one allocation, each weight at the next 256-byte boundary after the one before
// (so bf16 projections of whole 256-byte rows follow each other exactly: the GEMM decoder
// stack's one q/k/v GEMM), each holding its host values (read back through the embedding op).
TEST_F(CudaBackendTest, PrepareWeightsPlacesWeightsOneAfterAnother) {
  auto b = cuda(true);
  const std::vector<std::pair<DType, Shape>> specs = {{DType::BF16, {24, 128}},
                                                      {DType::F32, {3, 5}},
                                                      {DType::BF16, {8, 128}},
                                                      {DType::BF16, {8, 128}}};
  std::vector<std::vector<uint16_t>> bf16_values;
  std::vector<std::vector<float>> f32_values, want;
  std::vector<Tensor> host;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& [dtype, shape] = specs[i];
    std::vector<float> v(static_cast<size_t>(shape.numel()));
    for (size_t j = 0; j < v.size(); ++j) v[j] = float(int((i * 131 + j * 7) % 61) - 30) / 8.0f;
    want.push_back(v);  // exact in bf16: multiples of 1/8 below 4
    void* data;
    if (dtype == DType::BF16) {
      bf16_values.emplace_back();
      for (float f : v) bf16_values.back().push_back(f32_to_bf16(f));
      data = bf16_values.back().data();
    } else {
      f32_values.push_back(v);
      data = f32_values.back().data();
    }
    host.emplace_back("w" + std::to_string(i), dtype, shape, Device::CPU, data, nullptr);
  }
  const std::vector<Tensor> dev = b->prepare_weights(host);
  ASSERT_EQ(dev.size(), host.size());
  const auto* base = static_cast<const char*>(dev[0].data());
  EXPECT_EQ(static_cast<const char*>(dev[1].data()), base + 24 * 128 * 2);
  EXPECT_EQ(static_cast<const char*>(dev[2].data()), base + 24 * 128 * 2 + 256);  // 60 B -> 256
  EXPECT_EQ(static_cast<const char*>(dev[3].data()), base + 24 * 128 * 2 + 256 + 8 * 128 * 2);
  for (size_t i = 0; i < dev.size(); ++i) {
    EXPECT_EQ(dev[i].device(), Device::CUDA);
    EXPECT_EQ(dev[i].name(), host[i].name());
    EXPECT_EQ(dev[i].dtype(), host[i].dtype());
    EXPECT_EQ(dev[i].shape(), host[i].shape());
    const int64_t rows = dev[i].dim(0), cols = dev[i].dim(1);
    BatchDesc d;
    for (int32_t r = 0; r < rows; ++r) d.tokens.push_back(r);
    const Batch batch = b->upload_batch(d);
    Tensor out = b->alloc("out", DType::F32, {rows, cols});
    b->embedding(dev[i], batch.tokens, out);
    std::vector<float> got(static_cast<size_t>(rows * cols));
    b->to_host(out, got);
    EXPECT_EQ(got, want[i]) << "weight " << i;
  }
}

// The staged decode attention's key splits (host arithmetic, runs without a GPU): fewest
// waves x (keys per block + 256 keys of fixed cost), splits of at least min_keys keys, at most
// max_splits. Expected counts worked out by hand from that rule for the Qwen3-0.6B shape
// (8 kv heads, 544 keys of block-table capacity) on 132 SMs x 4 blocks = 528 slots.
TEST(CudaDecodeStagedPlan, SplitsOnlyWhereOneWaveIsNotFull) {
  using cuda::plan_decode_staged_splits;
  // b256 (2048 tiles): 1 split = 4 waves x 800, 2 splits = 8 waves x 528.
  EXPECT_EQ(plan_decode_staged_splits(2048, 544, 528, 64, 8191), 1);
  // b64 (512 tiles, one wave): 2 splits would take 2 waves.
  EXPECT_EQ(plan_decode_staged_splits(512, 544, 528, 64, 8191), 1);
  // b8 (64 tiles): 8 splits of 68 keys still fit one wave; 9 would go under 64 keys.
  EXPECT_EQ(plan_decode_staged_splits(64, 544, 528, 64, 8191), 8);
  // b1: bounded by the split limit, and by min_keys.
  EXPECT_EQ(plan_decode_staged_splits(8, 544, 528, 64, 4), 4);
  EXPECT_EQ(plan_decode_staged_splits(8, 544, 528, 200, 8191), 2);
  // A 1-key capacity is never split.
  EXPECT_EQ(plan_decode_staged_splits(8, 1, 528, 64, 8191), 1);
}

}  // namespace
}  // namespace infera
