// Peak multiply-add rates of one core, measured: f32 FMA (vfmadd231ps), bf16 pairs
// (vdpbf16ps) and u8 x s8 quads (vpdpbusd) on 512-bit registers, 16 independent accumulators
// (more than latency x throughput on current x86 cores), timed in thread CPU time. These are the
// denominators of the GEMMs' "fraction of peak".
//   build/release/bench/dot_peak [--seconds 0.5]
// Prints GFLOP/s (one multiply + one add = 2 FLOP; vdpbf16ps = 64 FLOP, vpdpbusd = 128 "OPs").
#include <immintrin.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#define DOT_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,fma")))

namespace {

double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

constexpr int kAcc = 16;
constexpr long kInner = 1 << 16;

// Each kernel returns a value that depends on every accumulator, so nothing is optimized away.
DOT_TARGET float fma_loop(long reps) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-7f);
  for (long r = 0; r < reps; ++r)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

DOT_TARGET float bf16_loop(long reps) {
  __m512 acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  for (long r = 0; r < reps; ++r)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  __m512 s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  return out[0];
}

DOT_TARGET float int8_loop(long reps) {
  __m512i acc[kAcc];
  for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
  for (long r = 0; r < reps; ++r)
    for (int i = 0; i < kAcc; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < kAcc; ++i) s = _mm512_add_epi32(s, acc[i]);
  int out[16];
  _mm512_storeu_si512(out, s);
  return float(out[0]);
}

template <class F>
void measure(const char* name, F f, double flops_per_instr, double seconds) {
  volatile float sink = f(1000);  // warm up (frequency, caches)
  long reps = kInner;
  double t = 0;
  for (;;) {
    const double t0 = thread_seconds();
    sink = f(reps);
    t = thread_seconds() - t0;
    if (t >= seconds) break;
    reps *= 2;
  }
  (void)sink;
  const double gflops = double(reps) * kAcc * flops_per_instr / t / 1e9;
  std::printf("%-10s %8.1f GFLOP/s per core  (%.2f instructions per ns)\n", name, gflops,
              double(reps) * kAcc / t / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  for (int i = 1; i + 1 < argc; i += 2)
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512vnni")) {
    std::printf("this CPU lacks AVX512-BF16 or AVX512-VNNI\n");
    return 0;
  }
  measure("f32 fma", fma_loop, 32, seconds);     // 16 lanes x 2
  measure("bf16 dot", bf16_loop, 64, seconds);   // 16 lanes x 2 pairs x 2
  measure("int8 dot", int8_loop, 128, seconds);  // 16 lanes x 4 quads x 2
  return 0;
}
