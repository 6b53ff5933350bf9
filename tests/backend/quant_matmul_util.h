// Shared by the quantized matmul tests (quant_matmul_test.cpp, quant_rowgroups_test.cpp): random
// weights and activations, and the reference every kernel is held to. Reference: the weights
// dequantized by the reference dequantizer (bit-identical to the gguf package, tests/quant) times
// the activations as quantized (d * q), summed in double. The kernels compute the same integer
// products exactly and differ only in f32 rounding of the per-block scales and of the
// accumulation: 1e-5 of sum |w * a| bounds that (f32 epsilon 6e-8 times a few hundred blocks)
// while any wrong nibble, scale or offset moves the result by far more.
#pragma once

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_int8_gemm.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_rowgroups.h"
#include "infera/error.h"
#include "ops/backend.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera::test {

inline const DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};

inline std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Weight rows: either quantized from random values, or raw random bytes (every bit pattern of
// nibbles, scales and mins, including Q8_0's -128) with finite f16 scale fields.
inline std::vector<uint8_t> make_weight(DType dtype, int64_t m, int64_t k, bool raw,
                                        uint32_t seed) {
  const size_t row_bytes = dtype_bytes(dtype, static_cast<size_t>(k));
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(m));
  if (!raw) {
    const auto values = random_values(static_cast<size_t>(m * k), seed, 0.05f);
    for (int64_t j = 0; j < m; ++j)
      quant::quantize_row(dtype, values.data() + j * k, k, w.data() + row_bytes * size_t(j));
    return w;
  }
  std::mt19937 rng(seed);
  for (auto& b : w) b = static_cast<uint8_t>(rng());
  const size_t block_bytes = dtype_bytes(dtype, static_cast<size_t>(dtype_block_size(dtype)));
  for (size_t off = 0; off < w.size(); off += block_bytes) {
    std::vector<size_t> halves;  // offsets of f16 fields in the block
    if (dtype == DType::Q8_0 || dtype == DType::Q4_0) halves = {0};
    if (dtype == DType::Q4_K) halves = {0, 2};
    if (dtype == DType::Q6_K) halves = {208};
    for (size_t h : halves) w[off + h + 1] &= 0x3B;  // positive, exponent <= 14: |d| < 1
  }
  return w;
}

struct Shape3 {
  int64_t n, k, m;
};

inline std::vector<Shape3> shapes_for(DType dtype) {
  if (dtype_block_size(dtype) == 32)
    return {{1, 32, 1},  {1, 96, 37}, {2, 64, 17}, {3, 160, 5},  {4, 32, 33},
            {5, 128, 9}, {9, 64, 40}, {17, 96, 3}, {2, 288, 11}, {1, 1024, 23}};
  return {{1, 256, 1},  {1, 512, 19}, {2, 256, 7},  {3, 768, 5},
          {4, 256, 33}, {5, 512, 9},  {9, 256, 20}, {17, 256, 3}};
}

// Reference dot products of activation values a [n, k] (double) with the dequantized weights, and
// the bound for each output.
inline void reference_values(DType dtype, const std::vector<double>& a, int64_t n, int64_t k,
                             const std::vector<uint8_t>& w, int64_t m, std::vector<double>& want,
                             std::vector<double>& bound) {
  const size_t row_bytes = dtype_bytes(dtype, static_cast<size_t>(k));
  std::vector<float> wrow(static_cast<size_t>(k));
  want.assign(size_t(n * m), 0.0);
  bound.assign(size_t(n * m), 0.0);
  for (int64_t j = 0; j < m; ++j) {
    quant::dequantize_row(dtype, w.data() + row_bytes * size_t(j), k, wrow.data());
    for (int64_t i = 0; i < n; ++i) {
      double s = 0, s_abs = 0;
      for (int64_t p = 0; p < k; ++p) {
        s += double(wrow[size_t(p)]) * a[size_t(i * k + p)];
        s_abs += std::fabs(double(wrow[size_t(p)]) * a[size_t(i * k + p)]);
      }
      want[size_t(i * m + j)] = s;
      bound[size_t(i * m + j)] = 1e-5 * s_abs + 1e-30;
    }
  }
}

// The same with the activations as the decode kernels quantize them.
inline void reference(DType dtype, const std::vector<uint8_t>& acts, int64_t n, int64_t k,
                      const std::vector<uint8_t>& w, int64_t m, std::vector<double>& want,
                      std::vector<double>& bound) {
  const int64_t act_bytes = cpu::activation_row_bytes(dtype, k);
  std::vector<double> a(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* row = acts.data() + i * act_bytes;
    for (int64_t p = 0; p < k; ++p) {
      float d;
      int q;
      cpu::activation_element(dtype, row, p, d, q);
      a[size_t(i * k + p)] = double(d) * q;
    }
  }
  reference_values(dtype, a, n, k, w, m, want, bound);
}

// The same with the activations quantized as the int8 GEMM specifies (plain scalar: per
// sub-block of S, d = max|x| / 127, q = round-half-even(x * 127 / max|x|)).
inline void gemm_reference(DType dtype, const std::vector<float>& x, int64_t n, int64_t k,
                           const std::vector<uint8_t>& w, int64_t m, std::vector<double>& want,
                           std::vector<double>& bound) {
  const int S = cpu::int8_gemm_sub_block(dtype);
  std::vector<double> a(static_cast<size_t>(n * k));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p0 = 0; p0 < k; p0 += S) {
      float amax = 0;
      for (int t = 0; t < S; ++t) amax = std::max(amax, std::fabs(x[size_t(i * k + p0 + t)]));
      const float inv = amax > 0 ? 127.0f / amax : 0.0f, d = amax / 127.0f;
      for (int t = 0; t < S; ++t) {
        const float q = std::nearbyint(x[size_t(i * k + p0 + t)] * inv);
        a[size_t(i * k + p0 + t)] = double(d) * double(q);
      }
    }
  }
  reference_values(dtype, a, n, k, w, m, want, bound);
}

// The reference for the CPU backend's quantized matmul of x [n, k]: decode rows (n <
// kQuantPrefillRows) quantize x as the decode kernels do, prefill rows as the int8 GEMM specifies
// where the CPU has it, and stay f32 on the panel fallback elsewhere.
inline void backend_matmul_reference(DType dtype, const std::vector<float>& x, int64_t n, int64_t k,
                                     const std::vector<uint8_t>& w, int64_t m,
                                     std::vector<double>& want, std::vector<double>& bound) {
  if (n < cpu::kQuantPrefillRows) {
    const int64_t act_bytes = cpu::activation_row_bytes(dtype, k);
    std::vector<uint8_t> acts(size_t(n * act_bytes));
    for (int64_t i = 0; i < n; ++i)
      cpu::quantize_activation_row(dtype, x.data() + i * k, k, acts.data() + i * act_bytes);
    reference(dtype, acts, n, k, w, m, want, bound);
  } else if (cpu::has_int8_gemm()) {
    gemm_reference(dtype, x, n, k, w, m, want, bound);
  } else {
    reference_values(dtype, std::vector<double>(x.begin(), x.end()), n, k, w, m, want, bound);
  }
}

// backend.matmul of x [n, k] (from xv) by the weight w [m, k] (wbytes: its blocks in the file
// layout, for the reference), every output within the reference's bound; a NaN fails the
// comparison. Fatal on the first miss: callers wrap it in ASSERT_NO_FATAL_FAILURE.
inline void expect_backend_matmul_within_reference(Backend& backend, const Tensor& w,
                                                   const std::vector<uint8_t>& wbytes,
                                                   const std::vector<float>& xv, int64_t n) {
  const int64_t m = w.dim(0), k = w.dim(1);
  Tensor x = backend.alloc("x", DType::F32, {n, k});
  std::memcpy(x.data(), xv.data(), xv.size() * 4);
  Tensor out = backend.alloc("out", DType::F32, {n, m});
  backend.matmul(x, w, out);
  std::vector<double> want, bound;
  backend_matmul_reference(w.dtype(), xv, n, k, wbytes, m, want, bound);
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_TRUE(std::fabs(out.data_as<float>()[i] - want[i]) <= bound[i])
        << i << ": " << out.data_as<float>()[i] << " vs " << want[i];
}

template <typename Body>
void for_each_simd_target(Body body) {
  int tested = 0;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    ++tested;
    SCOPED_TRACE(hwy::TargetName(target));
    ASSERT_STREQ(cpu::quant_kernel_target_name(), hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(tested, 2);
}

}  // namespace infera::test
