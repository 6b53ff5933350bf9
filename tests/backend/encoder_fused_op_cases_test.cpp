// The encoder's fused ops of ops/backend.h (add_layernorm, matmul_geglu), run by the harness on
// every backend and SIMD target against scalar references in double written here: the CPU
// exercises Backend's composite defaults, CUDA its fused kernels. add_layernorm is also held bit
// for bit to the add then layernorm it is defined as, on the same backend (CUDA's one-pass kernel
// claims exactly that). Shapes cover 1 row, widths that are no multiple of 4 (CUDA's composition),
// and matmul_geglu on both sides of CUDA's skinny GEMM (256 rows) and its bf16 GEMM path.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/op_harness.h"
#include "ops/backend.h"

namespace infera::test {
namespace {

using Doubles = std::vector<double>;
const DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class EncoderFusedOps : public ::testing::TestWithParam<HarnessBackend> {};

TEST_P(EncoderFusedOps, AddLayerNorm) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(41);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::LayerNorm, {wt})) {
        report.declined(Op::AddLayerNorm, wt);
        continue;
      }
      for (auto [rows, dim, with_bias] : {std::tuple{1, 1, false},
                                          {1, 7, true},
                                          {3, 64, false},
                                          {17, 129, true},
                                          {40, 1024, true},
                                          {5, 1028, false},
                                          {2, 4100, true}}) {
        // An offset mean checks that the variance is of deviations, not E[x^2] - E[x]^2.
        HostData x = make_host_data(DType::F32, size_t(rows * dim), rng, 3.0f);
        for (float& v : x.values) v += 20.0f;
        std::memcpy(x.bytes.data(), x.values.data(), x.bytes.size());
        HostData d = make_host_data(DType::F32, size_t(rows * dim), rng, 2.0f);
        HostData w = make_host_data(wt, size_t(dim), rng);
        HostData bias = make_host_data(wt, size_t(dim), rng);
        HostData x_again = x;  // the CPU's tensors may be views of the host data: x is updated
        Tensor xt = to_backend(b, "x", DType::F32, {rows, dim}, x);
        Tensor dt = to_backend(b, "delta", DType::F32, {rows, dim}, d);
        Tensor wtn = to_backend(b, "w", wt, {dim}, w);
        Tensor bt = with_bias ? to_backend(b, "b", wt, {dim}, bias) : Tensor();
        Tensor out = b.alloc("out", DType::F32, {rows, dim});
        b.add_layernorm(xt, dt, wtn, bt, 1e-5f, out);
        const std::vector<float> got_x = read_back(b, xt), got = read_back(b, out);

        // The composition on the same backend, from the same inputs.
        Tensor x2 = to_backend(b, "x2", DType::F32, {rows, dim}, x_again);
        Tensor out2 = b.alloc("out2", DType::F32, {rows, dim});
        b.add(x2, dt, x2);
        b.layernorm(x2, wtn, bt, 1e-5f, out2);
        const std::string name = dims({rows, dim}) + (with_bias ? " bias" : "");
        EXPECT_TRUE(bitwise_equal(got_x, read_back(b, x2)))
            << label << " " << name << ": x differs from add's";
        EXPECT_TRUE(bitwise_equal(got, read_back(b, out2)))
            << label << " " << name << ": out differs from add then layernorm";

        Doubles sum(x.values.size()), want(x.values.size());
        for (size_t i = 0; i < sum.size(); ++i) sum[i] = double(x_again.values[i]) + d.values[i];
        for (int r = 0; r < rows; ++r) {
          double mean = 0, var = 0;
          for (int i = 0; i < dim; ++i) mean += sum[size_t(r * dim + i)];
          mean /= dim;
          for (int i = 0; i < dim; ++i)
            var += (sum[size_t(r * dim + i)] - mean) * (sum[size_t(r * dim + i)] - mean);
          const double inv = 1.0 / std::sqrt(var / dim + 1e-5);
          for (int i = 0; i < dim; ++i)
            want[size_t(r * dim + i)] =
                (sum[size_t(r * dim + i)] - mean) * inv * w.values[size_t(i)] +
                (with_bias ? bias.values[size_t(i)] : 0.0);
        }
        report.check(Op::Add, DType::F32, name + " residual", got_x, sum);
        report.check(Op::AddLayerNorm, wt, name, got, want);
      }
    }
  });
}

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

TEST_P(EncoderFusedOps, MatmulGeglu) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(42);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::Matmul, {wt})) {
        report.declined(Op::MatmulGeglu, wt);
        continue;
      }
      // 1, 9, 100 rows: CUDA's GEMV / skinny GEMM then geglu; past 256 rows its bf16 GEMMs (a
      // pair) and the bf16 GeGLU kernel: 16-byte path, and 1030 x 133 (no multiple of 8) the
      // scalar one.
      for (auto [n, k, m] : {std::tuple{1, 64, 37},
                             {9, 128, 40},
                             {100, 72, 65},
                             {300, 256, 96},
                             {600, 256, 200},
                             {1030, 128, 133}}) {
        if (skip_under_sanitizer(b, int64_t(n) * k * m)) continue;
        HostData x = make_host_data(DType::F32, size_t(n * k), rng);
        HostData w_in = make_host_data(wt, size_t(m * k), rng);
        HostData w_gate = make_host_data(wt, size_t(m * k), rng);
        Tensor xt = to_backend(b, "x", DType::F32, {n, k}, x);
        Tensor in_t = to_backend(b, "w_in", wt, {m, k}, w_in);
        Tensor gate_t = to_backend(b, "w_gate", wt, {m, k}, w_gate);
        Tensor out = b.alloc("out", DType::F32, {n, m}), gate = b.alloc("gate", DType::F32, {n, m});
        const Doubles a = matmul_reference(x.values, w_in.values, n, k, m);
        const Doubles g = matmul_reference(x.values, w_gate.values, n, k, m);
        Doubles want(a.size());
        b.matmul_geglu(xt, in_t, gate_t, out, gate);
        for (size_t i = 0; i < a.size(); ++i) want[i] = gelu_ref(a[i]) * g[i];
        report.check(Op::MatmulGeglu, wt, dims({n, k, m}), read_back(b, out), want);
        // The same weight twice (gelu(y) * y): the pairing of the two halves is not swapped.
        b.matmul_geglu(xt, in_t, in_t, out, gate);
        for (size_t i = 0; i < a.size(); ++i) want[i] = gelu_ref(a[i]) * a[i];
        report.check(Op::MatmulGeglu, wt, dims({n, k, m}) + " same weight", read_back(b, out),
                     want);
        // Swapped roles: gelu(x . w_gate) * (x . w_in). A kernel that ignored which half is
        // the input would pass one of the two checks only.
        b.matmul_geglu(xt, gate_t, in_t, out, gate);
        for (size_t i = 0; i < a.size(); ++i) want[i] = gelu_ref(g[i]) * a[i];
        report.check(Op::MatmulGeglu, wt, dims({n, k, m}) + " swapped", read_back(b, out), want);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, EncoderFusedOps, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
