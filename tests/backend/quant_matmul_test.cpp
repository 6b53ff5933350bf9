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
#include "quant_matmul_util.h"

namespace infera {
namespace {

using namespace test;  // NOLINT(build/namespaces): the shared helpers

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

// Activation quantization, on every SIMD target (its groups are vector code): |x - d * q| <= d / 2,
// |q| <= 127, exactly the documented rounding and scale, sums consistent.
TEST(QuantMatmul, ActivationBlocksRepresentTheirRow) {
  auto x = random_values(512, 3, 2.0f);
  // Ties: block 1 (elements 32..63) holds 127 (so 127 / max|x| = 1 in its 32-block and in the
  // 256-block around it) and halves, which round to even (2.5 -> 2, -3.5 -> -4).
  x[32] = 127.0f;
  for (int i = 1; i < 32; ++i) x[size_t(32 + i)] = float(i % 8) - 3.5f;
  x[300] = -40.0f;  // a negative maximum
  for_each_simd_target([&] {
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
          if (dtype == DType::Q8_0 && p % 32 == 0) {  // lane l's -128 x its 8 bytes' sum
            const auto& blk = reinterpret_cast<const cpu::ActBlockQ8*>(acts.data())[p / 32];
            for (int l = 0; l < 4; ++l) {
              int s = 0;
              for (int i = 0; i < 4; ++i) s += blk.qs[4 * l + i] + blk.qs[16 + 4 * l + i];
              ASSERT_EQ(blk.offset[l], -128 * s) << p;
              ASSERT_EQ(blk.offset[l + 4], -128 * s) << p;
            }
          }
        }
        ASSERT_GT(d, 0.0f);
        ASSERT_LE(std::abs(q), 127);
        // Exactly the documented rounding: round-half-even(x * 127 / max|x|) of the element's
        // block.
        {
          const int64_t block = cpu::uses_q8k_activations(dtype) ? 256 : 32;
          float amax = 0;
          for (int64_t i = p / block * block; i < (p / block + 1) * block; ++i)
            amax = std::max(amax, std::fabs(x[size_t(i)]));
          ASSERT_EQ(q, int(std::nearbyint(x[size_t(p)] * (127.0f / amax)))) << p;
          ASSERT_EQ(d, amax / 127.0f) << p;
        }
        ASSERT_LE(std::fabs(x[size_t(p)] - d * float(q)), d * 0.5f * 1.0001f) << p;
      }
    }
  });
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
        ASSERT_NO_FATAL_FAILURE(expect_backend_matmul_within_reference(*backend, w, wbytes, xv, n));
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

// Odd shapes straight through the prefill paths, whatever n: 1 row, tails of the 8-row (one
// panel), 6-row (two panels), 4-row (three) and 3-row (four) register tiles, of the 16-row weight
// panel and of the panel groups (panel counts that do not divide, and a thread's share), one and
// two threads, quantized and raw-random blocks.
std::vector<Shape3> gemm_shapes_for(DType dtype) {
  if (dtype_block_size(dtype) == 32)
    return {{1, 32, 1},     {7, 96, 17},   {8, 64, 16},  {9, 160, 15}, {3, 32, 70},
            {16, 1024, 45}, {37, 288, 33}, {11, 64, 48}, {5, 96, 64}};
  return {{1, 256, 1},   {7, 512, 17},  {8, 256, 16},  {9, 768, 15},
          {16, 256, 45}, {37, 512, 33}, {11, 256, 48}, {5, 512, 64}};
}

TEST(QuantMatmul, Int8GemmMatchesScalarReference) {
  if (!cpu::has_int8_gemm()) GTEST_SKIP() << "this CPU has no AVX512-VNNI";
  const int kDefaultPanels = cpu::int8_panels_per_tile();
  EXPECT_THROW(cpu::set_int8_panels_per_tile(0), InvalidArgument);
  EXPECT_THROW(cpu::set_int8_panels_per_tile(5), InvalidArgument);
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
          // Every tile width gives the reference's values and the same bits as one panel.
          std::vector<float> first;
          for (const int panels : {1, 2, 3, 4}) {
            SCOPED_TRACE(testing::Message() << "panels per tile " << panels);
            cpu::set_int8_panels_per_tile(panels);
            std::vector<float> out(size_t(c.n * c.m), NAN);
            cpu::matmul_quantized_int8_gemm(pool, x.data(), c.n, c.k, w.data(), dtype, c.m,
                                            out.data());
            for (size_t i = 0; i < out.size(); ++i)
              ASSERT_TRUE(std::fabs(out[i] - want[i]) <= bound[i])
                  << "out[" << i / size_t(c.m) << ", " << i % size_t(c.m) << "] = " << out[i]
                  << ", want " << want[i];
            if (first.empty()) first = out;
            ASSERT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * sizeof(float)));
          }
          cpu::set_int8_panels_per_tile(kDefaultPanels);
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
