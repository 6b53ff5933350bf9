// The packed bf16 weights of matmul_bf16_packed.h ("bf16 pairs"): the layout against the header's
// description, the kernel against a plain scalar reference on bf16-rounded operands (odd k, tails,
// one row, rows not multiples of 16, sub-ranges), decode and prefill giving the same bits, decode
// with its weight streams in lockstep giving one stream's bits, and the
// CPU backend with --matmul-precision bf16 packing, multiplying and looking rows up through it.
// The kernel exists for one SIMD target, AVX512-BF16; other CPUs keep the rows and the f32 path
// (the tests skip there, saying so).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_bf16_dot.h"
#include "backend/cpu/matmul_bf16_packed.h"
#include "backend/cpu/quant_matmul.h"
#include "infera/tensor.h"
#include "ops/backend.h"

namespace infera {
namespace {

// Independent scalar bf16: round to nearest even (finite inputs), and back.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random bf16 weights of both signs, normal magnitudes (vdpbf16ps flushes denormals).
std::vector<uint16_t> random_weights(int64_t m, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.5f);
  std::vector<uint16_t> w(static_cast<size_t>(m * k));
  for (auto& v : w) v = to_bf16(dist(rng) + (dist(rng) > 0 ? 1e-3f : -1e-3f));
  return w;
}
std::vector<float> random_rows(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * k));
  for (auto& v : x) v = dist(rng) + (dist(rng) > 0 ? 1e-2f : -1e-2f);
  return x;
}

// out[i][j] = sum_p bf16(x[i][p]) * w[j][p] in double, and the bound of an f32 sum of k products
// taken in some order (each vdpbf16ps step rounds at most twice): (k + 2) * 2^-24 * sum |x w|.
struct Reference {
  std::vector<double> want, bound;
};
Reference reference(const std::vector<float>& x, int64_t n, const std::vector<uint16_t>& w,
                    int64_t m, int64_t k) {
  Reference r{std::vector<double>(static_cast<size_t>(n * m)),
              std::vector<double>(static_cast<size_t>(n * m))};
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0, a = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t = double(from_bf16(to_bf16(x[size_t(i * k + p)]))) *
                         double(from_bf16(w[size_t(j * k + p)]));
        s += t;
        a += std::fabs(t);
      }
      r.want[size_t(i * m + j)] = s;
      r.bound[size_t(i * m + j)] = double(k + 2) * std::ldexp(1.0, -24) * a + 1e-30;
    }
  return r;
}

std::vector<uint16_t> packed(const std::vector<uint16_t>& w, int64_t m, int64_t k) {
  std::vector<uint16_t> p(cpu::bf16_pairs_bytes(m, k) / 2, 0xFFFF);
  cpu::pack_bf16_pairs(w.data(), m, k, p.data());
  return p;
}

TEST(Bf16Packed, LayoutIsTheHeadersAndRowsComeBack) {
  for (auto [m, k] : {std::tuple<int64_t, int64_t>{1, 1},
                      {2, 3},
                      {5, 7},
                      {16, 2},
                      {17, 33},
                      {40, 64},
                      {33, 1024}}) {
    const auto w = random_weights(m, k, 3);
    const auto p = packed(w, m, k);
    const int64_t kp = k + (k % 2), groups = (m + 15) / 16;
    ASSERT_EQ(cpu::bf16_pairs_width(k), kp);
    ASSERT_EQ(p.size(), static_cast<size_t>(groups * 16 * kp)) << m << "x" << k;
    // Element (row, col) of the padded [groups * 16, kp] matrix: group row / 16, vector col / 2,
    // 32-bit lane row % 16, half col % 2 (the header's description, written out here).
    for (int64_t row = 0; row < groups * 16; ++row)
      for (int64_t col = 0; col < kp; ++col) {
        const size_t at = size_t(row / 16 * (kp / 2) * 32 + col / 2 * 32 + row % 16 * 2 + col % 2);
        const uint16_t expect = row < m && col < k ? w[size_t(row * k + col)] : 0;
        ASSERT_EQ(p[at], expect) << m << "x" << k << " row " << row << " col " << col;
      }
    std::vector<uint16_t> back(static_cast<size_t>(k));
    for (int64_t row = 0; row < m; ++row) {
      cpu::bf16_pairs_row(p.data(), k, row, back.data());
      ASSERT_EQ(std::memcmp(back.data(), w.data() + row * k, size_t(k) * 2), 0) << "row " << row;
    }
  }
}

TEST(Bf16Packed, ActivationRowsRoundedToNearestEvenWithAZeroPad) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  for (int64_t k : {1, 2, 15, 16, 17, 33, 100}) {
    auto x = random_rows(3, k, 11);
    x[0] = from_bf16(0x3F80) + std::ldexp(1.0f, -8);  // a tie: 1 + 2^-8 rounds to even, 1.0
    const int64_t kp = cpu::bf16_pairs_width(k);
    std::vector<uint16_t> got(size_t(3 * kp), 0xFFFF);
    cpu::round_rows_to_bf16_pairs(x.data(), 3, k, got.data());
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t p = 0; p < kp; ++p)
        ASSERT_EQ(got[size_t(i * kp + p)], p < k ? to_bf16(x[size_t(i * k + p)]) : 0)
            << "k " << k << " row " << i << " element " << p;
    EXPECT_EQ(got[0], 0x3F80);
  }
}

TEST(Bf16Packed, KernelMatchesScalarReference) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  int cases = 0;
  for (int64_t k : {1, 2, 3, 31, 32, 33, 100, 257, 1024})
    for (int64_t m : {1, 5, 15, 16, 17, 33, 64, 100, 145})
      for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 13, 37}) {
        if (k * m * n > 2'000'000) continue;
        const auto w = random_weights(m, k, uint32_t(k * 31 + m));
        const auto x = random_rows(n, k, uint32_t(n + 7));
        const auto p = packed(w, m, k);
        std::vector<uint16_t> xb(size_t(n * cpu::bf16_pairs_width(k)));
        cpu::round_rows_to_bf16_pairs(x.data(), n, k, xb.data());
        const Reference r = reference(x, n, w, m, k);
        // The whole range, group-aligned and arbitrary sub-ranges (a thread's groups, a view's
        // rows), into a wider output at column j - col0 whose other columns must stay NaN.
        for (auto [jb, je] : {std::pair<int64_t, int64_t>{0, m},
                              {16, std::min<int64_t>(m, 48)},
                              {m / 32 * 16, m},
                              {3, m - 2},
                              {m / 3, m},
                              {17, 18}}) {
          if (jb < 0 || jb >= je || je > m) continue;
          for (int64_t col0 : {int64_t{0}, jb}) {
            const int64_t ldo = m + 3 - col0;
            std::vector<float> out(size_t(n * ldo), std::numeric_limits<float>::quiet_NaN());
            cpu::matmul_rows_bf16_pairs(xb.data(), n, k, p.data(), jb, je, out.data(), ldo, col0);
            ++cases;
            for (int64_t i = 0; i < n; ++i)
              for (int64_t c = 0; c < ldo; ++c) {
                const float got = out[size_t(i * ldo + c)];
                const int64_t j = c + col0;
                if (j < jb || j >= je) {
                  ASSERT_TRUE(std::isnan(got)) << "wrote outside [" << jb << ", " << je << ") at "
                                               << j << " n " << n << " m " << m << " k " << k;
                  continue;
                }
                const size_t at = size_t(i * m + j);
                ASSERT_LE(std::fabs(double(got) - r.want[at]), r.bound[at])
                    << "n " << n << " m " << m << " k " << k << " rows [" << jb << ", " << je
                    << ") col0 " << col0 << " out[" << i << "][" << j << "] = " << got << " want "
                    << r.want[at];
              }
          }
        }
      }
  EXPECT_GT(cases, 2000);
}

// The header's contract: one summation order, so a row computed alone (decode tiles) has the same
// bits as the same row inside any prefill tile.
TEST(Bf16Packed, DecodeAndPrefillGiveTheSameBits) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  for (auto [n, m, k] :
       {std::tuple<int64_t, int64_t, int64_t>{13, 200, 257}, {9, 16, 1024}, {37, 33, 64}}) {
    const auto w = random_weights(m, k, 5);
    const auto p = packed(w, m, k);
    const auto x = random_rows(n, k, 9);
    const int64_t kp = cpu::bf16_pairs_width(k);
    std::vector<uint16_t> xb(size_t(n * kp));
    cpu::round_rows_to_bf16_pairs(x.data(), n, k, xb.data());
    std::vector<float> all(size_t(n * m));
    cpu::matmul_rows_bf16_pairs(xb.data(), n, k, p.data(), 0, m, all.data(), m, 0);
    for (int64_t rows : {1, 2, 3, 4, 5}) {
      for (int64_t i = 0; i + rows <= n; i += rows) {
        std::vector<float> part(size_t(rows * m));
        cpu::matmul_rows_bf16_pairs(xb.data() + i * kp, rows, k, p.data(), 0, m, part.data(), m, 0);
        ASSERT_EQ(std::memcmp(part.data(), all.data() + i * m, part.size() * 4), 0)
            << "rows " << i << ".." << i + rows - 1 << " of " << n << " (m " << m << ", k " << k
            << ") computed " << rows << " at a time";
      }
    }
  }
}

// Decode (n < 4) with the weight groups read as S distant streams in lockstep (2, 4, 8; any other
// count: the adjacent tiles): every output the same bits as with one stream, within the scalar
// reference's bound, nothing written outside the range. Ranges start and end mid-group, leave
// whole groups over (not a multiple of S) and are shorter than S groups.
TEST(Bf16Packed, DecodeStreamsInLockstepGiveTheSameBitsAsOneStream) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  int lockstep_cases = 0;
  for (auto [m, k] : {std::pair<int64_t, int64_t>{16 * 37 + 5, 33},
                      {16 * 40, 256},
                      {16 * 9, 2},
                      {16 * 3 + 1, 64},
                      {16 * 70, 1}}) {
    const auto w = random_weights(m, k, uint32_t(m + k));
    const auto p = packed(w, m, k);
    for (int64_t n : {1, 2, 3}) {
      const auto x = random_rows(n, k, uint32_t(n * 3 + 1));
      std::vector<uint16_t> xb(size_t(n * cpu::bf16_pairs_width(k)));
      cpu::round_rows_to_bf16_pairs(x.data(), n, k, xb.data());
      const Reference r = reference(x, n, w, m, k);
      for (auto [jb, je] : {std::pair<int64_t, int64_t>{0, m},
                            {5, m - 7},
                            {48, std::min<int64_t>(m, 16 * 30)},
                            {m / 2 + 3, m},
                            {16, 16 * 3 + 2},
                            {7, 9}}) {
        if (jb < 0 || jb >= je || je > m) continue;
        for (int64_t col0 : {int64_t{0}, jb}) {
          const int64_t ldo = m + 3 - col0;
          const float nan = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> one(size_t(n * ldo), nan);
          cpu::matmul_rows_bf16_pairs(xb.data(), n, k, p.data(), jb, je, one.data(), ldo, col0, 1);
          for (int streams : {2, 4, 8, 3, 0}) {
            std::vector<float> out(size_t(n * ldo), nan);
            cpu::matmul_rows_bf16_pairs(xb.data(), n, k, p.data(), jb, je, out.data(), ldo, col0,
                                        streams);
            const int64_t whole = je / 16 - (jb + 15) / 16;
            if ((streams == 2 || streams == 4 || streams == 8) && whole >= streams)
              ++lockstep_cases;
            const std::string what = "m " + std::to_string(m) + " k " + std::to_string(k) + " n " +
                                     std::to_string(n) + " rows [" + std::to_string(jb) + ", " +
                                     std::to_string(je) + ") col0 " + std::to_string(col0) +
                                     " streams " + std::to_string(streams);
            for (int64_t i = 0; i < n; ++i)
              for (int64_t c = 0; c < ldo; ++c) {
                const float got = out[size_t(i * ldo + c)];
                const int64_t j = c + col0;
                if (j < jb || j >= je) {
                  ASSERT_TRUE(std::isnan(got)) << what << ": wrote column " << j;
                  continue;
                }
                const size_t at = size_t(i * m + j);
                ASSERT_LE(std::fabs(double(got) - r.want[at]), r.bound[at])
                    << what << " out[" << i << "][" << j << "] = " << got << " want " << r.want[at];
                ASSERT_EQ(std::memcmp(&got, &one[size_t(i * ldo + c)], 4), 0)
                    << what << " out[" << i << "][" << j << "] = " << got << ", one stream "
                    << one[size_t(i * ldo + c)];
              }
          }
        }
      }
    }
  }
  EXPECT_GT(lockstep_cases, 200);
}

struct RepackEnv {
  explicit RepackEnv(const char* value) {
    if (value)
      setenv("INFERA_CPU_REPACK", value, 1);
    else
      unsetenv("INFERA_CPU_REPACK");
  }
  ~RepackEnv() { unsetenv("INFERA_CPU_REPACK"); }
};

// Through the backend: bf16 weights are packed only with bf16 matmul precision (and not with
// INFERA_CPU_REPACK=0); matmul at decode and prefill sizes and embedding read them right.
TEST(Bf16Packed, BackendPacksMultipliesAndLooksRowsUp) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t m = 37, k = 129;
  auto w = random_weights(m, k, 21);
  const Tensor host("w", DType::BF16, {m, k}, Device::CPU, w.data(), nullptr);
  const auto want_packed = packed(w, m, k);
  for (int threads : {1, 2})
    for (const char* env : {static_cast<const char*>(nullptr), "0", "q4_0", "bf16"})
      for (MatmulPrecision precision : {MatmulPrecision::BF16, MatmulPrecision::F32}) {
        RepackEnv scoped(env);
        auto backend = make_cpu_backend(threads, PackedAttentionSchedule::Windowed, precision);
        const Tensor pw = backend->prepare_weight(host);
        const std::string e = env ? env : "";
        const bool want = precision == MatmulPrecision::BF16 && (e.empty() || e == "bf16");
        const std::string what = "threads " + std::to_string(threads) + " env " + e +
                                 (precision == MatmulPrecision::BF16 ? " bf16" : " f32");
        ASSERT_EQ(pw.data() != host.data(), want) << what;
        ASSERT_EQ(pw.shape(), host.shape());
        if (want)
          ASSERT_EQ(std::memcmp(pw.data(), want_packed.data(), want_packed.size() * 2), 0) << what;
        for (int64_t n : {1, 3, 4, 16, 37}) {
          const auto x = random_rows(n, k, uint32_t(n));
          const Tensor xt("x", DType::F32, {n, k}, Device::CPU, const_cast<float*>(x.data()),
                          nullptr);
          Tensor out = backend->alloc("out", DType::F32, {n, m});
          backend->matmul(xt, pw, out);
          // bf16 activations: the bf16 reference; f32 activations: within bf16 rounding of it.
          const Reference r = reference(x, n, w, m, k);
          const float* o = out.data_as<float>();
          for (int64_t i = 0; i < n * m; ++i) {
            const double tol = precision == MatmulPrecision::BF16
                                   ? r.bound[size_t(i)]
                                   : r.bound[size_t(i)] * 1e5 / double(k + 2);
            ASSERT_LE(std::fabs(double(o[i]) - r.want[size_t(i)]), tol)
                << what << " n " << n << " output " << i;
          }
        }
        std::vector<int32_t> ids = {0, 36, 15, 16, 17, 5};
        const Tensor id_t("ids", DType::I32, {int64_t(ids.size())}, Device::CPU, ids.data(),
                          nullptr);
        Tensor rows = backend->alloc("rows", DType::F32, {int64_t(ids.size()), k});
        backend->embedding(pw, id_t, rows);
        for (size_t i = 0; i < ids.size(); ++i)
          for (int64_t p = 0; p < k; ++p)
            ASSERT_EQ(rows.data_as<float>()[int64_t(i) * k + p],
                      from_bf16(w[size_t(ids[i] * k + p)]))
                << what << " embedding row " << ids[i] << " element " << p;
      }
}

// The backend's decode matmul reads INFERA_CPU_GEMV_STREAMS (set_quant_gemv_streams here) for
// packed bf16 weights too: every setting gives the bits of one stream, on 1 and 2 threads, for a
// whole weight and a view starting mid-group.
TEST(Bf16Packed, BackendDecodeIsTheSameWhateverTheStreams) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t m = 16 * 41 + 9, k = 96;
  auto w = random_weights(m, k, 41);
  const Tensor host("w", DType::BF16, {m, k}, Device::CPU, w.data(), nullptr);
  struct Restore {
    bool dynamic = cpu::decode_dynamic_rows();
    ~Restore() {
      cpu::set_quant_gemv_streams(0);
      cpu::set_decode_dynamic_rows(dynamic);
    }
  } restore;
  // Per (first row, n): the first result (1 thread, fixed slices, 1 stream), which every thread
  // count, split and stream count must give bit for bit.
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> firsts;
  for (int threads : {1, 2, 3})
    for (bool dynamic : {false, true}) {  // INFERA_CPU_DYNAMIC_ROWS: slices taken in turn
      cpu::set_decode_dynamic_rows(dynamic);
      auto backend =
          make_cpu_backend(threads, PackedAttentionSchedule::Windowed, MatmulPrecision::BF16);
      const Tensor pw = backend->prepare_weight(host);
      ASSERT_NE(pw.data(), host.data()) << "not packed";
      for (auto [r0, rows] : {std::pair<int64_t, int64_t>{0, m}, {13, 600}})
        for (int64_t n : {1, 2, 3}) {
          const Tensor view = rows == m ? pw : pw.rows(r0, rows);
          const auto x = random_rows(n, k, uint32_t(n + 50));
          const Tensor xt("x", DType::F32, {n, k}, Device::CPU, const_cast<float*>(x.data()),
                          nullptr);
          const Reference r = reference(x, n, w, m, k);
          std::vector<float>& first = firsts[{r0, n}];
          for (int streams : {1, 0, 2, 4, 8}) {
            cpu::set_quant_gemv_streams(streams);
            Tensor out = backend->alloc("out", DType::F32, {n, rows});
            backend->matmul(xt, view, out);
            const float* o = out.data_as<float>();
            const std::string what = "threads " + std::to_string(threads) + " dynamic " +
                                     std::to_string(dynamic) + " rows " + std::to_string(r0) + "+" +
                                     std::to_string(rows) + " n " + std::to_string(n) +
                                     " streams " + std::to_string(streams);
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < rows; ++j) {
                const size_t at = size_t(i * m + r0 + j);
                ASSERT_LE(std::fabs(double(o[i * rows + j]) - r.want[at]), r.bound[at])
                    << what << " out[" << i << "][" << j << "]";
              }
            if (first.empty())
              first.assign(o, o + n * rows);
            else
              ASSERT_EQ(std::memcmp(o, first.data(), first.size() * 4), 0) << what;
          }
        }
    }
}

// matmul_multi (q/k/v) and matmul_swiglu (gate/up) on packed weights run as one parallel section
// with x rounded once (CpuBackend::bf16_packed_multi): bit for bit the separate matmuls and the
// swiglu op, at decode and prefill sizes, on 1 and 2 threads, whole weights and row views (views
// of different first rows take the separate ops: same bits either way).
TEST(Bf16Packed, FusedMultiAndSwigluAreTheSeparateOpsBitForBit) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t k = 136, mq = 16 * 13 + 3, mkv = 16 * 5, mf = 16 * 21 + 7;
  const auto wq = random_weights(mq, k, 61), wk = random_weights(mkv, k, 62),
             wv = random_weights(mkv, k, 63), wg = random_weights(mf, k, 64),
             wu = random_weights(mf, k, 65), wgu = random_weights(2 * mf, k, 66);
  auto host = [k](const char* name, const std::vector<uint16_t>& w, int64_t m) {
    return Tensor(name, DType::BF16, {m, k}, Device::CPU, const_cast<uint16_t*>(w.data()), nullptr);
  };
  for (int threads : {1, 2}) {
    auto backend =
        make_cpu_backend(threads, PackedAttentionSchedule::Windowed, MatmulPrecision::BF16);
    const Tensor q = backend->prepare_weight(host("q", wq, mq));
    const Tensor kk = backend->prepare_weight(host("k", wk, mkv));
    const Tensor v = backend->prepare_weight(host("v", wv, mkv));
    const Tensor g = backend->prepare_weight(host("g", wg, mf));
    const Tensor u = backend->prepare_weight(host("u", wu, mf));
    const Tensor gu = backend->prepare_weight(host("gu", wgu, 2 * mf));
    ASSERT_NE(q.data(), wq.data()) << "not packed";
    for (int64_t n : {1, 2, 3, 5, 17}) {
      const std::string what = "threads " + std::to_string(threads) + " n " + std::to_string(n);
      const auto x = random_rows(n, k, uint32_t(70 + n));
      const Tensor xt("x", DType::F32, {n, k}, Device::CPU, const_cast<float*>(x.data()), nullptr);
      auto same = [&](const Tensor& a, const Tensor& b, const std::string& which) {
        ASSERT_EQ(a.numel(), b.numel());
        ASSERT_EQ(std::memcmp(a.data(), b.data(), size_t(a.numel()) * 4), 0)
            << what << " " << which;
      };
      // q / k / v: fused against one matmul each.
      Tensor oq = backend->alloc("oq", DType::F32, {n, mq}),
             ok = backend->alloc("ok", DType::F32, {n, mkv}),
             ov = backend->alloc("ov", DType::F32, {n, mkv});
      const Tensor* ws[] = {&q, &kk, &v};
      Tensor* outs[] = {&oq, &ok, &ov};
      backend->matmul_multi(xt, ws, outs);
      for (int i = 0; i < 3; ++i) {
        Tensor one = backend->alloc("one", DType::F32, {n, ws[i]->dim(0)});
        backend->matmul(xt, *ws[i], one);
        same(*outs[i], one, "multi " + std::to_string(i));
        // and within the reference bound (the fused path is not merely self-consistent)
        const auto& wi = i == 0 ? wq : i == 1 ? wk : wv;
        const Reference r = reference(x, n, wi, ws[i]->dim(0), k);
        for (int64_t e = 0; e < outs[i]->numel(); ++e)
          ASSERT_LE(std::fabs(double(outs[i]->data_as<float>()[e]) - r.want[size_t(e)]),
                    r.bound[size_t(e)])
              << what << " multi " << i << " element " << e;
      }
      // gate / up: whole weights, then two views of one packed weight (same first-row offset
      // within a group: 0 and mf are 16 * 21 + 7 apart, so the second view starts mid-group and
      // the pair takes the separate ops).
      for (int variant = 0; variant < 2; ++variant) {
        const Tensor wgate = variant == 0 ? g : gu.rows(0, mf);
        const Tensor wup = variant == 0 ? u : gu.rows(mf, mf);
        Tensor gate = backend->alloc("gate", DType::F32, {n, mf}),
               up = backend->alloc("up", DType::F32, {n, mf});
        backend->matmul_swiglu(xt, wgate, wup, gate, up);
        Tensor g1 = backend->alloc("g1", DType::F32, {n, mf}),
               u1 = backend->alloc("u1", DType::F32, {n, mf}),
               s1 = backend->alloc("s1", DType::F32, {n, mf});
        backend->matmul(xt, wgate, g1);
        backend->matmul(xt, wup, u1);
        backend->swiglu(g1, u1, s1);
        same(gate, s1, "swiglu variant " + std::to_string(variant));
      }
    }
  }
}

// ModernBERT splits its fused Wqkv / Wi by rows (Tensor::rows) after prepare_weight: a row view
// of a packed weight multiplies and looks rows up through the packed matrix, at any first row.
TEST(Bf16Packed, RowViewsOfAPackedWeight) {
  if (!cpu::has_bf16_dot()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  const int64_t part = 13, m = 3 * part, k = 66;  // views start at rows 0, 13, 26: mid-group
  auto w = random_weights(m, k, 23);
  const Tensor host("wqkv", DType::BF16, {m, k}, Device::CPU, w.data(), nullptr);
  auto backend = make_cpu_backend(2, PackedAttentionSchedule::Windowed, MatmulPrecision::BF16);
  const Tensor pw = backend->prepare_weight(host);
  ASSERT_NE(pw.data(), host.data()) << "not packed";
  const Reference r5 = reference(random_rows(5, k, 31), 5, w, m, k);
  for (int64_t v = 0; v < 3; ++v) {
    const Tensor view = pw.rows(v * part, part);
    for (int64_t n : {1, 5}) {
      const auto x = random_rows(n, k, 31);
      const Reference r = n == 5 ? r5 : reference(x, n, w, m, k);
      const Tensor xt("x", DType::F32, {n, k}, Device::CPU, const_cast<float*>(x.data()), nullptr);
      Tensor out = backend->alloc("out", DType::F32, {n, part});
      backend->matmul(xt, view, out);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < part; ++j) {
          const size_t at = size_t(i * m + v * part + j);
          ASSERT_LE(std::fabs(double(out.data_as<float>()[i * part + j]) - r.want[at]), r.bound[at])
              << "view " << v << " n " << n << " row " << i << " column " << j;
        }
    }
    std::vector<int32_t> ids = {0, 12, 5};
    const Tensor id_t("ids", DType::I32, {3}, Device::CPU, ids.data(), nullptr);
    Tensor rows = backend->alloc("rows", DType::F32, {3, k});
    backend->embedding(view, id_t, rows);
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t p = 0; p < k; ++p)
        ASSERT_EQ(rows.data_as<float>()[int64_t(i) * k + p],
                  from_bf16(w[size_t((v * part + ids[i]) * k + p)]))
            << "view " << v << " embedding row " << ids[i];
  }
}

}  // namespace
}  // namespace infera
