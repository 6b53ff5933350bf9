// The Hopper warpgroup-MMA prefill attention (CudaOptions::flash_wgmma) inside whole models:
// dummy-weight Qwen3 configs with Qwen3-0.6B's attention shape (16 q heads, 8 kv heads, head_dim
// 128) prefilled with the kernel and with the key-halves kernel (the default) agree within the op
// harness's bf16 attention bound, and differ (the kernel was taken); prefill steps replayed as CUDA
// graphs give the eager backend's logits bit for bit. Skips where no CUDA device is visible, and
// where the device is no sm_90 (the kernel is Hopper machine code).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_test_models.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"

namespace infera {
namespace {

using cuda_test::config_dir;
using cuda_test::nmse;

const char* const kQwen3Heads16 = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 128,
  "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 16,
  "num_key_value_heads": 8, "num_hidden_layers": 3, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "vocab_size": 512})";

CudaOptions wgmma_options(bool on, bool graphs = true, int64_t vectors = 0, bool tma = false) {
  CudaOptions o;
  o.flash_tma = tma;  // the TMA kernel (attention_tma_wgmma.cu) at every prompt length
  o.flash_tma_min_rows = 0;
  o.flash_wgmma = on;
  o.flash_wgmma_vectors = vectors;
  o.flash_wide_auto = false;  // the reference: the key-halves kernel at every shape
  o.graphs = graphs;
  return o;
}

// `rounds` prefill steps of the same shape on one model and cache, each of 3 fresh prompts (300,
// 77 and 150 tokens; different tokens every round): each prompt's last row's logits. With graphs,
// round 2 is captured and rounds 3.. replay it. `poison`: every byte of the cache's pools 0xff
// (bf16 NaN) before the prompts, as blocks another sequence left with overflowed values.
// `heads`: {q heads, kv heads} of another config than kQwen3Heads16's (same sizes otherwise).
std::vector<std::vector<float>> qwen3_prefill_rounds(Backend& backend, int rounds,
                                                     bool poison = false,
                                                     std::pair<int, int> heads = {16, 8}) {
  std::string config = kQwen3Heads16;
  const std::string q_heads = "\"num_attention_heads\": ", kv_heads = "\"num_key_value_heads\": ";
  config.replace(config.find(q_heads) + q_heads.size(), 2, std::to_string(heads.first));
  config.replace(config.find(kv_heads) + kv_heads.size(), 1, std::to_string(heads.second));
  const std::string name =
      "wgmma_qwen3_h" + std::to_string(heads.first) + "_kv" + std::to_string(heads.second);
  auto model = load_causal_lm(config_dir(name, config), backend, {.dummy_weights = true});
  const int64_t vocab = model->info().vocab;
  const int64_t lens[3] = {300, 77, 150};
  KvCache cache(backend, model->kv_shape(),
                {.block_size = 16, .num_blocks = 40 * rounds, .dtype = DType::BF16});
  if (poison) {
    backend.synchronize();  // the pools' zeroing, on the backend's stream, first
    for (const KvLayer& l : cache.pool().layers)
      for (const Tensor* t : {&l.keys, &l.values})
        EXPECT_EQ(cudaMemset(const_cast<void*>(t->data()), 0xff, t->nbytes()), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<std::vector<float>> out;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<int32_t>> prompts(3);
    std::vector<SeqChunk> chunks;
    for (size_t s = 0; s < 3; ++s) {
      const SeqId id = cache.add_sequence();
      EXPECT_TRUE(cache.reserve(id, lens[s]));
      for (int64_t i = 0; i < lens[s]; ++i)
        prompts[s].push_back(
            static_cast<int32_t>((i * 7919 + 31 * int64_t(s) + 7 * r + 3) % vocab));
      chunks.push_back({id, prompts[s], OutputRows::Last});
    }
    std::vector<float> logits(static_cast<size_t>(3 * vocab));
    run_step(*model, cache, chunks, logits);
    out.push_back(logits);
  }
  return out;
}

class CudaWgmmaAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

// Both tile shapes (64 vectors with the key halves split between the warpgroups, 128 vectors),
// and the 64-vector tiles' pipelined loop (flash_wgmma_pipeline), against the key-halves kernel.
TEST_F(CudaWgmmaAttentionTest, Qwen3PrefillFollowsKeyHalves) {
  auto by_halves = make_cuda_backend(0, wgmma_options(false));
  const std::vector<std::vector<float>> want = qwen3_prefill_rounds(*by_halves, 1);
  for (int64_t vectors : {64, 128, -64}) {  // -64: 64, pipelined
    SCOPED_TRACE("vectors " + std::to_string(vectors));
    CudaOptions o = wgmma_options(true, true, vectors < 0 ? -vectors : vectors);
    o.flash_wgmma_pipeline = vectors < 0;
    o.profile = true;  // to see which kernel ran
    auto by_wgmma = make_cuda_backend(0, o);
    const std::vector<std::vector<float>> got = qwen3_prefill_rounds(*by_wgmma, 1);
    const std::string report = cuda_profile_report(*by_wgmma);
    if (report.find("attention_flash_wgmma") == std::string::npos)
      GTEST_SKIP() << "the wgmma kernel does not run on this device (not sm_90)";
    ASSERT_EQ(got[0].size(), want[0].size());
    const double e = nmse(got[0], want[0]);
    std::printf("vectors %lld: NMSE %.6e against the key-halves kernel\n",
                static_cast<long long>(vectors), e);  // -64 and 64: the same arithmetic
    EXPECT_TRUE(e <= 1e-4) << "NMSE " << e;
    EXPECT_GT(e, 0.0) << "the same logits as the key-halves kernel";
  }
}

// flash_wgmma_q_prefetch moves the queries' loads, not their arithmetic: both tile shapes and the
// pipelined loop give the old path's logits bit for bit.
TEST_F(CudaWgmmaAttentionTest, QueryPrefetchEqualsStagedQueriesBitForBit) {
  for (int64_t vectors : {64, 128, -64}) {  // -64: 64, pipelined
    SCOPED_TRACE("vectors " + std::to_string(vectors));
    std::vector<std::vector<float>> by[2];
    for (int prefetch = 0; prefetch < 2; ++prefetch) {
      CudaOptions o = wgmma_options(true, true, vectors < 0 ? -vectors : vectors);
      o.flash_wgmma_pipeline = vectors < 0;
      o.flash_wgmma_q_prefetch = prefetch == 1;
      o.profile = true;
      auto backend = make_cuda_backend(0, o);
      by[prefetch] = qwen3_prefill_rounds(*backend, 1);
      if (cuda_profile_report(*backend).find("attention_flash_wgmma") == std::string::npos)
        GTEST_SKIP() << "the wgmma kernel does not run on this device (not sm_90)";
    }
    ASSERT_EQ(by[1][0].size(), by[0][0].size());
    size_t differ = 0, finite = 0;
    for (size_t i = 0; i < by[0][0].size(); ++i) {
      differ += !(by[1][0][i] == by[0][0][i]);  // NaN counts as a difference
      finite += std::isfinite(by[0][0][i]) ? 1 : 0;
    }
    EXPECT_EQ(differ, 0u);
    EXPECT_EQ(finite, by[0][0].size());
  }
}

TEST_F(CudaWgmmaAttentionTest, GraphReplayEqualsEagerBitForBit) {
  for (bool tma : {false, true}) {
    SCOPED_TRACE(tma ? "TMA kernel" : "wgmma kernel");
    auto eager_backend = make_cuda_backend(0, wgmma_options(true, false, 0, tma));
    auto graph_backend = make_cuda_backend(0, wgmma_options(true, true, 0, tma));
    const auto want = qwen3_prefill_rounds(*eager_backend, 4);
    const auto got = qwen3_prefill_rounds(*graph_backend, 4);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < got.size(); ++r) {
      size_t differ = 0;
      for (size_t i = 0; i < got[r].size(); ++i) differ += !(got[r][i] == want[r][i]);  // NaN too
      EXPECT_EQ(differ, 0u) << "round " << r;
    }
    EXPECT_GE(cuda_stats(*graph_backend)->graph_launches, 2);  // rounds 3 and 4 replayed
  }
}

// The TMA kernel (attention_tma_wgmma.cu) against the key-halves kernel, over a cache whose pools
// were all NaN before the prompts: its copies take whole 16-key blocks, so each prompt's last
// block brings rows past the prompt's end (300, 77 and 150 keys), which must be masked and
// zeroed, and the three prompts' tiles of 128 keys end in partial blocks.
TEST_F(CudaWgmmaAttentionTest, TmaKernelFollowsKeyHalvesOverAPoisonedCache) {
  auto by_halves = make_cuda_backend(0, wgmma_options(false));
  const std::vector<std::vector<float>> want = qwen3_prefill_rounds(*by_halves, 1);
  // -2: 2 stages, ping-pong; -3: 2, queries by TMA; -4: persistent, queries by TMA, ping-pong;
  // -5: persistent with 3 stages (one query buffer, staged by the consumers).
  for (int64_t stages : {2, 3, -2, -3, -4, -5}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    CudaOptions o = wgmma_options(true, true, 0, true);
    o.flash_tma_stages = stages == 3 || stages == -5 ? 3 : 2;
    o.flash_tma_pingpong = stages == -2 || stages == -4;
    o.flash_tma_queries = stages == -3 || stages == -4;
    o.flash_tma_persistent = stages <= -4;
    o.flash_tma_max_blocks = 5;  // persistent: each block walks ~24 of the 120 work items
    auto by_tma = make_cuda_backend(0, o);
    const std::vector<std::vector<float>> got = qwen3_prefill_rounds(*by_tma, 1, true);
    if (cuda_stats(*by_tma)->tma_attentions == 0)
      GTEST_SKIP() << "the TMA kernel does not run on this device (not sm_90)";
    EXPECT_EQ(cuda_stats(*by_tma)->tma_attentions, 3);  // every layer's attention
    // The GEMM stack hands the queries over as bf16: with flash_tma_queries they come by TMA.
    EXPECT_EQ(cuda_stats(*by_tma)->tma_queries, stages == -3 || stages == -4 ? 3 : 0);
    ASSERT_EQ(got[0].size(), want[0].size());
    size_t finite = 0;
    for (float v : got[0]) finite += std::isfinite(v) ? 1 : 0;
    EXPECT_EQ(finite, got[0].size());
    const double e = nmse(got[0], want[0]);
    std::printf("TMA kernel, %lld stages: NMSE %.6e against the key-halves kernel\n",
                static_cast<long long>(stages), e);
    EXPECT_TRUE(e <= 1e-4) << "NMSE " << e;
    EXPECT_GT(e, 0.0) << "the same logits as the key-halves kernel";
  }
}

// The producer's query boxes (64 / group rows x group heads x 64 dims of q16) land where the
// consumers would stage the same bits, for every group the query map takes: with the queries by
// TMA the logits are bit for bit those without (both on the persistent grid, 3 blocks). Qwen3-0.6B
// is group 2 (the test above); groups 1, 4 and 8 here, over 4 kv heads (the bf16 q/k/v path needs
// heads in fours).
TEST_F(CudaWgmmaAttentionTest, TmaQueriesEqualStagedQueriesForEveryGroup) {
  for (const std::pair<int, int> heads : {std::pair{4, 4}, {16, 4}, {32, 4}}) {
    SCOPED_TRACE("q heads " + std::to_string(heads.first) + ", kv heads " +
                 std::to_string(heads.second));
    std::vector<std::vector<float>> logits[2];
    for (int queries = 0; queries < 2; ++queries) {
      CudaOptions o = wgmma_options(true, true, 0, true);
      o.flash_tma_queries = queries == 1;
      o.flash_tma_persistent = true;
      o.flash_tma_max_blocks = 3;
      auto backend = make_cuda_backend(0, o);
      logits[queries] = qwen3_prefill_rounds(*backend, 1, false, heads);
      if (cuda_stats(*backend)->tma_attentions == 0)
        GTEST_SKIP() << "the TMA kernel does not run on this device (not sm_90)";
      EXPECT_EQ(cuda_stats(*backend)->tma_attentions, 3);
      EXPECT_EQ(cuda_stats(*backend)->tma_queries, queries == 1 ? 3 : 0);
    }
    const std::vector<float>&staged = logits[0][0], &by_tma = logits[1][0];
    ASSERT_EQ(by_tma.size(), staged.size());
    size_t finite = 0, same = 0;
    for (size_t i = 0; i < staged.size(); ++i) {
      finite += std::isfinite(by_tma[i]) ? 1 : 0;
      same += std::memcmp(&by_tma[i], &staged[i], sizeof(float)) == 0 ? 1 : 0;
    }
    EXPECT_EQ(finite, staged.size());
    EXPECT_EQ(same, staged.size()) << "logits differ from the consumers' staged queries";
  }
}

}  // namespace
}  // namespace infera
