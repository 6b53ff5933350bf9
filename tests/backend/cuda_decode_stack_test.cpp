// The CUDA backend's one-kernel decoder stack (decode_stack.cu, CudaOptions::decode_stack) inside
// whole models: one sequence decoding one row per step, so every step's layers run as one launch.
// Graph replay equals eager launches bit for bit (the kernel's counters are reset by the kernel
// and replays reuse them), the logits follow the composition of the one-op kernels (the switch
// off) and the CPU, and the greedy tokens equal the CPU's where its choice is no near tie. The
// models: both Qwen3 fixtures (head_dim 16 and 32, GQA 2 and 4), a head_dim-128 dummy model and a
// dummy model of Qwen3-0.6B's layer shape (every register slot of the kernel in use), the last
// also with a context long enough that each attention split walks more keys than it preloads
// (and with three splits a kv head); the weights through the shared-memory ring and through
// registers, and through registers with the L2 prefetch of the rows ahead (the same bits as
// without it: a prefetch moves no value). The ring at any size gives the registers path's bits
// (each row's dot product runs in the same order, whichever warp computes it).
// Skips, saying so, where no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "../model/fixture_cases.h"
#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_models.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "model/causal_lm.h"
#include "test_compare.h"

namespace infera {
namespace {

using cuda_test::kQwen3Layer06B;  // the kernel's largest supported shape

struct Case {
  const char* name;
  const char* fixture;  // a fixture folder, or nullptr for `config` with dummy weights
  const char* config;
  int prompt;  // prompt tokens before the decode steps
  int64_t splits = 0;       // CudaOptions::decode_stack_splits
  bool smem_weights = true;  // CudaOptions::decode_stack_smem (the weight ring)
};

// A prompt of `prompt_len` tokens, then `steps` one-row decode steps, in a cache just large enough.
std::vector<std::vector<float>> decode_one(CausalLM& model, int prompt_len, int steps) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < prompt_len; ++i)
    prompt.push_back(static_cast<int32_t>((int64_t{i} * 7919 + 785) % model.info().vocab));
  return cuda_test::decode_one(model, prompt, steps, (prompt_len + steps + 1 + 15) / 16 + 2);
}

using cuda_test::argmax;
using cuda_test::top_margin;

class CudaDecodeStackTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

TEST_P(CudaDecodeStackTest, DecodeFollowsCompositionAndCpu) {
  const Case& c = GetParam();
  const auto dir = c.fixture ? test::fixture(c.fixture)
                             : cuda_test::config_dir(std::string("decode_stack_") + c.name,
                                                     c.config);
  const LoadOptions load{.dummy_weights = c.fixture == nullptr};
  constexpr int kSteps = 8;
  auto run = [&](Backend& b) {
    auto model = load_causal_lm(dir, b, load);
    return decode_one(*model, c.prompt, kSteps);
  };
  CudaOptions on, eager, off;
  on.decode_stack = eager.decode_stack = true;
  on.decode_stack_splits = eager.decode_stack_splits = c.splits;
  on.decode_stack_smem = eager.decode_stack_smem = c.smem_weights;
  eager.graphs = false;
  off.decode_stack = false;
  // The prompt on the GEMV / cuBLAS paths as the residual-MLP test runs it (the stream GEMM
  // rounds x to bf16, which moves the CPU comparison; its own accuracy is tested elsewhere).
  on.stream_gemm = eager.stream_gemm = off.stream_gemm = false;
  auto on_b = make_cuda_backend(0, on), eager_b = make_cuda_backend(0, eager),
       off_b = make_cuda_backend(0, off);
  auto cpu_b = make_cpu_backend(2);
  const auto got = run(*on_b), got_eager = run(*eager_b), composed = run(*off_b), cpu = run(*cpu_b);
  // One kernel per one-row step (the prompt runs the composition), graphs replayed it.
  const CudaStats s = *cuda_stats(*on_b);
  EXPECT_EQ(s.decode_stack_kernels, kSteps);
  EXPECT_EQ(s.decode_stack_ring, c.smem_weights ? kSteps : 0) << "the weight ring where asked";
  EXPECT_GE(s.graph_launches, kSteps - 2);
  EXPECT_EQ(cuda_stats(*off_b)->decode_stack_kernels, 0);
  ASSERT_EQ(got.size(), size_t{kSteps});
  double vs_composed = 0, vs_cpu = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], got_eager[i]) << "graph replay vs eager, step " << i;
    vs_composed = std::max(vs_composed, test::max_abs_diff(got[i], composed[i]));
    vs_cpu = std::max(vs_cpu, test::max_abs_diff(got[i], cpu[i]));
    if (top_margin(cpu[i]) > 2e-2f) EXPECT_EQ(argmax(got[i]), argmax(cpu[i])) << "step " << i;
  }
  std::printf("  %s: %lld decode_stack kernels; max |logit diff| vs composition %.2e, vs cpu %.2e\n",
              c.name, static_cast<long long>(s.decode_stack_kernels), vs_composed, vs_cpu);
  // Same f32 arithmetic on the same bf16 weights and cache, other summation orders: the decode's
  // f32 bound of the residual-MLP test (2e-3); against the CPU that test's 5e-2 (the prompt went
  // through bf16 tensor cores on CUDA).
  EXPECT_LE(vs_composed, 2e-3);
  EXPECT_LE(vs_cpu, 5e-2);
}

// CudaOptions::decode_stack_l2: the registers path with every warp's later rows requested into L2
// at each layer's start gives the registers path's logits bit for bit (prefetches move no value),
// on the 0.6B layer shape (every register slot in use; a long context, so the attention splits
// walk batches of keys while the prefetches stream) and a fixture with GQA 4.
TEST(CudaDecodeStackL2, PrefetchChangesNoBit) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  struct Model {
    const char* name;
    const char* fixture;
    const char* config;
    int prompt;
  };
  for (const Model& m : {Model{"qwen3_small_untied", "qwen3-small-untied", nullptr, 5},
                         Model{"qwen3_0_6b_layers_long", nullptr, kQwen3Layer06B, 1100}}) {
    const auto dir = m.fixture ? test::fixture(m.fixture)
                               : cuda_test::config_dir(std::string("decode_stack_l2_") + m.name,
                                                       m.config);
    CudaOptions plain, l2;
    plain.decode_stack_smem = l2.decode_stack_smem = false;
    plain.stream_gemm = l2.stream_gemm = false;
    l2.decode_stack_l2 = true;
    auto run = [&](const CudaOptions& o, int64_t& kernels) {
      auto b = make_cuda_backend(0, o);
      auto model = load_causal_lm(dir, *b, LoadOptions{.dummy_weights = m.fixture == nullptr});
      auto logits = decode_one(*model, m.prompt, 6);
      kernels = cuda_stats(*b)->decode_stack_kernels;
      return logits;
    };
    int64_t k_plain = 0, k_l2 = 0;
    const auto a = run(plain, k_plain), b = run(l2, k_l2);
    EXPECT_EQ(k_plain, 6) << m.name;
    EXPECT_EQ(k_l2, 6) << m.name;
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].size(), b[i].size());
      for (size_t j = 0; j < a[i].size(); ++j) ASSERT_FALSE(std::isnan(b[i][j])) << m.name;
      EXPECT_EQ(a[i], b[i]) << m.name << ": step " << i;
    }
  }
}

// Variants of the kernel that move no value give the registers path's logits bit for bit:
// the weight ring (CudaOptions::decode_stack_smem) at the largest size, at sizes near the
// smallest that holds a phase (its stages wrap at the ring's end and are issued in pieces) and
// between. On the 0.6B layer
// shape with a long context (every register slot in use, the attention walks batches of keys)
// and a small head_dim-128 model whose whole launch fits the ring (the producer is held back by
// its 16 barriers, not by room).
TEST(CudaDecodeStackVariants, SameBitsAsTheRegistersPath) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  struct Variant {
    std::string name;
    bool ring = false;
    int64_t ring_kib = 0;  // 0: as large as fits
  };
  struct Model {
    const char* name;
    const char* config;
    int prompt;
    std::vector<Variant> variants;
  };
  const Variant largest{"ring", true};
  for (const Model& m :
       {Model{"qwen3_0_6b_layers_long", kQwen3Layer06B, 1100,
              {largest, {"ring 104 KiB", true, 104}, {"ring 150 KiB", true, 150}}},
        Model{"head_dim_128", cuda_test::kQwen3, 40,
              {largest, {"ring 5 KiB", true, 5}, {"ring 7 KiB", true, 7}}}}) {
    const auto dir =
        cuda_test::config_dir(std::string("decode_stack_variants_") + m.name, m.config);
    auto run = [&](const Variant& v, int64_t& ring_kernels) {
      CudaOptions o;
      o.stream_gemm = false;
      o.decode_stack_smem = v.ring;
      o.decode_stack_ring_kib = v.ring_kib;
      auto b = make_cuda_backend(0, o);
      auto model = load_causal_lm(dir, *b, LoadOptions{.dummy_weights = true});
      auto logits = decode_one(*model, m.prompt, 6);
      EXPECT_EQ(cuda_stats(*b)->decode_stack_kernels, 6) << m.name << ", " << v.name;
      ring_kernels = cuda_stats(*b)->decode_stack_ring;
      return logits;
    };
    int64_t none = 0;
    const auto registers = run(Variant{"registers"}, none);
    EXPECT_EQ(none, 0);
    for (const Variant& v : m.variants) {
      int64_t ring_kernels = 0;
      const auto got = run(v, ring_kernels);
      EXPECT_EQ(ring_kernels, v.ring ? 6 : 0) << m.name << ", " << v.name;
      ASSERT_EQ(got.size(), registers.size());
      double diff = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].size(), registers[i].size());
        for (size_t j = 0; j < got[i].size(); ++j) ASSERT_FALSE(std::isnan(got[i][j])) << m.name;
        diff = std::max(diff, test::max_abs_diff(got[i], registers[i]));
        EXPECT_EQ(got[i], registers[i]) << m.name << ", " << v.name << ": step " << i;
      }
      std::printf("  %s, %s: max |logit diff| vs registers %.3g\n", m.name, v.name.c_str(), diff);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaDecodeStackTest,
    ::testing::Values(Case{"qwen3_micro", "qwen3-micro", nullptr, 5},
                      Case{"qwen3_small_untied", "qwen3-small-untied", nullptr, 5},
                      Case{"head_dim_128", nullptr, cuda_test::kQwen3, 40},
                      Case{"qwen3_0_6b_layers", nullptr, kQwen3Layer06B, 40},
                      Case{"qwen3_0_6b_layers_long", nullptr, kQwen3Layer06B, 1100},
                      // 3 splits a kv head: ~370 keys a split, six batches of keys a warp.
                      Case{"qwen3_0_6b_layers_long_splits3", nullptr, kQwen3Layer06B, 1100, 3},
                      // The weights through registers instead of shared memory.
                      Case{"qwen3_small_untied_registers", "qwen3-small-untied", nullptr, 5, 0,
                           false},
                      Case{"qwen3_0_6b_layers_registers", nullptr, kQwen3Layer06B, 40, 0, false},
                      Case{"qwen3_0_6b_layers_long_registers", nullptr, kQwen3Layer06B, 1100, 0,
                           false}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace infera
