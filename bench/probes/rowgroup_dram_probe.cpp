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
//
// Build (after build/release; the library's flags: -O3, the AVX-512 VNNI target), one line:
//   g++ -O3 -std=c++20 -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mf16c -mfma
//       -Isrc -Iinclude bench/probes/rowgroup_dram_probe.cpp build/release/src/bench/libinfera_bench.a
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/quant/libinfera_quant.a
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/rowgroup_dram_probe
//   /tmp/rowgroup_dram_probe [rounds]
#include <immintrin.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
#include "bench/machine_probe.h"
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

// Groups [g0, g1) of a Q6_K row-group matrix, S in lockstep (RowGroupsLockstep's order: the same
// bits as the library's).
template <bool kHeadFirst, int S = 4>
void gemv_q6(const uint8_t* w, const uint8_t* acts, int64_t units, int64_t g0, int64_t g1,
             float* out) {
  const auto* a = reinterpret_cast<const cpu::ActBlockQ8K*>(acts);
  const int64_t per = (g1 - g0) / S;
  for (int64_t i = 0; i < per; ++i) {
    const uint8_t* g[S];
    float* o[S];
    for (int s = 0; s < S; ++s) {
      const int64_t grp = g0 + s * per + i;
      g[s] = w + grp * units * 840;
      o[s] = out + grp * 4;
    }
    __m512 acc0[S], acc1[S];
    for (int s = 0; s < S; ++s) acc0[s] = acc1[s] = _mm512_setzero_ps();
    for (int64_t u = 0; u < units; ++u) {
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) unit_q6<kHeadFirst>(g[s] + u * 840, a[u], (u & 1) ? acc1[s] : acc0[s]);
    }
    for (int s = 0; s < S; ++s) {
      alignas(64) float lanes[16];
      _mm512_store_ps(lanes, _mm512_add_ps(acc0[s], acc1[s]));
      for (int r = 0; r < 4; ++r)
        o[s][r] = (lanes[4 * r] + lanes[4 * r + 1]) + (lanes[4 * r + 2] + lanes[4 * r + 3]);
    }
  }
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
  Matrix m{type, 0, k, static_cast<int64_t>(dtype_bytes(type, static_cast<size_t>(k))), {}, {}};
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
  bench::ReadBuffer probe(threads, int64_t{512} << 20);
  probe.read_passes(1);

  enum class Kind { Library, Q6Copy, Q6Tail, FileRows };
  struct Case {
    std::string name;
    const Matrix* m;
    Kind kind = Kind::Library;
    int streams = 0;  // quant_gemv_streams (0: auto, 4)
  };
  const std::vector<Case> cases = {
      {"q4_k", &ms[0]},         {"q6_k", &ms[1]},
      {"q6_k_s2", &ms[1], Kind::Library, 2},
      {"q6_k_copy", &ms[1], Kind::Q6Copy}, {"q6_k_tail", &ms[1], Kind::Q6Tail},
      {"q8_0", &ms[2]}, {"q6_k_file", &ms[1], Kind::FileRows}};
  std::vector<std::vector<double>> frac(cases.size()), gbs(cases.size());
  std::vector<double> probes;
  std::vector<float> out;
  for (int r = 0; r < rounds; ++r) {
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const size_t c = r % 2 ? cases.size() - 1 - ci : ci;  // alternate the order
      const Case& cs = cases[c];
      const Matrix& m = *cs.m;
      out.resize(static_cast<size_t>(m.rows));
      cpu::set_quant_gemv_streams(cs.streams);
      const double before = median(probe.read_passes(2));
      const std::vector<double> secs = bench::run_parallel_passes(threads, 1, [&](int t, int) {
        const int64_t groups = m.rows / 4;
        const int64_t g0 = groups * t / threads, g1 = groups * (t + 1) / threads;
        if (cs.kind == Kind::Q6Copy)
          gemv_q6<true>(m.bytes.data(), m.acts.data(), k / 256, g0, g1, out.data());
        else if (cs.kind == Kind::Q6Tail)
          gemv_q6<false>(tail.data(), m.acts.data(), k / 256, g0, g1, out.data());
        else if (cs.kind == Kind::FileRows)
          cpu::matmul_rows_quantized(m.acts.data(), 1, k, m.file_rows.data(), DType::Q6_K, 4 * g0,
                                     4 * g1, out.data(), m.rows);
        else
          cpu::matmul_rows_rowgroups(m.type, m.acts.data(), 1, k, m.bytes.data(), 4 * g0, 4 * g1,
                                     out.data(), m.rows);
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
}
