// Read-bandwidth patterns, 1 and 2 threads: which pattern reads fastest on this VM.
#include <immintrin.h>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#define T512 __attribute__((target("avx512f")))
template <int S>
T512 double lock(const float* p, size_t n) {  // S ranges in lockstep, 128 B each per step
  size_t q = n / S / 32 * 32;
  __m512 s[8];
  for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t i = 0; i < q; i += 32) {
#pragma GCC unroll 16
    for (int j = 0; j < S; ++j) {
      s[(2 * j) % 8] = _mm512_add_ps(s[(2 * j) % 8], _mm512_load_ps(p + j * q + i));
      s[(2 * j + 1) % 8] = _mm512_add_ps(s[(2 * j + 1) % 8], _mm512_load_ps(p + j * q + i + 16));
    }
  }
  __m512 t = s[0];
  for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
template <int S>
T512 double lock64(const float* p, size_t n) {  // S ranges in lockstep, 64 B each per step
  size_t q = n / S / 16 * 16;
  __m512 s[8];
  for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t i = 0; i < q; i += 16) {
#pragma GCC unroll 16
    for (int j = 0; j < S; ++j) s[j % 8] = _mm512_add_ps(s[j % 8], _mm512_load_ps(p + j * q + i));
  }
  __m512 t = s[0];
  for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
// bf16 packed decode today: 8 adjacent 32 KB chunks in lockstep, 64 B each per step
T512 double near8(const float* p, size_t n) {
  const size_t chunk = 32768 / 4, blk = 8 * chunk;
  __m512 s[8];
  for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t b = 0; b + blk <= n; b += blk)
    for (size_t i = 0; i < chunk; i += 16)
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) s[j] = _mm512_add_ps(s[j], _mm512_load_ps(p + b + j * chunk + i));
  __m512 t = s[0];
  for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
volatile double sink;
int main(int argc, char** argv) {
  int T = atoi(argv[1]);
  int rounds = argc > 2 ? atoi(argv[2]) : 4;
  size_t bytes = size_t(512) << 20;
  size_t n = bytes / 4 / T / 4096 * 4096;
  float* buf = (float*)aligned_alloc(4096, n * 4 * T);
  using F = double (*)(const float*, size_t);
  F fs[] = {lock<1>, lock<2>, lock<4>, lock<8>, lock<16>, lock64<4>, lock64<8>, lock64<16>, near8};
  const char* names[] = {"plain", "2x128B", "4x128B", "8x128B", "16x128B", "4x64B", "8x64B", "16x64B", "near8x32KB"};
  const int nf = sizeof(fs) / sizeof(fs[0]);
  std::vector<std::thread> th;
  std::barrier bar(T);
  std::vector<std::vector<double>> res(nf), cpu(nf);
  for (int t = 0; t < T; ++t)
    th.emplace_back([&, t] {
      float* p = buf + t * n;
      for (size_t i = 0; i < n; ++i) p[i] = (i & 1023) * 1e-3f;
      for (int round = 0; round < rounds; ++round)
        for (int f = 0; f < nf; ++f) {
          bar.arrive_and_wait();
          auto t0 = std::chrono::steady_clock::now();
          sink = sink + fs[f](p, n);
          bar.arrive_and_wait();
          if (t == 0)
            res[f].push_back(double(n * 4 * T) /
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
        }
    });
  for (auto& x : th) x.join();
  for (int f = 0; f < nf; ++f) {
    printf("%-11s", names[f]);
    for (double v : res[f]) printf(" %6.1f", v);
    printf("\n");
  }
}
