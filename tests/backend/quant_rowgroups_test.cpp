// The row-group layouts of weight_rowgroups.h (Q4_0, Q4_K, Q6_K, Q8_0) and their kernels against
// the reference of quant_matmul_util.h, directly and through the CPU backend (prepare_weight,
// decode, prefill, embedding); and the fused decode matmuls (matmul_multi, matmul_swiglu) that
// quantize their shared input once.
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
#include "quant_matmul_util.h"

namespace infera {
namespace {

using namespace test;  // NOLINT(build/namespaces): the shared helpers

const DType kRowGroupTypes[] = {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q8_0};

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
  if (dtype == DType::Q8_0) {  // d, qs[32] in the file; 8 blocks of 4 rows per 1088-byte unit
    const int64_t blk = i / 34, byte = i % 34, unit = group + (blk / 8) * 1088, b = blk % 8;
    if (byte < 2) return size_t(unit + 2 * (4 * b + r) + byte);
    const int64_t q = byte - 2;  // qs[q]: the first 16 in line 2b, the last 16 in line 2b + 1
    return size_t(unit + 64 + 128 * b + 64 * (q / 16) + 16 * r + q % 16);
  }
  if (dtype == DType::Q6_K) {  // ql[128], qh[64], scales[16], d in the file
    const int64_t unit = group + (i / 210) * 840, byte = i % 210;
    if (byte >= 208) return size_t(unit + 64 + 2 * r + byte - 208);  // d
    if (byte >= 192) return size_t(unit + 16 * r + byte - 192);      // scales
    const int64_t quants = unit + 72;
    if (byte >= 128) {  // qh byte 32h + 16t + l
      const int64_t q = byte - 128, h = q / 32, t = (q % 32) / 16;
      return size_t(quants + 192 * (2 * h + t) + 128 + 16 * r + q % 16);
    }
    // ql byte 64h + 32c + 16t + l: line c of s = 2h + t
    const int64_t h = byte / 64, c = (byte % 64) / 32, t = (byte % 32) / 16;
    return size_t(quants + 192 * (2 * h + t) + 64 * c + 16 * r + byte % 16);
  }
  const int64_t unit = group + (i / 144) * 576, byte = i % 144;
  if (byte < 2) return size_t(unit + 2 * r + byte);
  if (byte < 4) return size_t(unit + 8 + 2 * r + byte - 2);
  if (byte < 16) return size_t(unit + 16 + 16 * ((byte - 4) / 4) + 4 * r + (byte - 4) % 4);
  const int64_t q = byte - 16, l = q / 32, line = (q % 32) / 4;  // qs byte 32l + 4 line + t
  return size_t(unit + 64 + 64 * line + 16 * r + 4 * l + q % 4);
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
    EXPECT_FALSE(cpu::rowgroups_fit(DType::BF16, m, k));
    if (dtype == DType::Q4_0 || dtype == DType::Q8_0)
      EXPECT_FALSE(cpu::rowgroups_fit(dtype, m, k + 32));
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

// The software prefetch distance of the row-group GEMVs (INFERA_CPU_ROWGROUP_PREFETCH) moves
// only loads ahead: every output is bit for bit the same with none, one line or 1 KiB ahead, on
// single-row decode (the lockstep streams) and on batched rows; bad distances are refused.
TEST(QuantMatmul, RowGroupPrefetchDistanceChangesNoBit) {
  const int64_t before = cpu::rowgroup_prefetch_bytes();
  EXPECT_THROW(cpu::set_rowgroup_prefetch_bytes(65), InvalidArgument);
  EXPECT_THROW(cpu::set_rowgroup_prefetch_bytes(-64), InvalidArgument);
  EXPECT_THROW(cpu::set_rowgroup_prefetch_bytes(65536 + 64), InvalidArgument);
  EXPECT_EQ(cpu::rowgroup_prefetch_bytes(), before);
  for (const DType dtype : kRowGroupTypes) {
    for (const int64_t n : {int64_t{1}, int64_t{3}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(dtype) << " n=" << n);
      const int64_t k = 512, m = 40;
      const auto w = make_weight(dtype, m, k, true, 5);
      std::vector<uint8_t> packed(w.size());
      cpu::to_rowgroups(dtype, w.data(), m, k, packed.data());
      const auto x = random_values(size_t(n * k), 6);
      const int64_t act_bytes = cpu::activation_row_bytes(dtype, k);
      std::vector<uint8_t> acts(size_t(n * act_bytes));
      for (int64_t i = 0; i < n; ++i)
        cpu::quantize_activation_row(dtype, x.data() + i * k, k, acts.data() + i * act_bytes);
      std::vector<float> first;
      for (const int64_t ahead : {int64_t{0}, int64_t{64}, int64_t{1024}}) {
        cpu::set_rowgroup_prefetch_bytes(ahead);
        std::vector<float> out(size_t(n * m), NAN);
        cpu::matmul_rows_rowgroups(dtype, acts.data(), n, k, packed.data(), 0, m, out.data(), m);
        if (first.empty()) {
          first = out;
          for (const float v : out) ASSERT_TRUE(std::isfinite(v));
        } else {
          ASSERT_EQ(0, std::memcmp(first.data(), out.data(), out.size() * 4)) << ahead;
        }
      }
    }
  }
  cpu::set_rowgroup_prefetch_bytes(before);
}

// Through the backend: prepare_weight repacks Q4_0 / Q4_K / Q6_K weights where the 512-bit kernels
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
      for (const char* env : {static_cast<const char*>(nullptr), "all", "0", "Q4_K,q6_k"}) {
        RepackEnv scoped(env);
        auto backend = make_cpu_backend(threads);
        const Tensor w = backend->prepare_weight(host);
        ASSERT_EQ(w.shape(), host.shape());
        ASSERT_EQ(w.dtype(), dtype);
        // Repacked exactly where the kernel runs natively and the setting asks for it (by default
        // every row-group type): on a native CPU both layouts of every type meet the checks below.
        const bool repacked = w.data() != host.data();
        const std::string e = env ? env : "";
        const bool asked = !env                     ? true
                           : e == "all" || e == "0" ? e == "all"
                                                    : dtype == DType::Q4_K || dtype == DType::Q6_K;
        EXPECT_EQ(repacked, cpu::rowgroups_native(dtype) && asked)
            << dtype_name(dtype) << " INFERA_CPU_REPACK=" << (env ? env : "(unset)");
        for (const int64_t n : {int64_t{1}, int64_t{3}, int64_t{15}, int64_t{16}, int64_t{37}}) {
          SCOPED_TRACE(testing::Message()
                       << dtype_name(dtype) << " threads=" << threads << " n=" << n);
          const auto xv = random_values(size_t(n * k), 9);
          ASSERT_NO_FATAL_FAILURE(
              expect_backend_matmul_within_reference(*backend, w, wbytes, xv, n));
          if (n >= cpu::kQuantPrefillRows) {  // the non-VNNI prefill path on the same layout
            cpu::ThreadPool pool(threads);
            std::vector<float> panel_out(size_t(n * m), NAN);
            std::vector<double> want, bound;
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

// matmul_multi / matmul_swiglu at decode sizes (cpu::matmul_quantized_multi): x quantized once per
// activation format and shared by weights of different types (Q4_K and Q6_K read the same Q8K
// blocks), every weight's rows split over the threads in one section. Each output is within
// the kernels' bound of the reference (activations quantized whole by quantize_activation_row)
// and bit for bit the plain matmul of its weight; gate = silu(gate) * up exactly as the swiglu op.
// Four [rows[i], k] weights of types[i] (file bytes seeded seed + i) and the backend's prepared
// tensors over them; `bytes` must outlive the tensors.
std::vector<Tensor> prepared_weights(Backend& backend, const DType (&types)[4],
                                     const int64_t (&rows)[4], int64_t k, uint32_t seed,
                                     std::vector<std::vector<uint8_t>>& bytes) {
  bytes.assign(4, {});
  std::vector<Tensor> ws;
  for (size_t i = 0; i < 4; ++i) {
    bytes[i] = make_weight(types[i], rows[i], k, false, uint32_t(seed + i));
    ws.push_back(backend.prepare_weight(Tensor("w" + std::to_string(i), types[i], {rows[i], k},
                                               Device::CPU, bytes[i].data(), nullptr)));
  }
  return ws;
}

// x [n, k] (seeded) and one matmul() output per weight, as a fused call's references.
struct SeparateMatmuls {
  std::vector<float> xv;
  Tensor x;
  std::vector<Tensor> outs, sep;
};
SeparateMatmuls separate_matmuls(Backend& backend, const std::vector<Tensor>& ws,
                                 const int64_t (&rows)[4], int64_t n, int64_t k, uint32_t seed) {
  SeparateMatmuls s;
  s.xv = random_values(size_t(n * k), seed);
  s.x = backend.alloc("x", DType::F32, {n, k});
  std::memcpy(s.x.data(), s.xv.data(), s.xv.size() * 4);
  for (size_t i = 0; i < 4; ++i) {
    s.outs.push_back(backend.alloc("out", DType::F32, {n, rows[i]}));
    s.sep.push_back(backend.alloc("sep", DType::F32, {n, rows[i]}));
    backend.matmul(s.x, ws[i], s.sep[i]);
  }
  return s;
}

TEST(QuantMatmul, FusedDecodeMatmulsShareOneQuantizedInput) {
  const int64_t k = 768;  // 3 super-blocks, 6 Q4_0 groups: uneven shares over 2 threads
  const DType types[] = {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q8_0};
  const int64_t rows[] = {40, 40, 36, 20};
  for (const int threads : {1, 2}) {
    for (const char* env : {static_cast<const char*>(nullptr), "all"}) {
      RepackEnv scoped(env);
      auto backend = make_cpu_backend(threads);
      std::vector<std::vector<uint8_t>> bytes;
      const std::vector<Tensor> ws = prepared_weights(*backend, types, rows, k, 31, bytes);
      for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}, cpu::kQuantPrefillRows - 1}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads << " INFERA_CPU_REPACK="
                                        << (env ? env : "(unset)") << " n=" << n);
        auto [xv, x, outs, sep] = separate_matmuls(*backend, ws, rows, n, k, uint32_t(7 + n));
        const Tensor* wp[] = {&ws[0], &ws[1], &ws[2], &ws[3]};
        Tensor* op[] = {&outs[0], &outs[1], &outs[2], &outs[3]};
        backend->matmul_multi(x, wp, op);
        for (size_t i = 0; i < 4; ++i) {
          SCOPED_TRACE(dtype_name(types[i]));
          const int64_t act_bytes = cpu::activation_row_bytes(types[i], k);
          std::vector<uint8_t> acts(size_t(n * act_bytes));
          for (int64_t r = 0; r < n; ++r)
            cpu::quantize_activation_row(types[i], xv.data() + r * k, k,
                                         acts.data() + r * act_bytes);
          std::vector<double> want, bound;
          reference(types[i], acts, n, k, bytes[i], rows[i], want, bound);
          const float* got = outs[i].data_as<float>();
          for (size_t e = 0; e < want.size(); ++e)
            ASSERT_TRUE(std::fabs(got[e] - want[e]) <= bound[e])
                << e << ": " << got[e] << " vs " << want[e];
          ASSERT_EQ(0, std::memcmp(got, sep[i].data(), want.size() * 4)) << "multi vs matmul";
        }
        Tensor gate = backend->alloc("gate", DType::F32, {n, rows[0]});
        Tensor up = backend->alloc("up", DType::F32, {n, rows[0]});
        backend->matmul_swiglu(x, ws[0], ws[1], gate, up);
        // The fused gate is the swiglu op's on the separate matmuls' outputs, bit for bit (the op
        // itself is held to a scalar silu in op_cases_test), and within f32 rounding of the
        // scalar formula here.
        Tensor want_gate = backend->alloc("want_gate", DType::F32, {n, rows[0]});
        backend->swiglu(sep[0], sep[1], want_gate);
        for (int64_t e = 0; e < n * rows[0]; ++e) {
          const float g = sep[0].data_as<float>()[e], u = sep[1].data_as<float>()[e];
          const float want = want_gate.data_as<float>()[e], got = gate.data_as<float>()[e];
          ASSERT_EQ(0, std::memcmp(&want, &got, 4))
              << "swiglu " << e << ": " << got << " vs " << want;
          const double scalar = g / (1.0 + std::exp(-double(g))) * u;
          ASSERT_TRUE(std::fabs(got - scalar) <= 1e-6 * std::fabs(scalar) + 1e-30)
              << "swiglu " << e << ": " << got << " vs " << scalar;
        }
      }
    }
  }
}

// Prefill sizes: matmul_multi and matmul_swiglu quantize x once for all the weights of a format
// (the int8 GEMM), the same bits as one matmul each (and the swiglu op on them); two Q4_K weights
// share an input, the Q6_K and Q8_0 ones take their own.
TEST(QuantMatmul, FusedPrefillMatmulsEqualSeparateOnes) {
  const int64_t k = 768;
  const DType types[] = {DType::Q4_K, DType::Q6_K, DType::Q4_K, DType::Q8_0};
  const int64_t rows[] = {40, 36, 40, 20};
  for (const int threads : {1, 2}) {
    for (const char* env : {static_cast<const char*>(nullptr), "0"}) {
      RepackEnv scoped(env);
      auto backend = make_cpu_backend(threads);
      std::vector<std::vector<uint8_t>> bytes;
      const std::vector<Tensor> ws = prepared_weights(*backend, types, rows, k, 41, bytes);
      for (const int64_t n : {cpu::kQuantPrefillRows, int64_t{37}}) {
        SCOPED_TRACE(testing::Message() << "threads=" << threads << " INFERA_CPU_REPACK="
                                        << (env ? env : "(unset)") << " n=" << n);
        auto [xv, x, outs, sep] = separate_matmuls(*backend, ws, rows, n, k, uint32_t(9 + n));
        const Tensor* wp[] = {&ws[0], &ws[1], &ws[2], &ws[3]};
        Tensor* op[] = {&outs[0], &outs[1], &outs[2], &outs[3]};
        backend->matmul_multi(x, wp, op);
        for (size_t i = 0; i < 4; ++i) {
          // Equal bits would also hold for two NaNs: the values must be numbers as well.
          for (int64_t e = 0; e < n * rows[i]; ++e)
            ASSERT_TRUE(std::isfinite(outs[i].data_as<float>()[e])) << "weight " << i << " " << e;
          ASSERT_EQ(0, std::memcmp(outs[i].data(), sep[i].data(), size_t(n * rows[i]) * 4))
              << "multi vs matmul, weight " << i;
        }
        Tensor gate = backend->alloc("gate", DType::F32, {n, rows[0]});
        Tensor up = backend->alloc("up", DType::F32, {n, rows[2]});
        backend->matmul_swiglu(x, ws[0], ws[2], gate, up);
        Tensor want_gate = backend->alloc("want_gate", DType::F32, {n, rows[0]});
        backend->swiglu(sep[0], sep[2], want_gate);
        for (int64_t e = 0; e < n * rows[0]; ++e)
          ASSERT_TRUE(std::isfinite(gate.data_as<float>()[e])) << "gate " << e;
        ASSERT_EQ(0, std::memcmp(gate.data(), want_gate.data(), size_t(n * rows[0]) * 4));
        ASSERT_EQ(0, std::memcmp(up.data(), sep[2].data(), size_t(n * rows[2]) * 4));
      }
    }
  }
}

}  // namespace
}  // namespace infera
