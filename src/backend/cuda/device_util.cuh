// Device-side helpers shared by the kernel files: element conversions, 16-byte vector loads and
// warp reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

#include "backend/cuda/kernels.h"

namespace infera::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Four f32 values rounded to bf16 (as from_f32) and stored with one 8-byte store (p 8-byte
// aligned): the bf16 shadow of an activation (CudaOptions::bf16_shadow).
__device__ __forceinline__ void store_bf16x4(__nv_bfloat16* p, float4 v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  uint2 u;
  memcpy(&u.x, &lo, 4);
  memcpy(&u.y, &hi, 4);
  *reinterpret_cast<uint2*>(p) = u;
}

// Elements of T in one 16-byte load.
template <typename T>
constexpr int kVec16 = 16 / static_cast<int>(sizeof(T));

// Widens the kVec16<T> elements of a 16-byte word to f32.
__device__ __forceinline__ void unpack16(const uint4& u, float* out, float) {
  out[0] = __uint_as_float(u.x);
  out[1] = __uint_as_float(u.y);
  out[2] = __uint_as_float(u.z);
  out[3] = __uint_as_float(u.w);
}
__device__ __forceinline__ void unpack16(const uint4& u, float* out, __nv_bfloat16) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void unpack16(const uint4& u, float* out, __half) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    __half2 h;
    memcpy(&h, &w[i], 4);
    const float2 f = __half22float2(h);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Sum over the first `warps` warps of the block (each of their threads gets it), which
// synchronize by sync() (a named barrier where other warps of the block do other work); `part`
// holds a float per warp.
template <class Sync>
__device__ __forceinline__ float warps_sum(float v, float* part, int warps, Sync sync) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  sync();  // part may still be read from the previous call
  if (lane == 0) part[warp] = v;
  sync();
  float t = lane < warps ? part[lane] : 0.0f;
  return warp_sum(t);
}
// Sum over the block (every thread gets it); `part` holds a float per warp of the block.
__device__ __forceinline__ float block_sum(float v, float* part) {
  return warps_sum(v, part, static_cast<int>(blockDim.x / 32), [] { __syncthreads(); });
}

// The dot product of a bf16 row with an f32 vector, both in shared memory, by one warp over
// `chunks` 16-byte chunks of 8 elements (lane takes chunks lane, lane + 32, ...); the sum reaches
// every lane.
__device__ __forceinline__ float warp_dot_smem(const __nv_bfloat16* row, const float* v,
                                               int64_t chunks) {
  float acc = 0.0f;
#pragma unroll 4
  for (int64_t c = threadIdx.x % 32; c < chunks; c += 32) {
    float w[8];
    unpack16(reinterpret_cast<const uint4*>(row)[c], w, __nv_bfloat16{});
    const float4 a = reinterpret_cast<const float4*>(v)[2 * c];
    const float4 b = reinterpret_cast<const float4*>(v)[2 * c + 1];
    acc = fmaf(w[0], a.x, acc);
    acc = fmaf(w[1], a.y, acc);
    acc = fmaf(w[2], a.z, acc);
    acc = fmaf(w[3], a.w, acc);
    acc = fmaf(w[4], b.x, acc);
    acc = fmaf(w[5], b.y, acc);
    acc = fmaf(w[6], b.z, acc);
    acc = fmaf(w[7], b.w, acc);
  }
  return warp_sum(acc);
}

// A GPU-scope acquire load (the spin of a grid-wide barrier: the other blocks' writes before
// their arrival are visible once it sees the count).
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Programmatic dependent launch (PDL). A kernel started by launch_pdl may begin while the kernel
// before it in the stream is still running: it must call pdl_wait() before it reads anything an
// earlier kernel of the step wrote, or writes anything an earlier kernel may still read. What it
// does before that may only touch memory no kernel of the step writes (the weights; the batch's
// indices, copied before the step's first kernel). pdl_trigger() lets the next kernel start its
// blocks; called right after pdl_wait() it keeps at most one kernel waiting ahead. Both are no-ops
// when the kernel was launched without the attribute.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
// L2 prefetch of the 128-byte line holding p (no register, no wait): weights a kernel will stream
// after pdl_wait() start arriving while the previous kernel finishes.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// Launches kernel<<<grid, block, smem, s>>>(args...) with the PDL attribute when
// programmatic_launch() is on (the kernel must follow pdl_wait()'s rule), plainly otherwise.
// Errors surface through cudaGetLastError(), as for <<<>>>.
template <typename... KArgs, typename... Args>
inline void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                       Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = programmatic_launch() ? 1 : 0;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
  if (err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(err));
}

// out[i] = Op()(a[i], b[i]) over count4 groups of four (16-byte loads and stores; the caller
// checks count % 4 == 0 and 16-byte alignment), and out rounded to bf16 into ob when it is set.
// Op: a functor with __device__ float operator()(float, float) const (b may be null for unary
// ops: then Op sees 0.0f and must ignore it).
template <typename Op>
__global__ void binary_vec4_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                   float4* __restrict__ out, __nv_bfloat16* __restrict__ ob,
                                   int64_t count4) {
  const Op op;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 x = a[i], y = b ? b[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4 r = make_float4(op(x.x, y.x), op(x.y, y.y), op(x.z, y.z), op(x.w, y.w));
    out[i] = r;
    if (ob) store_bf16x4(ob + 4 * i, r);
  }
}

// GELU, the exact erf form (torch's default), and GeGLU's gelu(input) * gate: shared by the
// encoder's f32 kernels and matmul_geglu's bf16 path, so both compute the same formula.
__device__ __forceinline__ float gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
struct GegluOp {
  __device__ float operator()(float x, float g) const { return gelu_erf(x) * g; }
};

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

inline unsigned blocks_for(int64_t items, int64_t per_block) {
  return static_cast<unsigned>((items + per_block - 1) / per_block);
}

}  // namespace infera::cuda
