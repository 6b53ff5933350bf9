// The row-group decode GEMVs from DRAM on two threads, against the harness's read-bandwidth probe
// in the same rounds: each kernel's GB/s of weights as a fraction of what the machine read just
// before and after it (2 passes of a 512 MiB buffer each side), rounds in alternating order.
//
// Session 19 found with it that the Q6_K row-group units, whose scales and d sat after their
// quants, ran at 0.61-0.84 of the probes with 4 streams a thread (Q4_K 0.89-0.97, Q8_0 0.96-1.04),
// and that the same kernel on units with the scales and d first ran x1.27-1.30 faster (0.95-1.01):
// the kernel reads a unit's header first, so the old layout's first access to each unit jumped
// past the lines it read next. The library now keeps the header first (weight_rowgroups.h); the
// "q6_k_tail" case keeps the old layout (a copy of the kernel compiled here) for comparison, and
// "q6_k_copy" the same copy on the library's layout (the control for the copy's compilation);
// "q6_k_file" is the plain Q6_K kernel on the file's rows (what decode ran before session 19).
// "q4_k_before" is the Q4_K unit and layout before session 19's (a copy compiled here), against
// the library's "q4_k". The Q4_K and Q6_K A/Bs rewrite two buffers with their two layouts in
// turn every round: where a buffer's pages lie moved one kernel x0.8-1.25 against itself.
//
// Build (after build/release; the library's flags: -O3, the AVX-512 VNNI target), one line:
//   g++ -O3 -std=c++20 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mf16c -mfma
//       -Isrc -Iinclude bench/probes/rowgroup_dram_probe.cpp
//       build/release/src/bench/libinfera_bench.a
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/quant/libinfera_quant.a
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/rowgroup_dram_probe
//   /tmp/rowgroup_dram_probe [rounds]
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul_bf16_packed.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
#include "bench/machine_probe.h"
#include "core/huge_pages.h"
#include "quant/quantize.h"

using namespace infera;

namespace {

// GroupQ6_K::Unit<1> (matmul_q6_k.cpp) compiled here, on either unit layout: kHeadFirst (the
// library's since session 19: [scales 64 | d 8 | quants 768]) or the earlier [quants | scales | d].
template <bool kHeadFirst>
__attribute__((always_inline)) inline void unit_q6(const uint8_t* p, const cpu::ActBlockQ8K& ab,
                                                    __m512& acc) {
  const uint8_t* const head = kHeadFirst ? p : p + 768;
  const uint8_t* const quants = kHeadFirst ? p + 72 : p;
  const __m512i low4 = _mm512_set1_epi8(0x0F), bits45 = _mm512_set1_epi8(0x30);
  const __m512i sc01 =
      _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(head)));
  const __m512i sc23 =
      _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(head + 32)));
  const __m512i row_words =
      _mm512_setr_epi32(0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00100010, 0x00100010,
                        0x00100010, 0x00100010, 0x00200020, 0x00200020, 0x00200020, 0x00200020,
                        0x00300030, 0x00300030, 0x00300030, 0x00300030);
  const __m512 dr = _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
      _mm512_castps128_ps512(
          _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(head + 64)))));
  __m512i sumi = _mm512_setzero_si512();
  for (int s = 0; s < 4; ++s) {
    const uint8_t* line = quants + 192 * s;
    const __m512i qa = _mm512_loadu_si512(line), qb = _mm512_loadu_si512(line + 64);
    const __m512i qh = _mm512_loadu_si512(line + 128);
    const __m512i q[4] = {_mm512_or_si512(_mm512_and_si512(qa, low4),
                                          _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45)),
                          _mm512_or_si512(_mm512_and_si512(qb, low4),
                                          _mm512_and_si512(_mm512_slli_epi16(qh, 2), bits45)),
                          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qa, 4), low4),
                                          _mm512_and_si512(qh, bits45)),
                          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(qb, 4), low4),
                                          _mm512_and_si512(_mm512_srli_epi16(qh, 2), bits45))};
    const int h = s / 2, t = s % 2;
    for (int g = 0; g < 4; ++g) {
      const int G = 8 * h + 2 * g + t;
      const __m512i scale = _mm512_permutex2var_epi16(
          sc01, _mm512_add_epi16(row_words, _mm512_set1_epi16(static_cast<int16_t>(G))), sc23);
      const __m512i aq = _mm512_broadcast_i32x4(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.qs + 16 * G)));
      sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[g], aq), scale);
    }
  }
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i bs =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.bsums)));
  const __m512i off01 = _mm512_madd_epi16(sc01, bs), off23 = _mm512_madd_epi16(sc23, bs);
  const __m512i off = _mm512_add_epi32(_mm512_permutex2var_epi32(off01, even, off23),
                                       _mm512_permutex2var_epi32(off01, odd, off23));
  const __m512i dot = _mm512_sub_epi32(sumi, _mm512_slli_epi32(off, 5));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dr, _mm512_set1_ps(ab.d)), acc);
}

// Groups [g0, g1) of a row-group matrix with units kUnit bytes apart, 4 in lockstep as
// RowGroupsLockstep<Group, 4> (int8_dot-inl.h) runs them: unit(unit bytes, activation block, u,
// acc0, acc1) adds one unit into row s's accumulators; the same bits as the library's driver.
template <int64_t kUnit, class UnitFn>
void lockstep_gemv(const uint8_t* w, const uint8_t* acts, int64_t units, int64_t g0, int64_t g1,
                   float* out, UnitFn unit) {
  constexpr int S = 4;
  const auto* a = reinterpret_cast<const cpu::ActBlockQ8K*>(acts);
  const int64_t per = (g1 - g0) / S;
  for (int64_t i = 0; i < per; ++i) {
    const uint8_t* g[S];
    float* o[S];
    for (int s = 0; s < S; ++s) {
      const int64_t grp = g0 + s * per + i;
      g[s] = w + grp * units * kUnit;
      o[s] = out + grp * 4;
    }
    __m512 acc0[S], acc1[S];
    for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = _mm512_setzero_ps();
    for (int64_t u = 0; u < units; ++u) {
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) unit(g[s] + u * kUnit, a[u], u, acc0[s], acc1[s]);
    }
    for (int s = 0; s < S; ++s) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, _mm512_add_ps(acc0[s], acc1[s]));
      for (int r = 0; r < 4; ++r)
        o[s][r] = (lanes[4 * r] + lanes[4 * r + 1]) + (lanes[4 * r + 2] + lanes[4 * r + 3]);
    }
  }
}

// The Q6_K unit on either layout (GroupQ6_K alternates its accumulators by unit).
template <bool kHeadFirst>
void gemv_q6(const uint8_t* w, const uint8_t* acts, int64_t units, int64_t g0, int64_t g1,
             float* out) {
  lockstep_gemv<840>(w, acts, units, g0, g1, out,
                     [](const uint8_t* p, const cpu::ActBlockQ8K& ab, int64_t u, __m512& acc0,
                        __m512& acc1) __attribute__((always_inline)) {
                       unit_q6<kHeadFirst>(p, ab, (u & 1) ? acc1 : acc0);
                     });
}

// GroupQ4_K::Unit<1> as it was before session 19 (its row-group layout: qs bytes
// [32c + 16t, +16) of row r at 64 + 128c + 64t + 16r; the scales applied per sub-block), compiled
// here, for the A/B against the library's.
__attribute__((always_inline)) inline void unit_q4_k_before(const uint8_t* p,
                                                             const cpu::ActBlockQ8K& ab,
                                                             __m512* acc) {
  constexpr int NX = 1;
  const cpu::ActBlockQ8K* a[1] = {&ab};
  const int64_t u = 0;
    const __m512i row_of_lane = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512 dd = _mm512_castps256_ps512(
      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  const __m512 d = _mm512_permutexvar_ps(row_of_lane, dd);  // lane 4r + l: d of row r
  const __m512 neg_dmin = _mm512_sub_ps(
      _mm512_setzero_ps(),
      _mm512_permutexvar_ps(_mm512_add_epi32(row_of_lane, _mm512_set1_epi32(4)), dd));
  // Word w of the 4 rows' packed scales (UnpackScalesMins, 4 rows at a time).
  const __m128i w0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
  const __m128i w1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32));
  const __m128i w2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 48));
  const __m128i m6 = _mm_set1_epi8(0x3F), m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(0x03);
  const __m128i sc_lo = _mm_and_si128(w0, m6);  // byte 4r + s: scale s of row r (s < 4)
  const __m128i sc_hi = _mm_or_si128(_mm_and_si128(w2, m4),
                                     _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w0, 6), m2), 4));
  const __m128i mn_lo = _mm_and_si128(w1, m6);
  const __m128i mn_hi = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(w2, 4), m4),
                                     _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w1, 6), m2), 4));
  // d * sc as f32, lane 4r + s (sub-blocks 0..3, then 4..7).
  const __m512 scf[2] = {_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc_lo)), d),
                         _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc_hi)), d)};
  // Mins as int16, entry 8r + s.
  const __m512i mins16 = _mm512_cvtepu8_epi16(
      _mm256_set_m128i(_mm_unpackhi_epi32(mn_lo, mn_hi), _mm_unpacklo_epi32(mn_lo, mn_hi)));
  __m512 part[NX];
  for (int x = 0; x < NX; ++x) {
    const __m128i sums = _mm_hadd_epi16(  // sub-block sums of the activations, s = 0..7
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums)),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums + 8)));
    const __m512i msum =
        _mm512_dpwssd_epi32(_mm512_setzero_si512(), mins16, _mm512_broadcast_i32x4(sums));
    part[x] = _mm512_mul_ps(_mm512_cvtepi32_ps(msum), neg_dmin);
  }
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int c = 0; c < 4; ++c) {
    const __m512i q0 = _mm512_loadu_si512(p + 64 + 128 * c);
    const __m512i q1 = _mm512_loadu_si512(p + 128 + 128 * c);
    const __m512i nib[2][2] = {{_mm512_and_si512(q0, low4), _mm512_and_si512(q1, low4)},
                               {_mm512_and_si512(_mm512_srli_epi16(q0, 4), low4),
                                _mm512_and_si512(_mm512_srli_epi16(q1, 4), low4)}};
    for (int e = 0; e < 2; ++e) {
      const int s = 2 * c + e;
      const __m512i idx =
          _mm512_add_epi32(_mm512_slli_epi32(row_of_lane, 2), _mm512_set1_epi32(s % 4));
      const __m512 scale = _mm512_permutexvar_ps(idx, scf[s / 4]);
      for (int x = 0; x < NX; ++x) {
        const int8_t* aq = a[x][u].qs + 32 * s;
        __m512i dot = _mm512_dpbusd_epi32(
            _mm512_setzero_si512(), nib[e][0],
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq))));
        dot = _mm512_dpbusd_epi32(
            dot, nib[e][1],
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(aq + 16))));
        part[x] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, part[x]);
      }
    }
  }
  for (int x = 0; x < NX; ++x)
    acc[x] = _mm512_fmadd_ps(part[x], _mm512_set1_ps(a[x][u].d), acc[x]);
}

// The Q4_K unit before session 19 (one accumulator a row).
void gemv_q4_k_before(const uint8_t* w, const uint8_t* acts, int64_t units, int64_t g0, int64_t g1,
                      float* out) {
  lockstep_gemv<cpu::kUnitBytes>(w, acts, units, g0, g1, out,
                                 [](const uint8_t* p, const cpu::ActBlockQ8K& ab, int64_t,
                                    __m512& acc0, __m512&) __attribute__((always_inline)) {
                                   unit_q4_k_before(p, ab, &acc0);
                                 });
}

struct Matrix {
  DType type;
  int64_t rows, k, row_bytes;
  std::vector<uint8_t> bytes, acts;
  std::vector<uint8_t> file_rows;  // the same rows in the file's layout (Q6_K only)
};

// A row-group matrix of about `target` bytes: one quantized 256 x k tile repeated.
Matrix make_matrix(DType type, int64_t k, int64_t target) {
  const int64_t tile_rows = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> nd;
  std::vector<float> wf(static_cast<size_t>(tile_rows * k)), x(static_cast<size_t>(k));
  for (auto& v : wf) v = nd(rng) * 0.05f;
  for (auto& v : x) v = nd(rng);
  Matrix m{type, 0, k, static_cast<int64_t>(dtype_bytes(type, static_cast<size_t>(k))), {}, {},
           {}};
  std::vector<uint8_t> plain(static_cast<size_t>(tile_rows * m.row_bytes)), tile(plain.size());
  for (int64_t r = 0; r < tile_rows; ++r)
    quant::quantize_row(type, wf.data() + r * k, k, plain.data() + r * m.row_bytes);
  cpu::to_rowgroups(type, plain.data(), tile_rows, k, tile.data());
  const int64_t tiles = std::max<int64_t>(1, target / static_cast<int64_t>(tile.size()));
  m.rows = tiles * tile_rows;
  m.bytes.resize(static_cast<size_t>(m.rows * m.row_bytes));
  for (int64_t t = 0; t < tiles; ++t)
    std::memcpy(m.bytes.data() + t * tile.size(), tile.data(), tile.size());
  if (type == DType::Q6_K) {
    m.file_rows.resize(m.bytes.size());
    for (int64_t t = 0; t < tiles; ++t)
      std::memcpy(m.file_rows.data() + t * plain.size(), plain.data(), plain.size());
  }
  m.acts.resize(static_cast<size_t>(cpu::activation_row_bytes(type, k)));
  cpu::quantize_activation_row(type, x.data(), k, m.acts.data());
  return m;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 20;
  const int threads = 2;
  const int64_t k = 1024, target = int64_t{256} << 20;
  std::vector<Matrix> ms;
  for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) ms.push_back(make_matrix(t, k, target));
  {  // bf16 pairs (matmul_bf16_packed.h): the bf16 decode GEMV's layout
    Matrix b{DType::BF16, target / (2 * k) / 16 * 16, k, 2 * k, {}, {}, {}};
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> bits(0x3c00, 0x3d00);  // bf16 in [2^-7, ~2^-5)
    std::vector<uint16_t> rows(static_cast<size_t>(b.rows * k));
    for (auto& v : rows) v = static_cast<uint16_t>(bits(rng) | (rng() & 1 ? 0x8000 : 0));
    b.bytes.resize(cpu::bf16_pairs_bytes(b.rows, k));
    cpu::pack_bf16_pairs(rows.data(), b.rows, k, reinterpret_cast<uint16_t*>(b.bytes.data()));
    std::vector<float> x(static_cast<size_t>(k));
    for (auto& v : x) v = static_cast<float>(rng() % 1000) / 1000.0f - 0.5f;
    b.acts.resize(static_cast<size_t>(2 * k));
    cpu::round_rows_to_bf16_pairs(x.data(), 1, k, reinterpret_cast<uint16_t*>(b.acts.data()));
    ms.push_back(std::move(b));
  }
  // The Q6_K matrix with each unit's 72 header bytes moved behind its quants (the old layout).
  const Matrix& q6 = ms[1];
  const int64_t q6_units = q6.rows / 4 * (k / 256);
  std::vector<uint8_t> tail(q6.bytes.size());
  for (int64_t u = 0; u < q6_units; ++u) {
    std::memcpy(tail.data() + u * 840 + 768, q6.bytes.data() + u * 840, 72);
    std::memcpy(tail.data() + u * 840, q6.bytes.data() + u * 840 + 72, 768);
  }
  {  // both copies give the library's bits
    std::vector<float> a(4096), b(4096), c(4096);
    cpu::set_quant_gemv_streams(4);
    cpu::matmul_rows_rowgroups(DType::Q6_K, q6.acts.data(), 1, k, q6.bytes.data(), 0, 4096,
                               a.data(), 4096);
    cpu::set_quant_gemv_streams(0);
    gemv_q6<true>(q6.bytes.data(), q6.acts.data(), k / 256, 0, 1024, b.data());
    gemv_q6<false>(tail.data(), q6.acts.data(), k / 256, 0, 1024, c.data());
    if (std::memcmp(a.data(), b.data(), 4096 * 4) || std::memcmp(a.data(), c.data(), 4096 * 4)) {
      std::printf("the Q6_K copies differ from the library's kernel\n");
      return 1;
    }
  }
  // The Q4_K matrix in the row-group layout before session 19: every row restored from the
  // library's layout, its qs bytes [32c + 16t, +16) put at 64 + 128c + 64t + 16r of each unit.
  const Matrix& q4 = ms[0];
  std::vector<uint8_t> q4_before(q4.bytes.size());
  {
    std::vector<uint8_t> row(static_cast<size_t>(q4.row_bytes));
    for (int64_t j = 0; j < q4.rows; ++j) {
      cpu::rowgroups_row(DType::Q4_K, q4.bytes.data(), k, j, row.data());
      uint8_t* group = q4_before.data() + (j / 4) * 4 * q4.row_bytes;
      const int64_t r = j % 4;
      for (int64_t u = 0; u < k / 256; ++u) {
        const uint8_t* src = row.data() + u * 144;
        uint8_t* unit = group + u * cpu::kUnitBytes;
        std::memcpy(unit + 2 * r, src, 2);
        std::memcpy(unit + 8 + 2 * r, src + 2, 2);
        for (int w = 0; w < 3; ++w) std::memcpy(unit + 16 + 16 * w + 4 * r, src + 4 + 4 * w, 4);
        for (int c = 0; c < 4; ++c)
          for (int t = 0; t < 2; ++t)
            std::memcpy(unit + 64 + 128 * c + 64 * t + 16 * r, src + 16 + 32 * c + 16 * t, 16);
      }
    }
    std::vector<float> a(4096), b(4096);
    cpu::matmul_rows_rowgroups(DType::Q4_K, q4.acts.data(), 1, k, q4.bytes.data(), 0, 4096,
                               a.data(), 4096);
    gemv_q4_k_before(q4_before.data(), q4.acts.data(), k / 256, 0, 1024, b.data());
    double worst = 0;
    for (int i = 0; i < 4096; ++i)
      worst = std::max(worst, std::fabs(double(a[size_t(i)]) - b[size_t(i)]) /
                                  (std::fabs(double(b[size_t(i)])) + 1e-3));
    std::printf("Q4_K before / library: largest relative difference %.2e (summation order)\n",
                worst);
    if (!(worst < 1e-4)) return 1;
  }
  // Two buffers that take turns holding the two Q4_K layouts (rewritten every round), so that
  // where the pages happen to lie (which moved one kernel x0.8-1.25 against itself) falls on
  // both sides alike.
  uint8_t* q4_buffers[2];
  for (auto& buf : q4_buffers) buf = static_cast<uint8_t*>(alloc_streamed(q4.bytes.size(), false));
  uint8_t* q6_buffers[2];  // the same for the two Q6_K layouts
  for (auto& buf : q6_buffers) buf = static_cast<uint8_t*>(alloc_streamed(q6.bytes.size(), false));
  bench::ReadBuffer probe(threads, int64_t{512} << 20);
  probe.read_passes(1);

  enum class Kind { Library, Q6Copy, Q6Tail, FileRows, Q4Before };
  struct Case {
    std::string name;
    const Matrix* m;
    Kind kind = Kind::Library;
    int streams = 0;  // quant_gemv_streams (0: auto, 4)
    int64_t prefetch = 0;  // rowgroup_prefetch_bytes
  };
  const std::vector<Case> cases = {
      {"q4_k", &ms[0]},         {"q6_k", &ms[1]},
      {"q6_k_s2", &ms[1], Kind::Library, 2},
      {"q6_k_copy", &ms[1], Kind::Q6Copy}, {"q6_k_tail", &ms[1], Kind::Q6Tail},
      {"q8_0", &ms[2]}, {"q6_k_file", &ms[1], Kind::FileRows}, {"bf16", &ms[3]},
      {"q4_k_before", &ms[0], Kind::Q4Before}};
  std::vector<std::vector<double>> frac(cases.size()), gbs(cases.size());
  std::vector<double> probes;
  std::vector<float> out;
  for (int r = 0; r < rounds; ++r) {
    // This round's buffers: the library's layout in q4_new, the earlier one in q4_old.
    const uint8_t* q4_new = q4_buffers[r % 2];
    const uint8_t* q4_old = q4_buffers[1 - r % 2];
    std::memcpy(q4_buffers[r % 2], q4.bytes.data(), q4.bytes.size());
    std::memcpy(q4_buffers[1 - r % 2], q4_before.data(), q4_before.size());
    const uint8_t* q6_head = q6_buffers[r % 2];
    const uint8_t* q6_tail = q6_buffers[1 - r % 2];
    std::memcpy(q6_buffers[r % 2], q6.bytes.data(), q6.bytes.size());
    std::memcpy(q6_buffers[1 - r % 2], tail.data(), tail.size());
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const size_t c = r % 2 ? cases.size() - 1 - ci : ci;  // alternate the order
      const Case& cs = cases[c];
      const Matrix& m = *cs.m;
      out.resize(static_cast<size_t>(m.rows));
      cpu::set_quant_gemv_streams(cs.streams);
      cpu::set_rowgroup_prefetch_bytes(cs.prefetch);
      const double before = median(probe.read_passes(2));
      const std::vector<double> secs = bench::run_parallel_passes(threads, 1, [&](int t, int) {
        const int64_t group_rows = m.type == DType::BF16 ? cpu::kBf16GroupRows : 4;
        const int64_t groups = m.rows / group_rows;
        const int64_t g0 = groups * t / threads, g1 = groups * (t + 1) / threads;
        if (cs.kind == Kind::Q6Copy)
          gemv_q6<true>(q6_head, m.acts.data(), k / 256, g0, g1, out.data());
        else if (cs.kind == Kind::Q6Tail)
          gemv_q6<false>(q6_tail, m.acts.data(), k / 256, g0, g1, out.data());
        else if (cs.kind == Kind::Q4Before)
          gemv_q4_k_before(q4_old, m.acts.data(), k / 256, g0, g1, out.data());
        else if (m.type == DType::BF16)
          cpu::matmul_rows_bf16_pairs(reinterpret_cast<const uint16_t*>(m.acts.data()), 1, k,
                                      reinterpret_cast<const uint16_t*>(m.bytes.data()),
                                      g0 * group_rows, g1 * group_rows, out.data(), m.rows, 0,
                                      cpu::kAutoBf16GemvStreams);
        else if (cs.kind == Kind::FileRows)
          cpu::matmul_rows_quantized(m.acts.data(), 1, k, m.file_rows.data(), DType::Q6_K, 4 * g0,
                                     4 * g1, out.data(), m.rows);
        else
          cpu::matmul_rows_rowgroups(m.type, m.acts.data(), 1, k,
                                     m.type == DType::Q4_K   ? q4_new
                                     : m.type == DType::Q6_K ? q6_head
                                                             : m.bytes.data(),
                                     4 * g0,
                                     4 * g1, out.data(), m.rows);
      });
      const double g = static_cast<double>(m.bytes.size()) / secs[0] / 1e9;
      const double after = median(probe.read_passes(2));
      probes.push_back(before);
      gbs[c].push_back(g);
      frac[c].push_back(g / (0.5 * (before + after)));
    }
  }
  cpu::set_quant_gemv_streams(0);
  std::printf("probe median %.1f GB/s over %d rounds\n", median(probes), rounds);
  for (size_t c = 0; c < cases.size(); ++c)
    std::printf("%-10s %6.1f GB/s  fraction of the probes beside it: median %.3f  [%.3f, %.3f]\n",
                cases[c].name.c_str(), median(gbs[c]), median(frac[c]),
                *std::min_element(frac[c].begin(), frac[c].end()),
                *std::max_element(frac[c].begin(), frac[c].end()));
  const auto compare = [&](size_t b, size_t a) {
    std::vector<double> ratio;
    for (int r = 0; r < rounds; ++r)
      ratio.push_back(gbs[b][static_cast<size_t>(r)] / gbs[a][static_cast<size_t>(r)]);
    std::printf("%s / %s: median x%.3f, %d of %d rounds faster\n", cases[b].name.c_str(),
                cases[a].name.c_str(), median(ratio),
                static_cast<int>(std::count_if(ratio.begin(), ratio.end(),
                                               [](double x) { return x > 1; })),
                rounds);
  };
  compare(3, 4);  // the header first / last, the same compiled kernel
  compare(1, 4);  // the library / the old layout
  compare(2, 1);  // 2 streams / 4 on the library's Q6_K
  compare(1, 6);  // Q6_K row groups / the file layout's rows (the default before session 19)
  compare(0, 8);  // Q4_K: the library / the kernel and layout before session 19
}
