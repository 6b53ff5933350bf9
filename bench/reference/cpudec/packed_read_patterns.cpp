// Same read patterns, add vs vdpbf16ps accumulate: is the bf16 tile bound by its reads?
#include <immintrin.h>
#include <chrono>
#include <time.h>
static double cpu_now(){timespec ts;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&ts);return ts.tv_sec+1e-9*ts.tv_nsec;}
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#define TB __attribute__((target("avx512f,avx512bw,avx512bf16")))
template <int S, int A, bool DP>
TB double run(const float* p, size_t n, int32_t xpair) {  // S ranges, A adjacent 32KB groups each
  const size_t group = 32768 / 4;                          // floats per group
  size_t groups = n / group;
  size_t per = groups / S / A * A;
  __m512 acc[S * A];
  for (auto& v : acc) v = _mm512_setzero_ps();
  const __m512bh xv = (__m512bh)_mm512_set1_epi32(xpair);
  for (size_t g = 0; g < per; g += A) {
    const float* wg[S * A];
    for (int s = 0; s < S; ++s)
      for (int a = 0; a < A; ++a) wg[s * A + a] = p + (s * per + g + a) * group;
    for (size_t i = 0; i < group; i += 16) {
#pragma GCC unroll 8
      for (int b = 0; b < S * A; ++b) {
        __m512 w = _mm512_load_ps(wg[b] + i);
        if (DP)
          acc[b] = _mm512_dpbf16_ps(acc[b], xv, (__m512bh)w);
        else
          acc[b] = _mm512_add_ps(acc[b], w);
      }
    }
  }
  __m512 t = acc[0];
  for (int k = 1; k < S * A; ++k) t = _mm512_add_ps(t, acc[k]);
  return _mm512_reduce_add_ps(t);
}
volatile double sink;
int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  size_t bytes = size_t(512) << 20, n = bytes / 4;
  float* buf = (float*)aligned_alloc(4096, bytes);
  for (size_t i = 0; i < n; ++i) buf[i] = (i & 1023) * 1e-3f;
  using F = double (*)(const float*, size_t, int32_t);
  F fs[] = {run<1, 8, true>, run<8, 1, true>, run<4, 2, true>, run<1, 1, true>, run<2, 1, true>, run<3, 1, true>, run<4, 1, true>, run<4, 1, false>};
  const char* names[] = {"1x8 (main)", "8x1", "4x2", "1x1", "2x1", "3x1", "4x1 (new)", "4x1 add"};
  const int nf = 8;
  std::vector<std::vector<double>> res(nf);
  for (int r = 0; r < rounds; ++r)
    for (int f = 0; f < nf; ++f) {
      double t0 = cpu_now();
      sink = sink + fs[f](buf, n, 0x3f803f80);
      res[f].push_back(double(bytes) / (cpu_now() - t0) / 1e9);
    }
  for (int f = 0; f < nf; ++f) {
    printf("%-11s", names[f]);
    for (double v : res[f]) printf(" %6.1f", v);
    printf("\n");
  }
}
