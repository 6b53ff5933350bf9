// What the two tensor-core prefill attention kernels (attention_mma.cu, attention_flash.cu) share:
// the m16n8k16 MMA, packing scores into an A fragment, and the masked online-softmax step of a
// 16-row tile over kKeys keys.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend/cuda/device_util.cuh"

namespace infera::cuda {

__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1,
                                          __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1,
                                          __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two f32 values as a pair of T in one register, the first in the low half, each rounded to
// nearest even as from_f32 rounds (one packing conversion instruction on sm_80+).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &p, 4);
  return r;
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  const __half2 p = __floats2half2_rn(lo, hi);
  uint32_t r;
  memcpy(&r, &p, 4);
  return r;
}

// One key tile of the online softmax for a warp's rows r0 (s[.][0..1]) and r1 (s[.][2..3]):
// masks keys outside [lo, hi) of each row and past key_hi, updates the running max m and sum l,
// rescales the output accumulators o, and leaves the unnormalised probabilities in s.
template <int kKeys, int D>
__device__ __forceinline__ void online_softmax_tile(float (&s)[kKeys / 8][4], float (&o)[D / 8][4],
                                                    float& m0, float& m1, float& l0, float& l1,
                                                    int t0, int key_hi, int lo0, int hi0, int lo1,
                                                    int hi1, int tig) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      const int t = t0 + nt * 8 + tig * 2 + x;
      const bool ok = t < key_hi;
      if (!(ok && t >= lo0 && t < hi0)) s[nt][x] = -INFINITY;
      if (!(ok && t >= lo1 && t < hi1)) s[nt][2 + x] = -INFINITY;
      mx0 = fmaxf(mx0, s[nt][x]);
      mx1 = fmaxf(mx1, s[nt][2 + x]);
    }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  const float alpha0 = mn0 == -INFINITY ? 1.0f : __expf(m0 - mn0);
  const float alpha1 = mn1 == -INFINITY ? 1.0f : __expf(m1 - mn1);
  float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      s[nt][x] = s[nt][x] == -INFINITY ? 0.0f : __expf(s[nt][x] - mn0);
      s[nt][2 + x] = s[nt][2 + x] == -INFINITY ? 0.0f : __expf(s[nt][2 + x] - mn1);
      sum0 += s[nt][x];
      sum1 += s[nt][2 + x];
    }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    sum0 += __shfl_xor_sync(0xffffffffu, sum0, off);
    sum1 += __shfl_xor_sync(0xffffffffu, sum1, off);
  }
  l0 = l0 * alpha0 + sum0;
  l1 = l1 * alpha1 + sum1;
  m0 = mn0;
  m1 = mn1;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    o[dt][0] *= alpha0;
    o[dt][1] *= alpha0;
    o[dt][2] *= alpha1;
    o[dt][3] *= alpha1;
  }
}

}  // namespace infera::cuda
