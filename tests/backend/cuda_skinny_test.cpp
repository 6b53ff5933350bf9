// The skinny tensor-core GEMM (CudaOptions::skinny_gemm, skinny_gemm.cu), which decode batches
// past the GEMV may take instead of cuBLAS (opt-in: off by default): it must really be chosen
// (profile names), give the same results as cuBLAS to f32 summation order on a whole model (Qwen3
// shape: q/k/v in one launch, gate/up with the SwiGLU epilogue and its bf16 copy for the down
// projection), and be deterministic across repeated launches and graph replays (split k is added
// in cluster rank order). The op harness (op_cases_test.cpp, fused_op_cases_test.cpp, backend
// cuda_skinny) checks it against scalar references. Skips where no CUDA device is visible.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda_test_models.h"
#include "core/dtype_convert.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "infera/error.h"
#include "model/causal_lm.h"

namespace infera {
namespace {

using cuda_test::config_dir;
using cuda_test::kQwen3;
using cuda_test::nmse;
using cuda_test::prompt_logits;

// Logits of every row of an n-token prompt (n within the skinny range: every matmul of the step,
// the LM head included, takes it when on).
std::vector<float> qwen3_prefill(Backend& backend, int64_t n) {
  return prompt_logits(backend, config_dir("skinny_qwen3", kQwen3), n);
}

CudaOptions skinny(bool on, bool profile = false) {
  CudaOptions o;
  o.skinny_gemm = on;
  o.stream_gemm = false;  // which would take 9..64 rows first
  o.profile = profile;
  return o;
}

class CudaSkinnyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

// 100 rows: one partial 64-row x tile; the 256-wide layers give k = 256 (4 chunks) and 512
// (down), the GQA projections 3 segments of 256, 128, 128 rows (one partial 64-row weight tile
// each would show as NaN or garbage, not as rounding).
TEST_F(CudaSkinnyTest, Qwen3PrefillFollowsCublas) {
  auto cublas = make_cuda_backend(0, skinny(false));
  auto ours = make_cuda_backend(0, skinny(true, true));
  for (int64_t n : {9, 100, 256}) {
    const std::vector<float> want = qwen3_prefill(*cublas, n);
    const std::vector<float> got = qwen3_prefill(*ours, n);
    ASSERT_EQ(got.size(), want.size());
    const double e = nmse(got, want);
    // Same bf16 inputs, another f32 summation order; a flipped bf16 rounding of an activation
    // carries through the layers (measured 1.1e-5 at 256 rows on the H200); an indexing bug
    // gives ~1.
    EXPECT_TRUE(e <= 1e-4) << n << " rows: NMSE " << e;
  }
  const std::string report = cuda_profile_report(*ours);
  EXPECT_NE(report.find("skinny_gemm"), std::string::npos) << report;
  EXPECT_NE(report.find("skinny_swiglu"), std::string::npos) << report;
  EXPECT_EQ(report.find("cublas"), std::string::npos) << report;
  EXPECT_EQ(report.find("swiglu / swiglu"), std::string::npos) << report;  // no separate pass
}

// A k split across CTAs (n = 16, m = 128: 2 tiles for 132 SMs, k = 4096: 64 chunks) run three
// times in a row, eagerly and as a replayed graph: same bits each time, and rows past the skinny
// limit (300) go to cuBLAS.
TEST_F(CudaSkinnyTest, SplitKIsDeterministicAndRowLimitHolds) {
  CudaOptions o = skinny(true);
  o.skinny_max_rows = 256;
  auto b = make_cuda_backend(0, o);  // graphs on: the second and third runs replay a graph
  for (auto [n, k, m] : {std::tuple{16, 4096, 128}, {300, 256, 64}})
    cuda_test::expect_matmul_repeats_bit_for_bit(*b, n, k, m);
}

// Which kernel a matmul takes: rows within (8, skinny_max_rows] the skinny GEMM, more rows cuBLAS.
TEST_F(CudaSkinnyTest, RowLimitChoosesTheKernel) {
  CudaOptions o = skinny(true, true);
  o.skinny_max_rows = 100;
  auto b = make_cuda_backend(0, o);
  std::vector<uint16_t> wb(size_t(64 * 128), f32_to_bf16(0.5f));
  Tensor w =
      b->prepare_weight(Tensor("w", DType::BF16, {64, 128}, Device::CPU, wb.data(), nullptr));
  for (int64_t n : {100, 101}) {
    std::vector<float> xv(size_t(n * 128), 1.0f);
    Tensor x =
        b->prepare_weight(Tensor("x", DType::F32, {n, 128}, Device::CPU, xv.data(), nullptr));
    Tensor out = b->alloc("out", DType::F32, {n, 64});
    b->matmul(x, w, out);
    std::vector<float> got(size_t(n * 64));
    b->to_host(out, got);
    size_t wrong = 0;
    for (float v : got) wrong += !(v == 64.0f);  // 128 x 0.5, exact in any order
    EXPECT_EQ(wrong, 0u) << n << " rows";
    const std::string report = cuda_profile_report(*b);
    EXPECT_NE(report.find(n == 100 ? "skinny_gemm" : "cublas_gemm"), std::string::npos)
        << n << " rows:\n"
        << report;
    EXPECT_EQ(report.find(n == 100 ? "cublas_gemm" : "skinny_gemm"), std::string::npos)
        << n << " rows:\n"
        << report;
  }
}

TEST_F(CudaSkinnyTest, RowLimitOutsideItsRangeIsRejected) {
  CudaOptions o;
  o.skinny_max_rows = 5000;
  EXPECT_THROW(make_cuda_backend(0, o), InvalidArgument);
}

}  // namespace
}  // namespace infera
