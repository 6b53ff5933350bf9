// The cuBLASLt GEMM plans (CudaOptions::cublaslt_plans, gemm_plans.h): prefill-sized matmuls
// against a double-precision scalar reference, with operands at addresses cuBLASLt must not
// assume 256-byte aligned (a view starting one row in, odd row widths), and the Qwen3 prefill
// against the cublasGemmEx path. Skips where no CUDA device is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "infera/tensor.h"

namespace infera {
namespace {

Tensor host_tensor(const std::string& name, Shape shape, std::vector<float>& data) {
  return Tensor(name, DType::F32, shape, Device::CPU, data.data(), nullptr);
}

class CudaGemmPlansTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device visible: cuda tests not run";
  }
};

// f32 weights keep x as it is (no bf16 copy), so cuBLASLt reads x at the view's address.
TEST_P(CudaGemmPlansTest, MatmulOfUnalignedViewsFollowsTheScalarReference) {
  CudaOptions o;
  o.cublaslt_plans = GetParam();
  auto backend = make_cuda_backend(0, o);
  for (const auto [n, k, m] :
       {std::tuple<int64_t, int64_t, int64_t>{64, 35, 48}, {33, 17, 7}, {300, 64, 130}}) {
    std::vector<float> x(static_cast<size_t>((n + 1) * k)), w(static_cast<size_t>(m * k));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) * 0.5f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.11f * float(i) + 0.3f) * 0.25f;
    const Tensor xd = backend->prepare_weight(host_tensor("x", {n + 1, k}, x));
    const Tensor wd = backend->prepare_weight(host_tensor("w", {m, k}, w));
    const Tensor xv = xd.rows(1, n);  // starts 4 * k bytes in
    Tensor out = backend->alloc("out", DType::F32, {n, m});
    backend->matmul(xv, wd, out);
    std::vector<float> got(static_cast<size_t>(n * m));
    backend->to_host(out, got);
    double worst = 0;
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < m; ++c) {
        double want = 0;
        for (int64_t j = 0; j < k; ++j)
          want += double(x[static_cast<size_t>((r + 1) * k + j)]) *
                  double(w[static_cast<size_t>(c * k + j)]);
        const double err = std::fabs(double(got[static_cast<size_t>(r * m + c)]) - want);
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
      }
    EXPECT_LE(worst, 1e-4) << "n " << n << " k " << k << " m " << m;  // f32 sums of <= 64 terms
  }
}

INSTANTIATE_TEST_SUITE_P(LtAndGemmEx, CudaGemmPlansTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "lt" : "gemmex"; });

}  // namespace
}  // namespace infera
