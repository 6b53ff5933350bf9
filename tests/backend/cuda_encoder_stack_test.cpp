// The CUDA backend's encoder stack (cuda_encoder_stack_ops.cpp, CudaOptions::encoder_stack)
// inside whole ModernBERT models with dummy bf16 weights: one 93-row sequence, three packed
// sequences of 200, 77 and 130 rows (local windows crossing the 64-row tiles and the sequences'
// ends) and a 5-row batch below the GEMM rows, which keeps the composition. Against the
// composition (the switch off): the bf16 q, k and v the GEMMs write move the hidden states by
// their rounding before RoPE only; against the CPU (f32 throughout): about as far as the
// composition is. And the packed attention's wgmma kernel with RoPE inside it against the staged
// rotation (bit for bit) and the mma.sync flash kernel. Skips, saying so, where no CUDA device is
// visible.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_test_models.h"
#include "model/encoder.h"
#include "test_compare.h"

namespace infera {
namespace {

struct Case {
  const char* name;
  const char* config;
  int64_t hidden;
  int64_t layers;  // the config's num_hidden_layers
};

// head_dim 64, a window of 32 each side (local_attention 64), layers 0 and 3 global.
const char* const kHeadDim64 = R"({
  "architectures": ["ModernBertModel"], "model_type": "modernbert", "hidden_size": 256,
  "num_hidden_layers": 4, "intermediate_size": 384, "num_attention_heads": 4, "vocab_size": 512,
  "max_position_embeddings": 8192, "local_attention": 64, "global_attn_every_n_layers": 3,
  "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "hidden_activation": "gelu",
  "norm_eps": 1e-05, "norm_bias": false, "attention_bias": false, "mlp_bias": false,
  "pad_token_id": 0, "torch_dtype": "bfloat16"})";

// head_dim 128, LayerNorms with biases (norm_bias: the in-register kernel's bias term).
const char* const kHeadDim128 = R"({
  "architectures": ["ModernBertModel"], "model_type": "modernbert", "hidden_size": 256,
  "num_hidden_layers": 3, "intermediate_size": 512, "num_attention_heads": 2, "vocab_size": 512,
  "max_position_embeddings": 8192, "local_attention": 128, "global_attn_every_n_layers": 3,
  "global_rope_theta": 160000.0, "local_rope_theta": 10000.0, "hidden_activation": "gelu",
  "norm_eps": 1e-05, "norm_bias": true, "attention_bias": false, "mlp_bias": false,
  "pad_token_id": 0, "torch_dtype": "bfloat16"})";

// ModernBERT-large's layer (hidden 1024, 16 heads of 64, intermediate 2624) in 3 layers.
const char* const kLargeLayers = R"({
  "architectures": ["ModernBertModel"], "model_type": "modernbert", "hidden_size": 1024,
  "num_hidden_layers": 3, "intermediate_size": 2624, "num_attention_heads": 16,
  "vocab_size": 512, "max_position_embeddings": 8192, "local_attention": 128,
  "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
  "hidden_activation": "gelu", "norm_eps": 1e-05, "norm_bias": false, "attention_bias": false,
  "mlp_bias": false, "pad_token_id": 0, "torch_dtype": "bfloat16"})";

// The final hidden states of each batch (sequence lengths).
std::vector<std::vector<float>> run_batches(
    Encoder& model, int64_t hidden,
    const std::vector<std::vector<int64_t>>& batches = {{93}, {200, 77, 130}, {5}}) {
  std::vector<std::vector<float>> out;
  for (size_t b = 0; b < batches.size(); ++b) {
    std::vector<std::vector<int32_t>> seqs;
    for (size_t s = 0; s < batches[b].size(); ++s) {
      seqs.emplace_back();
      for (int64_t i = 0; i < batches[b][s]; ++i)
        seqs.back().push_back(static_cast<int32_t>((i * 31 + 7 * s + 3 * b + 1) % 512));
    }
    const BatchDesc desc = encoder_batch(seqs);
    out.emplace_back(static_cast<size_t>(desc.num_tokens() * hidden));
    model.hidden_states(desc, out.back());
  }
  return out;
}

// Elements whose bits differ (a NaN differs from everything, itself included).
size_t bits_differ(const std::vector<float>& a, const std::vector<float>& b) {
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += !(a[i] == b[i]);
  return differ;
}

// `got` against another CUDA path's `other`: NMSE <= bound (NaN fails), and > 0 where the two
// must round differently (`trace`: what a zero would mean); against the CPU within 1.25x the other
// path's distance + 1e-2. `what` names the case in the printed line and the failures.
void expect_near_other_path(const std::vector<float>& got, const std::vector<float>& other,
                            const std::vector<float>& cpu, double bound, const char* trace,
                            const std::string& what) {
  const double e = cuda_test::nmse(got, other);
  const double cpu_diff = test::max_abs_diff(got, cpu);
  const double other_cpu_diff = test::max_abs_diff(other, cpu);
  std::printf("  %s: NMSE vs the other path %.2e; max |diff| vs cpu %.2e (other path %.2e)\n",
              what.c_str(), e, cpu_diff, other_cpu_diff);
  EXPECT_LE(e, bound) << what;  // NaN fails
  if (trace) EXPECT_GT(e, 0.0) << what << ": " << trace;
  EXPECT_LE(cpu_diff, 1.25 * other_cpu_diff + 1e-2) << what;
}

class CudaEncoderStackTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

TEST_P(CudaEncoderStackTest, HiddenStatesFollowCompositionAndCpu) {
  const Case& c = GetParam();
  const auto dir = cuda_test::config_dir(std::string("encoder_stack_") + c.name, c.config);
  auto run = [&](Backend& b) {
    auto model = load_encoder(dir, b, {.dummy_weights = true, .dummy_seed = 5});
    return run_batches(*model, c.hidden);
  };
  CudaOptions on, off;
  off.encoder_stack = false;
  auto on_b = make_cuda_backend(0, on), off_b = make_cuda_backend(0, off);
  auto cpu_b = make_cpu_backend(2);
  const auto got = run(*on_b), composed = run(*off_b), cpu = run(*cpu_b);
  // The two batches past the GEMV rows took the stack; the switch off, and 5 rows, did not.
  EXPECT_EQ(cuda_stats(*on_b)->encoder_stacks, 2);
  EXPECT_EQ(cuda_stats(*off_b)->encoder_stacks, 0);
  ASSERT_EQ(got.size(), 3u);
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].size(), composed[b].size());
    if (b == 2) {
      // Below the GEMM rows: the composition itself, bit for bit.
      EXPECT_EQ(bits_differ(got[b], composed[b]), 0u) << "the 5-row batch left the composition";
      continue;
    }
    // Against the composition: bf16 q/k/v before RoPE, a bf16 rounding's worth (an indexing or
    // layout bug gives ~1).
    expect_near_other_path(got[b], composed[b], cpu[b], 2e-4,
                           "the stack's rounding of q/k/v left no trace",
                           std::string(c.name) + " batch " + std::to_string(b));
  }
}

// The packed attention on the wgmma kernel (CudaOptions::packed_wgmma) with RoPE inside it
// (packed_rope_inside: q and k rotated as they are staged) against the same kernel after the
// rope_stage16 launch: the rotation is that kernel's arithmetic, so the hidden states are the same
// bits (head_dim 128 keeps the launch: equal trivially, the rope count 0). Both against the
// mma.sync flash kernel (packed_wgmma off): NMSE <= 2e-4; and against the CPU as far as that
// kernel is. Each tile shape forced (64 vectors: the two warpgroups split each key tile, another
// summation order, so NMSE > 0 as well; 128: a warpgroup each 64 rows, the mma.sync kernel's tile
// and order, which can give its very bits: on the H200 the head_dim 64 model's short-sequence
// batch did), over a 1-row sequence, one of exactly a tile and ones just past a tile. That the
// wgmma kernel ran every layer of every batch is its launch count.
TEST_P(CudaEncoderStackTest, PackedWgmmaRopeInsideEqualsStagedRope) {
  const Case& c = GetParam();
  const auto dir = cuda_test::config_dir(std::string("encoder_stack_") + c.name, c.config);
  const std::vector<std::vector<int64_t>> batches = {{93}, {200, 77, 130}, {1, 64, 65, 129, 3}};
  auto run = [&](Backend& b) {
    auto model = load_encoder(dir, b, {.dummy_weights = true, .dummy_seed = 5});
    return run_batches(*model, c.hidden, batches);
  };
  auto cpu_b = make_cpu_backend(2);
  CudaOptions mma;
  mma.packed_wgmma = false;
  auto mma_b = make_cuda_backend(0, mma);
  const auto cpu = run(*cpu_b), reference = run(*mma_b);
  EXPECT_EQ(cuda_stats(*mma_b)->packed_wgmma, 0);
  const int64_t attentions = c.layers * static_cast<int64_t>(batches.size());
  const bool d64 = std::string(c.name) != "head_dim_128";  // the other two: head_dim 64
  for (int64_t vectors : {64, 128}) {
    SCOPED_TRACE("vectors " + std::to_string(vectors));
    CudaOptions inside, staged;
    inside.packed_wgmma = staged.packed_wgmma = true;  // (the default; said for the reader)
    inside.flash_wgmma_vectors = staged.flash_wgmma_vectors = vectors;
    inside.packed_rope_inside = true;
    staged.packed_rope_inside = false;
    auto inside_b = make_cuda_backend(0, inside), staged_b = make_cuda_backend(0, staged);
    const auto got = run(*inside_b), want = run(*staged_b);
    const CudaStats si = *cuda_stats(*inside_b), ss = *cuda_stats(*staged_b);
    EXPECT_EQ(si.encoder_stacks, 3);  // every batch past the GEMV rows
    EXPECT_EQ(si.packed_wgmma, attentions);
    EXPECT_EQ(si.packed_rope_inside, d64 ? si.packed_wgmma : 0);
    EXPECT_EQ(ss.packed_wgmma, si.packed_wgmma);
    EXPECT_EQ(ss.packed_rope_inside, 0);
    ASSERT_EQ(got.size(), batches.size());
    for (size_t b = 0; b < got.size(); ++b) {
      ASSERT_EQ(got[b].size(), want[b].size());
      EXPECT_EQ(bits_differ(got[b], want[b]), 0u)
          << "batch " << b << ": RoPE inside left the staged rotation's bits";
      // Against the mma.sync kernel.
      expect_near_other_path(got[b], reference[b], cpu[b], 2e-4,
                             vectors == 64 ? "no trace of another order" : nullptr,
                             std::string(c.name) + " vectors " + std::to_string(vectors) +
                                 " batch " + std::to_string(b));
    }
  }
}

// Wi and GeGLU as one stream GEMM launch (CudaOptions::encoder_stream_glu_max_rows) against the
// cuBLAS pair and the GeGLU kernel: batches of at most 128 rows take it (every layer: its count),
// a 407-row one keeps the pair (the same bits). The stream GEMM's GeGLU reads the f32 sums where
// the pair's kernel reads their bf16 roundings: NMSE <= 1e-4 and > 0, and against the CPU as far
// as the pair is (a wrong activation or a lost split gives ~1).
TEST_P(CudaEncoderStackTest, StreamGegluFollowsCublasPairAndCpu) {
  const Case& c = GetParam();
  const auto dir = cuda_test::config_dir(std::string("encoder_stack_") + c.name, c.config);
  const std::vector<std::vector<int64_t>> batches = {{93}, {50, 40, 38}, {200, 77, 130}};
  auto run = [&](Backend& b) {
    auto model = load_encoder(dir, b, {.dummy_weights = true, .dummy_seed = 5});
    return run_batches(*model, c.hidden, batches);
  };
  CudaOptions stream, pair;
  stream.encoder_stream_glu_max_rows = 128;
  auto stream_b = make_cuda_backend(0, stream), pair_b = make_cuda_backend(0, pair);
  auto cpu_b = make_cpu_backend(2);
  const auto got = run(*stream_b), want = run(*pair_b), cpu = run(*cpu_b);
  EXPECT_EQ(cuda_stats(*stream_b)->encoder_stacks, 3);
  EXPECT_EQ(cuda_stats(*stream_b)->encoder_stream_glu, 2 * c.layers);
  EXPECT_EQ(cuda_stats(*pair_b)->encoder_stream_glu, 0);
  ASSERT_EQ(got.size(), batches.size());
  for (size_t b = 0; b < got.size(); ++b) {
    ASSERT_EQ(got[b].size(), want[b].size());
    if (b == 2) {
      EXPECT_EQ(bits_differ(got[b], want[b]), 0u) << "the 407-row batch left the cuBLAS pair";
      continue;
    }
    // Against the cuBLAS pair.
    expect_near_other_path(got[b], want[b], cpu[b], 1e-4, "no trace of the stream GEMM's GeGLU",
                           std::string(c.name) + " batch " + std::to_string(b));
  }
}

// The TMA GEMMs of our own against the default path (cuBLAS and the elementwise kernels after it),
// in every batch past the GEMV rows (every layer: their counts), each alone, both, and both on the
// kernel's ping-pong schedule (CudaOptions::tma_gemm_pingpong):
//   - the GLU GEMM (CudaOptions::glu_gemm, glu_gemm.cu): Wi and GeGLU as one launch, GeGLU on the
//     f32 sums where the pair's kernel reads their bf16 roundings: NMSE <= 1e-4 and > 0;
//   - the residual GEMM (CudaOptions::residual_gemm, residual_gemm.cu): the o and Wo projections'
//     x += . W^T, cuBLAS's f32 sum in its own order (<= 1e-4, maybe 0).
// And against the CPU as far as the default path is (a wrong tile, row or activation gives ~1).
// Compute capability 9.0 only.
TEST_P(CudaEncoderStackTest, TmaGemmsFollowCublasAndCpu) {
  if (const char* why = cuda_test::sm90_missing()) GTEST_SKIP() << why;
  const Case& c = GetParam();
  const auto dir = cuda_test::config_dir(std::string("encoder_stack_") + c.name, c.config);
  const std::vector<std::vector<int64_t>> batches = {{93}, {50, 40, 38}, {200, 77, 130}};
  auto run = [&](Backend& b) {
    auto model = load_encoder(dir, b, {.dummy_weights = true, .dummy_seed = 5});
    return run_batches(*model, c.hidden, batches);
  };
  auto pair_b = make_cuda_backend(0, CudaOptions{});
  auto cpu_b = make_cpu_backend(2);
  const auto want = run(*pair_b), cpu = run(*cpu_b);
  EXPECT_EQ(cuda_stats(*pair_b)->glu_gemms, 0);
  EXPECT_EQ(cuda_stats(*pair_b)->residual_gemms, 0);
  for (const auto [glu, residual, pingpong] :
       {std::tuple{true, false, false}, {false, true, false}, {true, true, false},
        {true, true, true}}) {
    CudaOptions o;
    o.glu_gemm = glu;
    o.residual_gemm = residual;
    o.tma_gemm_pingpong = pingpong;
    auto b = make_cuda_backend(0, o);
    const auto got = run(*b);
    const std::string what = std::string(c.name) + (glu ? " glu" : "") +
                             (residual ? " residual" : "") + " gemm" +
                             (pingpong ? " ping-pong" : "");
    EXPECT_EQ(cuda_stats(*b)->encoder_stacks, 3) << what;
    EXPECT_EQ(cuda_stats(*b)->glu_gemms, glu ? 3 * c.layers : 0) << what;
    EXPECT_EQ(cuda_stats(*b)->residual_gemms, residual ? 3 * c.layers * 2 : 0) << what;
    ASSERT_EQ(got.size(), batches.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].size(), want[i].size());
      expect_near_other_path(got[i], want[i], cpu[i], 1e-4,
                             glu ? "no trace of the GLU GEMM's GeGLU" : nullptr,
                             what + " batch " + std::to_string(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaEncoderStackTest,
                         ::testing::Values(Case{"head_dim_64", kHeadDim64, 256, 4},
                                           Case{"head_dim_128", kHeadDim128, 256, 3},
                                           Case{"large_layers", kLargeLayers, 1024, 3}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace infera
