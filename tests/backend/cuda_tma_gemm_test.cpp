// The TMA GEMMs of tma_gemm.cuh against double references of the bf16-rounded operands:
//   - the GLU GEMM (CudaOptions::glu_gemm, glu_gemm.cu): matmul_swiglu and matmul_geglu as one
//     kernel with the gated unit in its epilogue (x rounded to bf16 as every bf16 GEMM path rounds
//     it), at each tile width and over shapes with partial tiles in every dimension (rows, output
//     columns, k, an odd column count), and the same bits on repeats and graph replays;
//   - the residual GEMM (residual_gemm.cu), launched directly: out += x . w^T at each tile width.
// The whole-model checks are in cuda_gemm_stack_test.cpp and cuda_encoder_stack_test.cpp, the op
// harness's cuda_glu_gemm target runs the fused-op cases, cuda_qkv_gemm_test.cpp the q/k/v GEMM.
// Skips where no CUDA device is visible or it is not compute capability 9.0.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/residual_gemm.h"
#include "backend/cuda_test_models.h"
#include "core/dtype_convert.h"

namespace infera {
namespace {

class CudaTmaGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* why = cuda_test::sm90_missing()) GTEST_SKIP() << why;
  }
};

// tile_cols -1: the ping-pong schedule (CudaOptions::tma_gemm_pingpong, its 64 columns).
CudaOptions glu_gemm(int64_t tile_cols) {
  CudaOptions o;
  o.glu_gemm = true;
  o.glu_gemm_tile_cols = tile_cols;
  o.tma_gemm_pingpong = tile_cols < 0;
  o.stream_gemm = false;  // (its rows, 4..32, would not reach the kernel)
  return o;
}

struct Problem {
  int64_t n, k, f;
  std::vector<float> x;          // [n, k] f32, as the op takes it
  std::vector<uint16_t> w0, w1;  // [f, k] bf16
};

Problem random_problem(int64_t n, int64_t k, int64_t f, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Problem p{n,
            k,
            f,
            std::vector<float>(size_t(n * k)),
            std::vector<uint16_t>(size_t(f * k)),
            std::vector<uint16_t>(size_t(f * k))};
  for (float& v : p.x) v = dist(rng);
  // Weights of ~1 / sqrt(k): products of order 1, where silu and gelu are not linear.
  const float scale = 2.0f / std::sqrt(static_cast<float>(k));
  for (uint16_t& v : p.w0) v = f32_to_bf16(dist(rng) * scale);
  for (uint16_t& v : p.w1) v = f32_to_bf16(dist(rng) * scale);
  return p;
}

// The problem's tensors on `backend`; run() records the op again on the same tensors (the second
// time a step is seen it is captured, later ones replay the graph) and reads its f32 result back:
// matmul_swiglu's gate, or matmul_geglu's out.
struct OnDevice {
  OnDevice(Backend& backend, const Problem& p)
      : b(backend),
        w0(upload_bf16(backend, "w0", p.w0, p.f, p.k)),
        w1(upload_bf16(backend, "w1", p.w1, p.f, p.k)),
        x(backend.prepare_weight(Tensor("x", DType::F32, {p.n, p.k}, Device::CPU,
                                        const_cast<float*>(p.x.data()), nullptr))),
        out(backend.alloc("out", DType::F32, {p.n, p.f})),
        scratch(backend.alloc("scratch", DType::F32, {p.n, p.f})) {}
  static Tensor upload_bf16(Backend& backend, const char* name, const std::vector<uint16_t>& w,
                            int64_t rows, int64_t cols) {
    return backend.prepare_weight(Tensor(name, DType::BF16, {rows, cols}, Device::CPU,
                                         const_cast<uint16_t*>(w.data()), nullptr));
  }
  std::vector<float> run(bool geglu) {
    if (geglu)
      b.matmul_geglu(x, w0, w1, out, scratch);
    else
      b.matmul_swiglu(x, w0, w1, out, scratch);
    std::vector<float> host(static_cast<size_t>(out.numel()));
    b.to_host(out, host);
    return host;
  }
  Backend& b;
  Tensor w0, w1, x, out, scratch;
};

// NMSE of `got` against act(x . w0^T) * (x . w1^T) in double over the bf16-rounded operands, on
// every row up to 48 rows, else on 48 rows spread over them and the last (the largest shape's
// full reference would take seconds). NaN where anything is NaN.
double nmse_to_reference(const Problem& p, const std::vector<float>& got, bool geglu) {
  std::vector<int64_t> rows;
  const int64_t step = p.n <= 48 ? 1 : p.n / 48;
  for (int64_t i = 0; i < p.n; i += step) rows.push_back(i);
  if (rows.back() != p.n - 1) rows.push_back(p.n - 1);
  double err = 0, ref = 0;
  std::vector<double> xr(size_t(p.k));
  for (int64_t i : rows) {
    for (int64_t c = 0; c < p.k; ++c)
      xr[size_t(c)] = bf16_to_f32(f32_to_bf16(p.x[size_t(i * p.k + c)]));
    for (int64_t j = 0; j < p.f; ++j) {
      double a = 0, b = 0;
      for (int64_t c = 0; c < p.k; ++c) {
        a += xr[size_t(c)] * bf16_to_f32(p.w0[size_t(j * p.k + c)]);
        b += xr[size_t(c)] * bf16_to_f32(p.w1[size_t(j * p.k + c)]);
      }
      const double act =
          geglu ? 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0))) : a / (1.0 + std::exp(-a));
      const double want = act * b, d = double(got[size_t(i * p.f + j)]) - want;
      err += d * d;
      ref += want * want;
    }
  }
  return ref > 0 ? err / ref : std::nan("");
}

// Every tile width and the ping-pong schedule (tile -1) over shapes with partial tiles: 9 rows
// (the GEMM's fewest past the GEMV), 93 (ModernBERT's 1x93 at its 2624 columns), an odd column
// count (scalar stores), k not a multiple of 64 (a zero-filled last k block), and Qwen3-0.6B's
// 2048 x 1024 x 3072 (16 x 48 tiles of 64 columns: every block takes many tiles, each of its
// warpgroups every other one).
TEST_F(CudaTmaGemmTest, SwigluAndGegluMatchDoubleReference) {
  const int64_t shapes[][3] = {{9, 64, 64},     {33, 72, 37},    {93, 1024, 2624},  {128, 128, 136},
                               {200, 1032, 64}, {777, 256, 200}, {2048, 1024, 3072}};
  for (int64_t tile : {0, 64, 128, -1}) {
    auto backend = make_cuda_backend(0, glu_gemm(tile));
    unsigned seed = 1;
    for (const auto& s : shapes)
      for (bool geglu : {false, true}) {
        const Problem p = random_problem(s[0], s[1], s[2], seed++);
        const int64_t before = cuda_stats(*backend)->glu_gemms;
        const std::vector<float> got = OnDevice(*backend, p).run(geglu);
        const std::string what = std::string(geglu ? "geglu " : "swiglu ") + std::to_string(p.n) +
                                 "x" + std::to_string(p.k) + "x" + std::to_string(p.f) + " tile " +
                                 std::to_string(tile);
        EXPECT_EQ(cuda_stats(*backend)->glu_gemms, before + 1) << what << ": not on the kernel";
        const double e = nmse_to_reference(p, got, geglu);
        std::printf("  %s: NMSE %.2e\n", what.c_str(), e);
        // f32 accumulation of bf16 products and f32 exp / erf: ~1e-12 seen for such sums; a
        // wrong tile, row or column gives ~1, a missing k block ~1e-2.
        EXPECT_LE(e, 1e-8) << what;  // NaN fails
      }
  }
}

// No split k, no atomics: the same bits on every run, eager and replayed; a stage the producer
// overwrote before its products were done (or, ping-pong, a warpgroup's wait passing on an old
// phase) would show here first. Both schedules.
TEST_F(CudaTmaGemmTest, RepeatsAndReplaysGiveTheSameBits) {
  const Problem p = random_problem(1100, 1024, 3072, 99);  // 9 row tiles: a partial band
  for (int64_t tile : {0, -1}) {
    auto backend = make_cuda_backend(0, glu_gemm(tile));
    OnDevice on(*backend, p);
    const int64_t graphs_before = cuda_stats(*backend)->graph_launches;
    std::vector<float> first;
    for (int rep = 0; rep < 4; ++rep) {
      const std::vector<float> got = on.run(false);
      if (rep == 0) first = got;
      size_t differ = 0;
      for (size_t i = 0; i < got.size(); ++i) differ += !(got[i] == first[i]);
      EXPECT_EQ(differ, 0u) << "tile " << tile << " repeat " << rep;
    }
    EXPECT_GE(cuda_stats(*backend)->graph_launches - graphs_before, 1) << "no graph replay";
    EXPECT_LE(nmse_to_reference(p, first, false), 1e-8) << "tile " << tile;
  }
}

// out += x . w^T with out holding values already (the residual stream), each tile width, the
// rule's and the ping-pong schedule, over partial tiles in every dimension; rows sampled as the
// GLU test's.
TEST_F(CudaTmaGemmTest, ResidualGemmMatchesDoubleReference) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const int64_t shapes[][3] = {
      {1, 64, 64}, {77, 1032, 1000}, {300, 2048, 1024}, {2048, 3072, 1024}};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const auto& sh : shapes) {
    const int64_t m = sh[0], k = sh[1], n = sh[2];
    std::vector<uint16_t> x(size_t(m * k)), w(size_t(n * k));
    std::vector<float> out0(size_t(m * n));
    for (auto& v : x) v = f32_to_bf16(dist(rng));
    for (auto& v : w) v = f32_to_bf16(dist(rng) / std::sqrt(static_cast<float>(k)));
    for (auto& v : out0) v = dist(rng);
    void *x_d = nullptr, *w_d = nullptr;
    float* out_d = nullptr;
    ASSERT_EQ(cudaMalloc(&x_d, x.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&w_d, w.size() * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out_d, out0.size() * 4), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(x_d, x.data(), x.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(w_d, w.data(), w.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < m; i += m <= 48 ? 1 : m / 48) rows.push_back(i);
    if (rows.back() != m - 1) rows.push_back(m - 1);
    for (int64_t tile : {0, 128, 256, -1}) {  // -1: the ping-pong schedule
      const std::string what = std::to_string(m) + "x" + std::to_string(k) + "x" +
                               std::to_string(n) + " tile " + std::to_string(tile);
      ASSERT_EQ(cudaMemcpy(out_d, out0.data(), out0.size() * 4, cudaMemcpyHostToDevice),
                cudaSuccess);
      const cuda::ResidualGemmArgs a{
          x_d, w_d, out_d, m, k, n, {tile, prop.multiProcessorCount, tile < 0 ? 1 : 0}};
      ASSERT_EQ(cuda::residual_gemm_unsupported(a, prop.major, prop.minor), nullptr) << what;
      cuda::launch_residual_gemm(&a, nullptr);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      std::vector<float> got(out0.size());
      ASSERT_EQ(cudaMemcpy(got.data(), out_d, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      double err = 0, ref = 0;
      for (int64_t i : rows)
        for (int64_t j = 0; j < n; ++j) {
          double s = out0[size_t(i * n + j)];
          for (int64_t c = 0; c < k; ++c)
            s += double(bf16_to_f32(x[size_t(i * k + c)])) * bf16_to_f32(w[size_t(j * k + c)]);
          const double d = double(got[size_t(i * n + j)]) - s;
          err += d * d;
          ref += s * s;
        }
      const double e = ref > 0 ? err / ref : std::nan("");
      std::printf("  residual %s: NMSE %.2e\n", what.c_str(), e);
      // f32 sums: ~1e-13; a lost k block or a tile written twice (added twice) gives >= 1e-3.
      EXPECT_LE(e, 1e-9) << what;  // NaN fails
    }
    cudaFree(x_d);
    cudaFree(w_d);
    cudaFree(out_d);
  }
}

}  // namespace
}  // namespace infera
