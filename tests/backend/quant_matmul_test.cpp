// The quantized matmul kernels against a plain reference, on every SIMD target this CPU runs
// (AVX512-VNNI as Highway's AVX3_DL, AVX-512, AVX2, SSE4/SSSE3 integer loops), odd shapes, one and
// two threads. Reference: the weights dequantized by the reference dequantizer (bit-identical to
// the gguf package, tests/quant) times the activations as quantized (d * q), summed in double.
// The kernels compute the same integer products exactly and differ only in f32 rounding of the
// per-block scales and of the accumulation: 1e-5 of sum |w * a| bounds that (f32 epsilon 6e-8
// times a few hundred blocks) while any wrong nibble, scale or offset moves the result by far more.
#include "backend/cpu/quant_matmul.h"

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
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_rowgroups.h"
#include "infera/error.h"
#include "ops/backend.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera {
namespace {

const DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Weight rows: either quantized from random values, or raw random bytes (every bit pattern of
// nibbles, scales and mins, including Q8_0's -128) with finite f16 scale fields.
std::vector<uint8_t> make_weight(DType dtype, int64_t m, int64_t k, bool raw, uint32_t seed) {
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

std::vector<Shape3> shapes_for(DType dtype) {
  if (dtype_block_size(dtype) == 32)
    return {{1, 32, 1},  {1, 96, 37}, {2, 64, 17}, {3, 160, 5},  {4, 32, 33},
            {5, 128, 9}, {9, 64, 40}, {17, 96, 3}, {2, 288, 11}, {1, 1024, 23}};
  return {{1, 256, 1},  {1, 512, 19}, {2, 256, 7},  {3, 768, 5},
          {4, 256, 33}, {5, 512, 9},  {9, 256, 20}, {17, 256, 3}};
}

// Reference dot products of activation values a [n, k] (double) with the dequantized weights, and
// the bound for each output.
void reference_values(DType dtype, const std::vector<double>& a, int64_t n, int64_t k,
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
void reference(DType dtype, const std::vector<uint8_t>& acts, int64_t n, int64_t k,
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
void gemm_reference(DType dtype, const std::vector<float>& x, int64_t n, int64_t k,
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

TEST(QuantMatmul, KernelsMatchReferenceOnEverySimdTarget) {
  for (const DType dtype : kQuantTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    for (const bool raw : {false, true}) {
      for (const Shape3 c : shapes_for(dtype)) {
        SCOPED_TRACE(testing::Message()
                     << "raw=" << raw << " n=" << c.n << " k=" << c.k << " m=" << c.m);
        const auto w = make_weight(dtype, c.m, c.k, raw, uint32_t(c.n * 7 + c.m));
        const auto x = random_values(size_t(c.n * c.k), uint32_t(c.k + c.m));
        const int64_t act_bytes = cpu::activation_row_bytes(dtype, c.k);
        std::vector<uint8_t> acts(size_t(c.n * act_bytes));
        for (int64_t i = 0; i < c.n; ++i)
          cpu::quantize_activation_row(dtype, x.data() + i * c.k, c.k, acts.data() + i * act_bytes);
        std::vector<double> want, bound;
        reference(dtype, acts, c.n, c.k, w, c.m, want, bound);
        for_each_simd_target([&] {
          // A sub-range of weight rows, into a wider output (ldo > m), as the threads call it.
          const int64_t ldo = c.m + 3, j_begin = c.m > 2 ? 1 : 0;
          std::vector<float> out(size_t(c.n * ldo), NAN);
          cpu::matmul_rows_quantized(acts.data(), c.n, c.k, w.data(), dtype, j_begin, c.m,
                                     out.data(), ldo);
          for (int64_t i = 0; i < c.n; ++i) {
            for (int64_t j = 0; j < c.m; ++j) {
              const float got = out[size_t(i * ldo + j)];
              if (j < j_begin) {
                ASSERT_TRUE(std::isnan(got)) << "row " << j << " written outside its range";
                continue;
              }
              const double e = want[size_t(i * c.m + j)];
              ASSERT_TRUE(std::fabs(got - e) <= bound[size_t(i * c.m + j)])
                  << "out[" << i << ", " << j << "] = " << got << ", want " << e;
            }
            ASSERT_TRUE(std::isnan(out[size_t(i * ldo + c.m)])) << "wrote past m";
          }
          // A row's result does not depend on the rows sharing its call (decode splits rows
          // over threads anywhere): each row alone equals it inside the range, bit for bit.
          for (int64_t j = j_begin; j < c.m; ++j) {
            std::vector<float> one(size_t(c.n * ldo), NAN);
            cpu::matmul_rows_quantized(acts.data(), c.n, c.k, w.data(), dtype, j, j + 1, one.data(),
                                       ldo);
            for (int64_t i = 0; i < c.n; ++i)
              ASSERT_EQ(0, std::memcmp(&one[size_t(i * ldo + j)], &out[size_t(i * ldo + j)], 4))
                  << "row " << j << " alone differs";
          }
          // The prefill panels' dequantization (vectorized per target): the reference values,
          // up to one rounding where the target fuses d * q - m (relative 2^-22 of the row's
          // largest term is far below any wrong nibble or scale).
          std::vector<float> panel(size_t(c.m * c.k), NAN), ref(size_t(c.k));
          cpu::dequantize_rows(w.data(), dtype, c.m, c.k, panel.data());
          for (int64_t j = 0; j < c.m; ++j) {
            quant::dequantize_row(dtype, w.data() + dtype_bytes(dtype, size_t(c.k)) * size_t(j),
                                  c.k, ref.data());
            float big = 0;
            for (float v : ref) big = std::max(big, std::fabs(v));
            for (int64_t p = 0; p < c.k; ++p)
              ASSERT_TRUE(std::fabs(panel[size_t(j * c.k + p)] - ref[size_t(p)]) <=
                          big * std::ldexp(1.0f, -22))
                  << "dequantized row " << j << " element " << p;
          }
        });
      }
    }
  }
}

// Activation quantization: |x - d * q| <= d / 2, |q| <= 127, sums consistent.
TEST(QuantMatmul, ActivationBlocksRepresentTheirRow) {
  auto x = random_values(512, 3, 2.0f);
  // Ties: block 1 (elements 32..63) holds 127 (so 127 / max|x| = 1 in its 32-block and in the
  // 256-block around it) and halves, which round to even (2.5 -> 2, -3.5 -> -4).
  x[32] = 127.0f;
  for (int i = 1; i < 32; ++i) x[size_t(32 + i)] = float(i % 8) - 3.5f;
  for (const DType dtype : {DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    std::vector<uint8_t> acts(size_t(cpu::activation_row_bytes(dtype, 512)));
    cpu::quantize_activation_row(dtype, x.data(), 512, acts.data());
    for (int64_t p = 0; p < 512; ++p) {
      float d;
      int q;
      if (cpu::uses_q8k_activations(dtype)) {
        const auto& blk = reinterpret_cast<const cpu::ActBlockQ8K*>(acts.data())[p / 256];
        d = blk.d;
        q = blk.qs[p % 256];
        if (p % 16 == 0) {
          int s = 0;
          for (int i = 0; i < 16; ++i) s += blk.qs[p % 256 + i];
          ASSERT_EQ(blk.bsums[(p % 256) / 16], s);
        }
      } else {
        cpu::activation_element(dtype, acts.data(), p, d, q);
        if (dtype == DType::Q4_0 && p % 32 == 0) {  // the -8 offset of the block's sum
          const auto& grp = reinterpret_cast<const cpu::ActGroupQ4_0*>(acts.data())[p / 128];
          int s = 0;
          for (int i = 0; i < 32; ++i) {
            float di;
            int qi;
            cpu::activation_element(dtype, acts.data(), p + i, di, qi);
            s += qi;
          }
          ASSERT_EQ(grp.offset[4 * ((p % 128) / 32)], -8 * s);
        }
      }
      ASSERT_GT(d, 0.0f);
      ASSERT_LE(std::abs(q), 127);
      // Exactly the documented rounding: round-half-even(x * 127 / max|x|) of the element's block.
      {
        const int64_t block = cpu::uses_q8k_activations(dtype) ? 256 : 32;
        float amax = 0;
        for (int64_t i = p / block * block; i < (p / block + 1) * block; ++i)
          amax = std::max(amax, std::fabs(x[size_t(i)]));
        ASSERT_EQ(q, int(std::nearbyint(x[size_t(p)] * (127.0f / amax)))) << p;
      }
      ASSERT_LE(std::fabs(x[size_t(p)] - d * float(q)), d * 0.5f * 1.0001f) << p;
    }
  }
}

// The op through the backend, both paths: below kQuantPrefillRows the integer kernels (checked
// against dequantized weights x quantized activations as above), from it on the prefill path: the
// int8 GEMM where the CPU has AVX512-VNNI (against dequantized weights x the activations quantized
// by the scalar model of the GEMM's quantization), else dequantized panels x f32 activations
// (against dequantized weights x the f32 inputs in double: f32 sums of 512 products in another
// order stay within 1e-5 of sum |w * x|).
TEST(QuantMatmul, BackendMatmulAndEmbeddingOnQuantizedWeights) {
  for (const int threads : {1, 2}) {
    auto backend = make_cpu_backend(threads);
    for (const DType dtype : kQuantTypes) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " threads=" << threads);
      const int64_t k = 512, m = 70;
      for (const int64_t n : {int64_t{1}, int64_t{3}, cpu::kQuantPrefillRows - 1,
                              cpu::kQuantPrefillRows, int64_t{37}}) {
        SCOPED_TRACE(testing::Message() << "n=" << n);
        auto wbytes = make_weight(dtype, m, k, false, 11);
        Tensor w("w", dtype, {m, k}, Device::CPU, wbytes.data(), nullptr);
        ASSERT_TRUE(backend->supports(Op::Matmul, {dtype}));
        ASSERT_TRUE(backend->supports(Op::Embedding, {dtype}));
        ASSERT_FALSE(backend->supports(Op::RmsNorm, {dtype}));
        const auto xv = random_values(size_t(n * k), 5);
        Tensor x = backend->alloc("x", DType::F32, {n, k});
        std::memcpy(x.data(), xv.data(), xv.size() * 4);
        Tensor out = backend->alloc("out", DType::F32, {n, m});
        backend->matmul(x, w, out);
        std::vector<double> want, bound;
        if (n < cpu::kQuantPrefillRows) {
          const int64_t act_bytes = cpu::activation_row_bytes(dtype, k);
          std::vector<uint8_t> acts(size_t(n * act_bytes));
          for (int64_t i = 0; i < n; ++i)
            cpu::quantize_activation_row(dtype, xv.data() + i * k, k, acts.data() + i * act_bytes);
          reference(dtype, acts, n, k, wbytes, m, want, bound);
        } else if (cpu::has_int8_gemm()) {
          gemm_reference(dtype, xv, n, k, wbytes, m, want, bound);
        } else {
          reference_values(dtype, std::vector<double>(xv.begin(), xv.end()), n, k, wbytes, m, want,
                           bound);
        }
        for (size_t i = 0; i < want.size(); ++i)
          ASSERT_TRUE(std::fabs(out.data_as<float>()[i] - want[i]) <= bound[i])
              << i << ": " << out.data_as<float>()[i] << " vs " << want[i];
      }
      // Embedding: gathered rows dequantized exactly as the reference dequantizer does.
      auto table_bytes = make_weight(dtype, 9, k, true, 13);
      Tensor table("embed", dtype, {9, k}, Device::CPU, table_bytes.data(), nullptr);
      std::vector<int32_t> ids = {8, 0, 8, 3};
      Tensor id_tensor("ids", DType::I32, {4}, Device::CPU, ids.data(), nullptr);
      Tensor rows = backend->alloc("rows", DType::F32, {4, k});
      backend->embedding(table, id_tensor, rows);
      std::vector<float> want(static_cast<size_t>(k));
      for (size_t i = 0; i < ids.size(); ++i) {
        quant::dequantize_row(dtype, table_bytes.data() + dtype_bytes(dtype, size_t(k)) * ids[i], k,
                              want.data());
        ASSERT_EQ(0,
                  std::memcmp(want.data(), rows.data_as<float>() + i * size_t(k), size_t(k) * 4));
      }
    }
  }
}

// Odd shapes straight through the prefill paths, whatever n: 1 row, tails of the 8-row register
// tile and of the 16-row weight panel, one and two threads, quantized and raw-random blocks.
std::vector<Shape3> gemm_shapes_for(DType dtype) {
  if (dtype_block_size(dtype) == 32)
    return {{1, 32, 1},  {7, 96, 17},    {8, 64, 16},  {9, 160, 15},
            {3, 32, 70}, {16, 1024, 45}, {37, 288, 33}};
  return {{1, 256, 1}, {7, 512, 17}, {8, 256, 16}, {9, 768, 15}, {16, 256, 45}, {37, 512, 33}};
}

TEST(QuantMatmul, Int8GemmMatchesScalarReference) {
  if (!cpu::has_int8_gemm()) GTEST_SKIP() << "this CPU has no AVX512-VNNI";
  for (const int threads : {1, 2}) {
    cpu::ThreadPool pool(threads);
    for (const DType dtype : kQuantTypes) {
      for (const bool raw : {false, true}) {
        for (const Shape3 c : gemm_shapes_for(dtype)) {
          SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " threads=" << threads << " raw="
                                          << raw << " n=" << c.n << " k=" << c.k << " m=" << c.m);
          const auto w = make_weight(dtype, c.m, c.k, raw, uint32_t(c.n * 5 + c.m));
          const auto x = random_values(size_t(c.n * c.k), uint32_t(c.k + 3 * c.m), 2.0f);
          std::vector<double> want, bound;
          gemm_reference(dtype, x, c.n, c.k, w, c.m, want, bound);
          std::vector<float> out(size_t(c.n * c.m), NAN);
          cpu::matmul_quantized_int8_gemm(pool, x.data(), c.n, c.k, w.data(), dtype, c.m,
                                          out.data());
          for (size_t i = 0; i < out.size(); ++i)
            ASSERT_TRUE(std::fabs(out[i] - want[i]) <= bound[i])
                << "out[" << i / size_t(c.m) << ", " << i % size_t(c.m) << "] = " << out[i]
                << ", want " << want[i];
        }
      }
    }
  }
}

// The prefill path of CPUs without AVX512-VNNI, on every SIMD target this CPU runs.
TEST(QuantMatmul, F32PanelPrefillMatchesReferenceOnEverySimdTarget) {
  cpu::ThreadPool pool(2);
  for (const DType dtype : kQuantTypes) {
    for (const Shape3 c : gemm_shapes_for(dtype)) {
      SCOPED_TRACE(testing::Message()
                   << dtype_name(dtype) << " n=" << c.n << " k=" << c.k << " m=" << c.m);
      const auto w = make_weight(dtype, c.m, c.k, false, uint32_t(c.n * 5 + c.m));
      const auto x = random_values(size_t(c.n * c.k), uint32_t(c.k + 3 * c.m));
      std::vector<double> want, bound;
      reference_values(dtype, std::vector<double>(x.begin(), x.end()), c.n, c.k, w, c.m, want,
                       bound);
      for_each_simd_target([&] {
        std::vector<float> out(size_t(c.n * c.m), NAN);
        cpu::matmul_quantized_f32_panels(pool, x.data(), c.n, c.k, w.data(), dtype, c.m,
                                         out.data());
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_TRUE(std::fabs(out[i] - want[i]) <= bound[i])
              << "out[" << i / size_t(c.m) << ", " << i % size_t(c.m) << "] = " << out[i]
              << ", want " << want[i];
      });
    }
  }
}

const DType kRowGroupTypes[] = {DType::Q4_0, DType::Q4_K};

// Where byte i of row j's file bytes lives in a row-group matrix, written out from the layout
// comment of weight_rowgroups.h (independently of weight_rowgroups.cpp).
size_t rowgroup_offset(DType dtype, int64_t k, int64_t j, int64_t i) {
  const int64_t row_bytes = int64_t(dtype_bytes(dtype, size_t(k))), r = j % 4;
  const int64_t group = (j / 4) * 4 * row_bytes;
  if (dtype == DType::Q4_0) {
    const int64_t blk = i / 18, byte = i % 18, unit = group + (blk / 8) * 576, b = blk % 8;
    return size_t(byte < 2 ? unit + 2 * (4 * b + r) + byte
                           : unit + 64 + 64 * b + 16 * r + byte - 2);
  }
  const int64_t unit = group + (i / 144) * 576, byte = i % 144;
  if (byte < 2) return size_t(unit + 2 * r + byte);
  if (byte < 4) return size_t(unit + 8 + 2 * r + byte - 2);
  if (byte < 16) return size_t(unit + 16 + 16 * ((byte - 4) / 4) + 4 * r + (byte - 4) % 4);
  const int64_t q = byte - 16, c = q / 32, t = (q % 32) / 16;
  return size_t(unit + 64 + 128 * c + 64 * t + 16 * r + q % 16);
}

// The row-group layouts (weight_rowgroups.h): bytes where the header comment says, and every row
// restored bit for bit (raw random blocks: every nibble, scale and min pattern).
TEST(QuantMatmul, RowGroupsLayoutAndRoundTrip) {
  for (const DType dtype : kRowGroupTypes) {
    SCOPED_TRACE(dtype_name(dtype));
    const int64_t m = 12, k = 768;
    const size_t row_bytes = dtype_bytes(dtype, size_t(k));
    const auto w = make_weight(dtype, m, k, true, 21);
    ASSERT_TRUE(cpu::rowgroups_fit(dtype, m, k));
    EXPECT_FALSE(cpu::rowgroups_fit(dtype, m + 2, k));
    EXPECT_FALSE(cpu::rowgroups_fit(DType::Q8_0, m, k));
    if (dtype == DType::Q4_0) EXPECT_FALSE(cpu::rowgroups_fit(dtype, m, k + 32));
    std::vector<uint8_t> packed(w.size());
    cpu::to_rowgroups(dtype, w.data(), m, k, packed.data());
    for (int64_t j = 0; j < m; ++j) {
      for (size_t i = 0; i < row_bytes; ++i)
        ASSERT_EQ(packed[rowgroup_offset(dtype, k, j, int64_t(i))], w[size_t(j) * row_bytes + i])
            << "row " << j << " byte " << i;
      std::vector<uint8_t> row(row_bytes);
      cpu::rowgroups_row(dtype, packed.data(), k, j, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), w.data() + size_t(j) * row_bytes, row_bytes)) << j;
    }
  }
}

// The row-group GEMVs on every SIMD target (512-bit VNNI on AVX3_DL; restored rows through the
// plain kernel elsewhere) against the reference on the original rows, as the kernels above.
TEST(QuantMatmul, RowGroupKernelsMatchReferenceOnEverySimdTarget) {
  const Shape3 cases[] = {{1, 256, 4},  {1, 1024, 36}, {2, 512, 8}, {3, 768, 20},
                          {4, 256, 12}, {5, 512, 16},  {9, 256, 8}, {15, 1024, 4}};
  for (const DType dtype : kRowGroupTypes) {
    for (const bool raw : {false, true}) {
      for (const Shape3 c : cases) {
        SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " raw=" << raw << " n=" << c.n
                                        << " k=" << c.k << " m=" << c.m);
        const auto w = make_weight(dtype, c.m, c.k, raw, uint32_t(c.n * 3 + c.m));
        std::vector<uint8_t> packed(w.size());
        cpu::to_rowgroups(dtype, w.data(), c.m, c.k, packed.data());
        const auto x = random_values(size_t(c.n * c.k), uint32_t(c.k + c.m + 1));
        const int64_t act_bytes = cpu::activation_row_bytes(dtype, c.k);
        std::vector<uint8_t> acts(size_t(c.n * act_bytes));
        for (int64_t i = 0; i < c.n; ++i)
          cpu::quantize_activation_row(dtype, x.data() + i * c.k, c.k, acts.data() + i * act_bytes);
        std::vector<double> want, bound;
        reference(dtype, acts, c.n, c.k, w, c.m, want, bound);
        for_each_simd_target([&] {
          const int64_t ldo = c.m + 3, j_begin = c.m > 4 ? 4 : 0;
          std::vector<float> out(size_t(c.n * ldo), NAN);
          cpu::matmul_rows_rowgroups(dtype, acts.data(), c.n, c.k, packed.data(), j_begin, c.m,
                                     out.data(), ldo);
          for (int64_t i = 0; i < c.n; ++i) {
            for (int64_t j = 0; j < ldo; ++j) {
              const float got = out[size_t(i * ldo + j)];
              if (j < j_begin || j >= c.m) {
                ASSERT_TRUE(std::isnan(got)) << "row " << j << " written outside its range";
                continue;
              }
              const double e = want[size_t(i * c.m + j)];
              ASSERT_TRUE(std::fabs(got - e) <= bound[size_t(i * c.m + j)])
                  << "out[" << i << ", " << j << "] = " << got << ", want " << e;
            }
          }
          // A group's result does not depend on the groups sharing its call, bit for bit.
          for (int64_t j = j_begin; j < c.m; j += 4) {
            std::vector<float> one(size_t(c.n * ldo), NAN);
            cpu::matmul_rows_rowgroups(dtype, acts.data(), c.n, c.k, packed.data(), j, j + 4,
                                       one.data(), ldo);
            for (int64_t i = 0; i < c.n; ++i)
              ASSERT_EQ(0, std::memcmp(&one[size_t(i * ldo + j)], &out[size_t(i * ldo + j)], 16))
                  << "group at row " << j << " alone differs";
          }
        });
      }
    }
  }
}

// Through the backend: prepare_weight repacks Q4_0 / Q4_K weights where the 512-bit kernels
// exist; matmul (decode kernels, int8 GEMM or f32 panels) and embedding read the repacked bytes
// right; a view into a repacked weight is refused instead of misread.
// INFERA_CPU_REPACK for the backends made in a scope (read by the backend's constructor).
struct RepackEnv {
  explicit RepackEnv(const char* value) {
    if (value) {
      setenv("INFERA_CPU_REPACK", value, 1);
    } else {
      unsetenv("INFERA_CPU_REPACK");
    }
  }
  ~RepackEnv() { unsetenv("INFERA_CPU_REPACK"); }
};

TEST(QuantMatmul, PreparedRowGroupWeightsGiveTheSameResults) {
  const int64_t k = 512, m = 72;
  for (const DType dtype : kRowGroupTypes) {
    auto wbytes = make_weight(dtype, m, k, false, 17);
    Tensor host("w", dtype, {m, k}, Device::CPU, wbytes.data(), nullptr);
    for (const int threads : {1, 2}) {
      for (const char* env : {static_cast<const char*>(nullptr), "all", "0"}) {
        RepackEnv scoped(env);
        auto backend = make_cpu_backend(threads);
        const Tensor w = backend->prepare_weight(host);
        ASSERT_EQ(w.shape(), host.shape());
        ASSERT_EQ(w.dtype(), dtype);
        // Repacked exactly where the kernel runs natively and the setting asks for it (by default
        // Q4_0 only): with "all" on a native CPU both layouts meet the checks below.
        const bool repacked = w.data() != host.data();
        const bool asked = env ? std::string(env) == "all" : dtype == DType::Q4_0;
        EXPECT_EQ(repacked, cpu::rowgroups_native(dtype) && asked)
            << dtype_name(dtype) << " INFERA_CPU_REPACK=" << (env ? env : "(unset)");
        for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{15}, int64_t{16}, int64_t{37}}) {
          SCOPED_TRACE(testing::Message()
                       << dtype_name(dtype) << " threads=" << threads << " n=" << n);
          const auto xv = random_values(size_t(n * k), 9);
          Tensor x = backend->alloc("x", DType::F32, {n, k});
          std::memcpy(x.data(), xv.data(), xv.size() * 4);
          Tensor out = backend->alloc("out", DType::F32, {n, m});
          backend->matmul(x, w, out);
          std::vector<double> want, bound;
          if (n < cpu::kQuantPrefillRows) {
            const int64_t act_bytes = cpu::activation_row_bytes(dtype, k);
            std::vector<uint8_t> acts(size_t(n * act_bytes));
            for (int64_t i = 0; i < n; ++i)
              cpu::quantize_activation_row(dtype, xv.data() + i * k, k,
                                           acts.data() + i * act_bytes);
            reference(dtype, acts, n, k, wbytes, m, want, bound);
          } else if (cpu::has_int8_gemm()) {
            gemm_reference(dtype, xv, n, k, wbytes, m, want, bound);
          } else {
            reference_values(dtype, std::vector<double>(xv.begin(), xv.end()), n, k, wbytes, m,
                             want, bound);
          }
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_TRUE(std::fabs(out.data_as<float>()[i] - want[i]) <= bound[i])
                << i << ": " << out.data_as<float>()[i] << " vs " << want[i];
          if (n >= cpu::kQuantPrefillRows) {  // the non-VNNI prefill path on the same layout
            cpu::ThreadPool pool(threads);
            std::vector<float> panel_out(size_t(n * m), NAN);
            cpu::matmul_quantized_f32_panels(
                pool, xv.data(), n, k, w.data(), dtype, m, panel_out.data(),
                repacked ? cpu::WeightLayout::RowGroups : cpu::WeightLayout::Rows);
            reference_values(dtype, std::vector<double>(xv.begin(), xv.end()), n, k, wbytes, m,
                             want, bound);
            for (size_t i = 0; i < want.size(); ++i)
              ASSERT_TRUE(std::fabs(panel_out[i] - want[i]) <= bound[i]) << "f32 panels " << i;
          }
        }
        std::vector<int32_t> ids = {71, 0, 5, 71};
        Tensor id_tensor("ids", DType::I32, {4}, Device::CPU, ids.data(), nullptr);
        Tensor rows = backend->alloc("rows", DType::F32, {4, k});
        backend->embedding(w, id_tensor, rows);
        std::vector<float> want(static_cast<size_t>(k));
        for (size_t i = 0; i < ids.size(); ++i) {
          quant::dequantize_row(dtype,
                                wbytes.data() + dtype_bytes(dtype, size_t(k)) * size_t(ids[i]), k,
                                want.data());
          ASSERT_EQ(0,
                    std::memcmp(want.data(), rows.data_as<float>() + i * size_t(k), size_t(k) * 4));
        }
        if (repacked) {
          Tensor x = backend->alloc("x", DType::F32, {1, k});
          Tensor out = backend->alloc("out", DType::F32, {1, 8});
          EXPECT_THROW(backend->matmul(x, w.rows(4, 8), out), InvalidArgument);
        }
      }
    }
  }
}

TEST(QuantMatmul, RowsThatAreNotWholeBlocksAreRejected) {
  auto backend = make_cpu_backend(1);
  std::vector<uint8_t> bytes(4096);
  Tensor w("w", DType::Q4_K, {2, 128}, Device::CPU, bytes.data(), nullptr);
  Tensor x = backend->alloc("x", DType::F32, {1, 128});
  Tensor out = backend->alloc("out", DType::F32, {1, 2});
  EXPECT_THROW(backend->matmul(x, w, out), InvalidArgument);
  Tensor table("t", DType::Q8_0, {2, 48}, Device::CPU, bytes.data(), nullptr);
  Tensor rows = backend->alloc("rows", DType::F32, {1, 48});
  std::vector<int32_t> ids = {1};
  Tensor id_tensor("ids", DType::I32, {1}, Device::CPU, ids.data(), nullptr);
  EXPECT_THROW(backend->embedding(table, id_tensor, rows), InvalidArgument);
}

}  // namespace
}  // namespace infera
