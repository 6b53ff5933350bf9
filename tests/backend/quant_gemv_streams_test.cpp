// Single-row decode GEMVs reading S weight-row ranges in lockstep (quant_gemv_streams(),
// INFERA_CPU_GEMV_STREAMS; 0 = auto, each kernel's own count) against the reference of
// quant_matmul_util.h and, bit for bit, against the one-stream kernels (S = 1), on every SIMD
// target, for the file layout (Q8_0, Q4_0, Q4_K, Q6_K) and the row groups (Q4_0, Q4_K, Q6_K), and
// through the CPU backend on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
#include "infera/error.h"
#include "ops/backend.h"
#include "quant_matmul_util.h"

namespace infera {
namespace {

using namespace test;  // NOLINT(build/namespaces): the shared helpers

// Sets the stream count for one scope and restores the previous one.
class StreamsSetting {
 public:
  explicit StreamsSetting(int s) : saved_(cpu::quant_gemv_streams()) {
    cpu::set_quant_gemv_streams(s);
  }
  ~StreamsSetting() { cpu::set_quant_gemv_streams(saved_); }
  StreamsSetting(const StreamsSetting&) = delete;
  StreamsSetting& operator=(const StreamsSetting&) = delete;

 private:
  int saved_;
};

TEST(QuantMatmul, GemvStreamsSettingTakesOnlyKnownCounts) {
  StreamsSetting keep(cpu::quant_gemv_streams());
  for (const int bad : {3, 5, 16, -4})
    EXPECT_THROW(cpu::set_quant_gemv_streams(bad), InvalidArgument);
  for (const int good : {0, 1, 2, 4, 8}) {  // 0: auto, each kernel's own count
    cpu::set_quant_gemv_streams(good);
    EXPECT_EQ(cpu::quant_gemv_streams(), good);
  }
}

// Every row range below leaves rows over after cutting into 2, 4 and 8 equal ranges, and one is
// shorter than the stream count (all rows take the leftover path).
TEST(QuantMatmul, LockstepGemvStreamsMatchReferenceAndOneStreamBitForBit) {
  const int64_t k = 512, m = 4 * 37;  // 37 row groups
  struct Range {
    int64_t begin, end;
  };
  const Range ranges[] = {{0, m}, {4, m - 8}, {8, 12}, {0, 4 * 9}, {4 * 30, m}};
  for (const DType dtype : kQuantTypes) {
    for (const bool groups : {false, true}) {
      if (groups && !cpu::rowgroups_fit(dtype, m, k)) continue;
      for (const bool raw : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << dtype_name(dtype) << (groups ? " row groups" : " rows") << " raw=" << raw);
        const auto w = make_weight(dtype, m, k, raw, 31 + uint32_t(raw));
        std::vector<uint8_t> packed(w.size());
        if (groups) cpu::to_rowgroups(dtype, w.data(), m, k, packed.data());
        const auto x = random_values(size_t(k), 5);
        std::vector<uint8_t> acts(size_t(cpu::activation_row_bytes(dtype, k)));
        cpu::quantize_activation_row(dtype, x.data(), k, acts.data());
        std::vector<double> want, bound;
        reference(dtype, acts, 1, k, w, m, want, bound);
        for_each_simd_target([&] {
          for (const Range r : ranges) {
            // Rows layout: odd starts too (any row range is allowed there).
            for (const int64_t shift : {int64_t{0}, int64_t{groups ? 0 : 3}}) {
              const int64_t jb = r.begin + shift, je = r.end;
              SCOPED_TRACE(testing::Message() << "rows [" << jb << ", " << je << ")");
              const int64_t ldo = m + 3;
              std::vector<float> one;
              for (const int s : {1, 0, 2, 4, 8}) {  // 0: auto
                SCOPED_TRACE(testing::Message() << s << " streams");
                StreamsSetting scoped(s);
                std::vector<float> out(size_t(ldo), NAN);
                if (groups)
                  cpu::matmul_rows_rowgroups(dtype, acts.data(), 1, k, packed.data(), jb, je,
                                             out.data(), ldo);
                else
                  cpu::matmul_rows_quantized(acts.data(), 1, k, w.data(), dtype, jb, je, out.data(),
                                             ldo);
                for (int64_t j = 0; j < ldo; ++j) {
                  const float got = out[size_t(j)];
                  if (j < jb || j >= je) {
                    ASSERT_TRUE(std::isnan(got)) << "row " << j << " written outside its range";
                    continue;
                  }
                  ASSERT_TRUE(std::fabs(got - want[size_t(j)]) <= bound[size_t(j)])
                      << "out[" << j << "] = " << got << ", want " << want[size_t(j)];
                }
                if (s == 1) {
                  one = out;
                } else {
                  ASSERT_EQ(0, std::memcmp(out.data(), one.data(), out.size() * sizeof(float)))
                      << "differs from the one-stream kernel";
                }
              }
            }
          }
        });
      }
    }
  }
}

// The whole decode matmul through the CPU backend (prepare_weight: row groups where native; the
// rows split over the threads first, in fixed slices or in slices taken in turn
// (INFERA_CPU_DYNAMIC_ROWS), then each slice into streams): bit for bit the one-stream result at
// every stream count, thread count and split.
TEST(QuantMatmul, BackendDecodeMatmulIsTheSameWhateverTheStreams) {
  const int64_t k = 768, m = 4 * 45;
  struct Restore {
    bool saved = cpu::decode_dynamic_rows();
    ~Restore() { cpu::set_decode_dynamic_rows(saved); }
  } restore;
  for (const DType dtype : kQuantTypes) {
    auto wbytes = make_weight(dtype, m, k, false, 7);
    Tensor host("w", dtype, {m, k}, Device::CPU, wbytes.data(), nullptr);
    const auto xv = random_values(size_t(k), 13);
    std::vector<float> one;
    for (const int threads : {1, 2, 3})
      for (const bool dynamic : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << dtype_name(dtype) << " threads=" << threads << " dynamic rows=" << dynamic);
        cpu::set_decode_dynamic_rows(dynamic);
        auto backend = make_cpu_backend(threads);
        const Tensor w = backend->prepare_weight(host);
        Tensor x = backend->alloc("x", DType::F32, {1, k});
        std::memcpy(x.data_as<float>(), xv.data(), size_t(k) * sizeof(float));
        for (const int s : {1, 0, 2, 4, 8}) {  // 0: auto
          StreamsSetting scoped(s);
          Tensor out = backend->alloc("out", DType::F32, {1, m});
          backend->matmul(x, w, out);
          const float* o = out.data_as<float>();
          for (int64_t j = 0; j < m; ++j) ASSERT_FALSE(std::isnan(o[j])) << j;
          if (one.empty()) {  // 1 thread, fixed slices, 1 stream
            ASSERT_NO_FATAL_FAILURE(
                expect_backend_matmul_within_reference(*backend, w, wbytes, xv, 1));
            one.assign(o, o + m);
          } else {
            ASSERT_EQ(0, std::memcmp(o, one.data(), size_t(m) * sizeof(float)))
                << s << " streams differ from one thread, one stream";
          }
        }
      }
  }
}

// The Q6_K kernels' two unpacks of the 6-bit values (INFERA_CPU_Q6K_GFNI: vgf2p8affineqb, or the
// word shifts and masks): on every SIMD target, n = 1..5 activation rows (the lockstep streams and
// Row<NX> for every NX), raw random blocks (every qh bit pattern) and quantized ones: within the
// reference bound, and the GFNI form bit for bit the shift form (the same integers, same order).
TEST(QuantMatmul, Q6KGfniUnpackIsTheShiftUnpackBitForBit) {
  if (!cpu::cpu_has_gfni()) GTEST_SKIP() << "this CPU has no GFNI";
  const bool saved = cpu::q6_k_gfni_unpack();
  const DType dtype = DType::Q6_K;
  const int64_t k = 768, m = 4 * 9 + 3;
  for (const bool raw : {false, true}) {
    const auto w = make_weight(dtype, m, k, raw, 41 + uint32_t(raw));
    for (const int64_t n : {1, 2, 3, 4, 5}) {
      SCOPED_TRACE(testing::Message() << "raw=" << raw << " n=" << n);
      const auto x = random_values(size_t(n * k), 17 + uint32_t(n));
      const int64_t act_bytes = cpu::activation_row_bytes(dtype, k);
      std::vector<uint8_t> acts(size_t(n * act_bytes));
      for (int64_t i = 0; i < n; ++i)
        cpu::quantize_activation_row(dtype, x.data() + i * k, k, acts.data() + i * act_bytes);
      std::vector<double> want, bound;
      reference(dtype, acts, n, k, w, m, want, bound);
      for_each_simd_target([&] {
        std::vector<float> out[2];
        for (const bool gfni : {false, true}) {
          cpu::set_q6_k_gfni_unpack(gfni);
          std::vector<float>& o = out[gfni];
          o.assign(size_t(n * m), NAN);
          cpu::matmul_rows_quantized(acts.data(), n, k, w.data(), dtype, 0, m, o.data(), m);
          for (int64_t i = 0; i < n * m; ++i)
            ASSERT_TRUE(std::fabs(o[size_t(i)] - want[size_t(i)]) <= bound[size_t(i)])
                << "gfni=" << gfni << " out[" << i << "] = " << o[size_t(i)] << ", want "
                << want[size_t(i)];
        }
        ASSERT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)))
            << "the GFNI unpack differs from the shift unpack";
      });
    }
  }
  cpu::set_q6_k_gfni_unpack(saved);
}

}  // namespace
}  // namespace infera
