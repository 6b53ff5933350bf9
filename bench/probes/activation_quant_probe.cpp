// The decode GEMVs' activation quantization (quant_matmul.h, run on the calling thread before every
// decode GEMV section while the others wait): the SIMD rows of activation_quant.cpp against the
// scalar loops they replaced (kept below as old_q8 / old_q8k), best of 50 x 200 calls, and
// whether both wrote the same bytes. Session 16 (Zen 4 VM, AVX3_DL):
//   k=1024 q8: old 1.28 us new 0.50 us; q8k: old 1.19 new 0.32 (same bytes)
//   k=3072 q8: old 3.83 us new 1.50 us; q8k: old 3.55 new 0.95 (same bytes)
// Build (after build/release):
//   g++ -O2 -std=c++20 -Isrc -Iinclude bench/probes/activation_quant_probe.cpp \
//       build/release/src/backend/cpu/libinfera_cpu.a build/release/src/quant/libinfera_quant.a \
//       build/release/src/core/libinfera_core.a -lhwy -lpthread -o /tmp/aq && /tmp/aq
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
#include "backend/cpu/quant_matmul.h"
using namespace infera;
inline float rhe(float v) { constexpr float k = 12582912.0f; return (v + k) - k; }
template <int N> float qg(const float* x, int8_t* q) {
  float amax = 0.0f; for (int i = 0; i < N; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int i = 0; i < N; ++i) q[i] = static_cast<int8_t>(rhe(x[i] * inv));
  return amax / 127.0f;
}
void old_q8(const float* x, int64_t k, cpu::ActBlockQ8* out) {
  for (int64_t b = 0; b < k / 32; ++b) { out[b].d = qg<32>(x + 32 * b, out[b].qs);
    for (int lane = 0; lane < 4; ++lane) { const int8_t* q = out[b].qs + 4 * lane;
      out[b].offset[lane] = out[b].offset[lane + 4] = -128 * (q[0] + q[1] + q[2] + q[3] + q[16] + q[17] + q[18] + q[19]); } }
}
void old_q8k(const float* x, int64_t k, cpu::ActBlockQ8K* out) {
  for (int64_t b = 0; b < k / 256; ++b) { out[b].d = qg<256>(x + 256 * b, out[b].qs);
    for (int g = 0; g < 16; ++g) { int32_t sum = 0; for (int i = 0; i < 16; ++i) sum += out[b].qs[16 * g + i]; out[b].bsums[g] = (int16_t)sum; } }
}
int main() {
  for (int64_t k : {1024, 3072}) {
    std::vector<float> x(k); std::mt19937 r(1); std::normal_distribution<float> nd; for (auto& v : x) v = nd(r);
    std::vector<uint8_t> a(cpu::activation_row_bytes(DType::Q8_0, k)), b(a.size()), c(cpu::activation_row_bytes(DType::Q4_K, k)), e(c.size());
    auto t = [&](auto f) { double best = 1e9; for (int rep = 0; rep < 50; ++rep) { auto t0 = std::chrono::steady_clock::now(); for (int i = 0; i < 200; ++i) f(); best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 200); } return best * 1e6; };
    double o8 = t([&]{ old_q8(x.data(), k, (cpu::ActBlockQ8*)a.data()); });
    double n8 = t([&]{ cpu::quantize_activation_row(DType::Q8_0, x.data(), k, b.data()); });
    double ok = t([&]{ old_q8k(x.data(), k, (cpu::ActBlockQ8K*)c.data()); });
    double nk = t([&]{ cpu::quantize_activation_row(DType::Q4_K, x.data(), k, e.data()); });
    std::printf("k=%lld q8: old %.2f us new %.2f us (same bytes %d); q8k: old %.2f new %.2f (same %d)\n", (long long)k, o8, n8, memcmp(a.data(), b.data(), a.size()) == 0, ok, nk, memcmp(c.data(), e.data(), c.size()) == 0);
  }
}
