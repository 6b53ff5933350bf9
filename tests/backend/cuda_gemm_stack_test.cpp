// The CUDA backend's decoder stack on its GEMM path (cuda_gemm_stack_ops.cpp,
// CudaOptions::gemm_stack) inside whole models: prefill batches past the stream GEMM's rows, one
// and two sequences, and a step of 40 sequences decoding one row each. Against the composition of
// the fused ops (the switch off) and the CPU: with f32 q/k/v (gemm_stack_qkv16 off, or shapes
// whose qk-norm takes the one-head kernel) only the GEMMs' summation order may differ from the
// composition; with bf16 q/k/v the logits move by the rounding of q, k and v before their norm.
// The wgmma attention's bf16 queries and output (gemm_stack_attention16) give the logits of its
// f32 hand-off bit for bit. Greedy choices equal the CPU's where its margin is no near tie. Skips, saying so, where no CUDA
// device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
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

using cuda_test::kQwen3Layer06B;  // head_dim 128, 8 kv heads: the qk-norm's bf16 kernel, bf16 q/k/v

struct Case {
  const char* name;
  const char* fixture;  // a fixture folder, or nullptr for `config` with dummy weights
  const char* config;
  bool qkv16;  // whether the model's shape takes the bf16 q/k/v
  // Layers whose q/k/v run as one GEMM in each GEMM-path step (gemm_stack_qkv_one: bf16 q/k/v,
  // and the loader's prepare_weights places the three weights one after another).
  int qkv_one_layers;
};

// Every row's logits of: a 100-token prompt; prompts of 70 and 45 tokens in one step; then one
// step of 40 sequences (the first 40 tokens of the 100-token prompt, a sequence each) decoding
// one row each, after a one-token prompt step per sequence that runs below the GEMM path.
std::vector<std::vector<float>> run_steps(CausalLM& model) {
  const int64_t vocab = model.info().vocab;
  auto ids = [&](int64_t n, int64_t salt) {
    std::vector<int32_t> v;
    for (int64_t i = 0; i < n; ++i) v.push_back(static_cast<int32_t>((i * 7919 + salt) % vocab));
    return v;
  };
  std::vector<std::vector<float>> out;
  {
    KvCache cache(model.backend(), model.kv_shape(),
                  {.block_size = 16, .num_blocks = 16, .dtype = DType::BF16});
    const SeqId seq = cache.add_sequence();
    EXPECT_TRUE(cache.reserve(seq, 100));
    const auto prompt = ids(100, 13);
    const SeqChunk chunk{seq, prompt, OutputRows::All};
    out.emplace_back(static_cast<size_t>(100 * vocab));
    run_step(model, cache, std::span<const SeqChunk>(&chunk, 1), out.back());
  }
  {
    KvCache cache(model.backend(), model.kv_shape(),
                  {.block_size = 16, .num_blocks = 16, .dtype = DType::BF16});
    const SeqId a = cache.add_sequence(), b = cache.add_sequence();
    EXPECT_TRUE(cache.reserve(a, 70) && cache.reserve(b, 45));
    const auto pa = ids(70, 29), pb = ids(45, 101);
    const SeqChunk chunks[] = {{a, pa, OutputRows::All}, {b, pb, OutputRows::All}};
    out.emplace_back(static_cast<size_t>(115 * vocab));
    run_step(model, cache, chunks, out.back());
  }
  {
    constexpr int kSeqs = 40;
    KvCache cache(model.backend(), model.kv_shape(),
                  {.block_size = 16, .num_blocks = 2 * kSeqs, .dtype = DType::BF16});
    const auto prompt = ids(kSeqs, 57), next = ids(kSeqs, 211);
    std::vector<SeqId> seqs;
    std::vector<float> one(static_cast<size_t>(vocab));
    for (int i = 0; i < kSeqs; ++i) {
      seqs.push_back(cache.add_sequence());
      EXPECT_TRUE(cache.reserve(seqs.back(), 2));
      const SeqChunk c{seqs.back(), std::span<const int32_t>(&prompt[size_t(i)], 1)};
      run_step(model, cache, std::span<const SeqChunk>(&c, 1), one);
    }
    std::vector<SeqChunk> chunks;
    for (int i = 0; i < kSeqs; ++i)
      chunks.push_back({seqs[size_t(i)], std::span<const int32_t>(&next[size_t(i)], 1)});
    out.emplace_back(static_cast<size_t>(kSeqs * vocab));
    run_step(model, cache, chunks, out.back());
  }
  return out;
}

class CudaGemmStackTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

TEST_P(CudaGemmStackTest, PrefillAndBatchedDecodeFollowCompositionAndCpu) {
  const Case& c = GetParam();
  const auto dir = c.fixture ? test::fixture(c.fixture)
                             : cuda_test::config_dir(std::string("gemm_stack_") + c.name, c.config);
  const LoadOptions load{.dummy_weights = c.fixture == nullptr};
  auto run = [&](Backend& b) {
    auto model = load_causal_lm(dir, b, load);
    return run_steps(*model);
  };
  CudaOptions on, f32_attention, f32_qkv, off, qkv_apart;
  f32_attention.gemm_stack_attention16 = false;
  f32_qkv.gemm_stack_qkv16 = false;
  off.gemm_stack = false;
  qkv_apart.gemm_stack_qkv_one = false;
  auto on_b = make_cuda_backend(0, on), f32_attention_b = make_cuda_backend(0, f32_attention),
       f32_b = make_cuda_backend(0, f32_qkv), off_b = make_cuda_backend(0, off),
       apart_b = make_cuda_backend(0, qkv_apart);
  auto cpu_b = make_cpu_backend(2);
  const auto got = run(*on_b), got_f32_attention = run(*f32_attention_b), got_f32 = run(*f32_b),
             composed = run(*off_b), apart = run(*apart_b), cpu = run(*cpu_b);
  // The three GEMM-sized steps took the path; the switch off took the composition.
  EXPECT_EQ(cuda_stats(*on_b)->gemm_stacks, 3);
  EXPECT_EQ(cuda_stats(*f32_b)->gemm_stacks, 3);
  EXPECT_EQ(cuda_stats(*off_b)->gemm_stacks, 0);
  EXPECT_EQ(cuda_stats(*apart_b)->gemm_stacks, 3);
  // q/k/v as one GEMM wherever the bf16 q/k/v run, and nowhere else.
  EXPECT_EQ(cuda_stats(*on_b)->gemm_stack_qkv_one, 3 * c.qkv_one_layers);
  EXPECT_EQ(cuda_stats(*f32_attention_b)->gemm_stack_qkv_one, 3 * c.qkv_one_layers);
  EXPECT_EQ(cuda_stats(*f32_b)->gemm_stack_qkv_one, 0);
  EXPECT_EQ(cuda_stats(*apart_b)->gemm_stack_qkv_one, 0);
  const int64_t vocab = static_cast<int64_t>(cpu[0].size() / 100);
  ASSERT_EQ(got.size(), 3u);
  for (size_t s = 0; s < got.size(); ++s) {
    // The attention's bf16 q and output: the bits the f32 hand-off rounds to, so the same logits.
    size_t differ = 0;
    for (size_t i = 0; i < got[s].size(); ++i) differ += !(got[s][i] == got_f32_attention[s][i]);
    EXPECT_EQ(differ, 0u) << "step " << s << ": logits that differ with the attention's f32 q/out";
    // One q/k/v GEMM against q's and the k/v pair's: the same products, cuBLAS's kernel choice
    // (its f32 summation order) aside, read through the rows of one [n, qw + 2 kvw] output.
    const double e_apart = cuda_test::nmse(got[s], apart[s]);
    EXPECT_LE(e_apart, 1e-6) << "step " << s;
    const double e_on = cuda_test::nmse(got[s], composed[s]);
    const double e_f32 = cuda_test::nmse(got_f32[s], composed[s]);
    const double cpu_diff = test::max_abs_diff(got[s], cpu[s]);
    const double composed_cpu_diff = test::max_abs_diff(composed[s], cpu[s]);
    std::printf("  %s step %zu: NMSE vs composition %.2e (f32 q/k/v %.2e, q/k/v apart %.2e); "
                "max |diff| vs cpu %.2e (composition %.2e)\n",
                c.name, s, e_on, e_f32, e_apart, cpu_diff, composed_cpu_diff);
    // f32 q/k/v: the composition's arithmetic, GEMM summation order aside.
    EXPECT_LE(e_f32, 1e-9) << "step " << s;
    // bf16 q/k/v (where the shape takes it): rounding before the qk-norm only.
    EXPECT_LE(e_on, c.qkv16 ? 1e-4 : 1e-9) << "step " << s;
    // Against the CPU: about as far as the composition, which the fixture suites hold to
    // transformers (qwen3-micro's 100-token prompt is 0.14-0.2 from the CPU either way: bf16
    // tensor-core inputs in a 32-wide model; the others are within 3.5e-2).
    EXPECT_LE(cpu_diff, 1.25 * composed_cpu_diff + 1e-2) << "step " << s;
    EXPECT_LE(composed_cpu_diff, 0.25) << "step " << s;
    size_t compared = 0;
    for (size_t r = 0; r * size_t(vocab) < cpu[s].size(); ++r) {
      const auto row = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + long(r * size_t(vocab)),
                                  v.begin() + long((r + 1) * size_t(vocab)));
      };
      const auto want = row(cpu[s]);
      if (cuda_test::top_margin(want) <= 2e-2f) continue;
      ++compared;
      EXPECT_EQ(cuda_test::argmax(row(got[s])), cuda_test::argmax(want)) << "step " << s << " row " << r;
    }
    EXPECT_GT(compared, 0u) << "no row with a clear greedy choice in step " << s;
  }
}

// The TMA GEMMs of our own in the stack of Qwen3-0.6B's layer shape, each switch alone and all,
// against the default path (cuBLAS and the elementwise kernels after it):
//   - the GLU GEMM (CudaOptions::glu_gemm, glu_gemm.cu): gate/up and SwiGLU as one launch, in
//     every layer of the three GEMM-path steps;
//   - the q/k/v GEMM (CudaOptions::qkv_gemm, qkv_gemm.cu): q/k/v and the qk-norm / RoPE / KV write
//     as one launch, in every layer of the two prefill steps (the 40-row decode step's attention
//     is not the wgmma prefill kernel, which the fused queries are for);
//   - the residual GEMM (CudaOptions::residual_gemm, residual_gemm.cu): the o and down
//     projections' x += . W^T, in every layer of the three steps;
//   - all three on the kernel's ping-pong schedule (CudaOptions::tma_gemm_pingpong).
// The first two apply their elementwise step to the f32 sums where the default path reads them
// rounded to bf16: logits NMSE <= 1e-4 and > 0 (a wrong tile, row, head, slot or activation gives
// ~1); the residual GEMM is cuBLAS's f32 sum in its own order (<= 1e-4, maybe 0). And the CPU's
// greedy choices where its margin is no near tie. Compute capability 9.0 only.
class CudaGemmStackTmaGemms : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* why = cuda_test::sm90_missing()) GTEST_SKIP() << why;
  }
};

TEST_F(CudaGemmStackTmaGemms, FollowTheCublasPathAndCpu) {
  const auto dir = cuda_test::config_dir("gemm_stack_tma_gemms", kQwen3Layer06B);
  auto run = [&](Backend& b) {
    auto model = load_causal_lm(dir, b, {.dummy_weights = true});
    return run_steps(*model);
  };
  auto cpu_b = make_cpu_backend(2), cublas_b = make_cuda_backend(0, CudaOptions{});
  const auto cpu = run(*cpu_b), want = run(*cublas_b);
  EXPECT_EQ(cuda_stats(*cublas_b)->glu_gemms, 0);
  EXPECT_EQ(cuda_stats(*cublas_b)->qkv_gemms, 0);
  const int64_t vocab = static_cast<int64_t>(cpu[0].size() / 100);
  struct Variant {
    bool glu, qkv, residual, pingpong;
  };
  for (const Variant v :
       {Variant{true, false, false, false}, Variant{false, true, false, false},
        Variant{false, false, true, false}, Variant{true, true, true, false},
        Variant{true, true, true, true}}) {
    const bool glu = v.glu, qkv = v.qkv;
    const std::string what = std::string(glu ? " glu" : "") + (qkv ? " qkv" : "") +
                             (v.residual ? " residual" : "") + " gemm" +
                             (v.pingpong ? " ping-pong" : "");
    CudaOptions o;
    o.glu_gemm = glu;
    o.qkv_gemm = qkv;
    o.residual_gemm = v.residual;
    o.tma_gemm_pingpong = v.pingpong;
    auto b = make_cuda_backend(0, o);
    const auto got = run(*b);
    EXPECT_EQ(cuda_stats(*b)->gemm_stacks, 3) << what;
    EXPECT_EQ(cuda_stats(*b)->glu_gemms, glu ? 3 * 2 : 0) << what;  // the config's 2 layers
    EXPECT_EQ(cuda_stats(*b)->qkv_gemms, qkv ? 2 * 2 : 0) << what;
    EXPECT_EQ(cuda_stats(*b)->residual_gemms, v.residual ? 3 * 2 * 2 : 0) << what;  // o, down
    ASSERT_EQ(got.size(), 3u);
    for (size_t s = 0; s < got.size(); ++s) {
      const double e = cuda_test::nmse(got[s], want[s]);
      std::printf("  %s step %zu: NMSE vs cuBLAS %.2e; max |diff| vs cpu %.2e (cuBLAS %.2e)\n",
                  what.c_str(), s, e, test::max_abs_diff(got[s], cpu[s]),
                  test::max_abs_diff(want[s], cpu[s]));
      EXPECT_LE(e, 1e-4) << what << " step " << s;  // NaN fails
      if (glu || (qkv && s < 2))
        EXPECT_GT(e, 0.0) << what << " step " << s << ": no trace of the kernel";
      else if (qkv)  // the decode step, q/k/v GEMM alone: not on it, its caches by one-row steps
        EXPECT_EQ(e, 0.0) << what << " step " << s << ": the decode step left the default path";
      size_t compared = 0;
      for (size_t r = 0; r * size_t(vocab) < cpu[s].size(); ++r) {
        const auto row = [&](const std::vector<float>& v) {
          return std::vector<float>(v.begin() + long(r * size_t(vocab)),
                                    v.begin() + long((r + 1) * size_t(vocab)));
        };
        const auto cpu_row = row(cpu[s]);
        if (cuda_test::top_margin(cpu_row) <= 2e-2f) continue;
        ++compared;
        EXPECT_EQ(cuda_test::argmax(row(got[s])), cuda_test::argmax(cpu_row))
            << what << " step " << s << " row " << r;
      }
      EXPECT_GT(compared, 0u) << "no row with a clear greedy choice in step " << s;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, CudaGemmStackTest,
    ::testing::Values(Case{"qwen3_micro", "qwen3-micro", nullptr, false, 0},
                      Case{"qwen3_small_untied", "qwen3-small-untied", nullptr, false, 0},
                      Case{"head_dim_128", nullptr, cuda_test::kQwen3, false, 0},
                      Case{"qwen3_0_6b_layers", nullptr, kQwen3Layer06B, true, 2}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace infera
