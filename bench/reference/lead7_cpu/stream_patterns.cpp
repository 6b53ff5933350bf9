// Session 7 lead's stream-pattern probe (not built by CMake): g++ -O2 -std=c++20 -pthread stream_patterns.cpp && ./a.out 1 && ./a.out 2
// Columns: 4 rounds each, GB/s over a 512 MiB buffer split per thread. plain = one sequential stream per thread;
// 4xNKB = the thread's quarters read N KB at a time in turn; 4streams = the quarters in lockstep, 128 B each per step.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <barrier>
__attribute__((target("avx512f"))) double sum_plain(const float* p, size_t n) {
  __m512 s[8]; for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t i = 0; i + 128 <= n; i += 128)
    for (int k = 0; k < 8; ++k) s[k] = _mm512_add_ps(s[k], _mm512_load_ps(p + i + 16 * k));
  __m512 t = s[0]; for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
template <int AHEAD>
__attribute__((target("avx512f"))) double sum_pf(const float* p, size_t n) {
  __m512 s[8]; for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t i = 0; i + 128 <= n; i += 128) {
    _mm_prefetch((const char*)(p + i) + AHEAD, _MM_HINT_T0);
    _mm_prefetch((const char*)(p + i) + AHEAD + 64*4, _MM_HINT_T0);
    for (int k = 0; k < 8; ++k) s[k] = _mm512_add_ps(s[k], _mm512_load_ps(p + i + 16 * k));
  }
  __m512 t = s[0]; for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
__attribute__((target("avx512f"))) double sum_4streams(const float* p, size_t n) {
  size_t q = n / 4 / 128 * 128; const float* a = p; const float* b = p + q; const float* c = p + 2*q; const float* d = p + 3*q;
  __m512 s[8]; for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t i = 0; i + 32 <= q; i += 32) {
    s[0] = _mm512_add_ps(s[0], _mm512_load_ps(a + i)); s[1] = _mm512_add_ps(s[1], _mm512_load_ps(a + i + 16));
    s[2] = _mm512_add_ps(s[2], _mm512_load_ps(b + i)); s[3] = _mm512_add_ps(s[3], _mm512_load_ps(b + i + 16));
    s[4] = _mm512_add_ps(s[4], _mm512_load_ps(c + i)); s[5] = _mm512_add_ps(s[5], _mm512_load_ps(c + i + 16));
    s[6] = _mm512_add_ps(s[6], _mm512_load_ps(d + i)); s[7] = _mm512_add_ps(s[7], _mm512_load_ps(d + i + 16));
  }
  __m512 t = s[0]; for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
template <size_t CH>
__attribute__((target("avx512f"))) double sum_4chunked(const float* p, size_t n) {
  size_t q = n / 4 / CH * CH; const float* st[4] = {p, p + q, p + 2*q, p + 3*q};
  __m512 s[8]; for (auto& v : s) v = _mm512_setzero_ps();
  for (size_t i = 0; i + CH <= q; i += CH)
    for (int j = 0; j < 4; ++j) {
      const float* x = st[j] + i;
      for (size_t e = 0; e < CH; e += 128)
        for (int k = 0; k < 8; ++k) s[k] = _mm512_add_ps(s[k], _mm512_load_ps(x + e + 16 * k));
    }
  __m512 t = s[0]; for (int k = 1; k < 8; ++k) t = _mm512_add_ps(t, s[k]);
  return _mm512_reduce_add_ps(t);
}
volatile double sink;
int main(int argc, char** argv) {
  int T = atoi(argv[1]); size_t bytes = size_t(512) << 20; size_t n = bytes / 4 / T / 4096 * 4096;
  float* buf = (float*)aligned_alloc(4096, n * 4 * T);
  using F = double (*)(const float*, size_t);
  F fs[] = {sum_plain, sum_4chunked<512>, sum_4chunked<1024>, sum_4streams};
  const char* names[] = {"plain", "4x2KB", "4x4KB", "4streams"};
  std::vector<std::thread> th; std::barrier bar(T);
  std::vector<std::vector<double>> res(4);
  for (int t = 0; t < T; ++t) th.emplace_back([&, t] {
    float* p = buf + t * n; for (size_t i = 0; i < n; ++i) p[i] = (i & 1023) * 1e-3f;
    for (int round = 0; round < 4; ++round)
      for (int f = 0; f < 4; ++f) {
        bar.arrive_and_wait(); auto t0 = std::chrono::steady_clock::now();
        sink = sink + fs[f](p, n);
        bar.arrive_and_wait();
        if (t == 0) res[f].push_back(double(n * 4 * T) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9);
      }
  });
  for (auto& x : th) x.join();
  for (int f = 0; f < 4; ++f) { printf("%-9s", names[f]); for (double v : res[f]) printf(" %6.1f", v); printf("\n"); }
}
