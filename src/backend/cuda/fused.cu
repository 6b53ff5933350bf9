// Fused decode-step kernels: residual add + RMSNorm, q/k per-head RMSNorm + RoPE + KV cache write,
// and the greedy argmax over logit rows. Each replaces a chain of the one-op kernels in
// elementwise.cu with one launch and one pass, computing the same formulas in the same precision.
#include <algorithm>
#include <stdexcept>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

// One block per row (width a multiple of 4, 16-byte aligned): x += delta, written back, and the
// row kept in registers (up to K float4 per thread) for the RMSNorm into out.
template <typename W, int K>
__global__ void add_rmsnorm_rows_kernel(float* x, const float* delta, const W* __restrict__ w,
                                        float* __restrict__ out, __nv_bfloat16* __restrict__ ob,
                                        int64_t dim, float eps, int64_t tune) {
  __shared__ float part[32];
  if (tune & kTuneEarlyTrigger) pdl_trigger();
  const int64_t row = blockIdx.x;
  const int chunks = static_cast<int>(dim / 4), lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // The norm's weights are constant during a step: with kTuneParamsEarly they are read before
  // the wait, off the chain of dependent loads.
  float4 wk[K];
  auto load_weights = [&] {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int c = threadIdx.x + k * blockDim.x;
      const W* wc = w + 4 * static_cast<int64_t>(c);
      wk[k] = c < chunks ? make_float4(to_f32(wc[0]), to_f32(wc[1]), to_f32(wc[2]), to_f32(wc[3]))
                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  };
  if (tune & kTuneParamsEarly) load_weights();
  pdl_wait();
  pdl_trigger();
  float4* xr = reinterpret_cast<float4*>(x + row * dim);
  const float4* dr = delta ? reinterpret_cast<const float4*>(delta + row * dim) : nullptr;
  float4 v[K];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c < chunks) {
      const float4 a = xr[c];
      if (delta) {
        const float4 b = dr[c];
        v[k] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        xr[c] = v[k];
      } else {
        v[k] = a;
      }
    }
    ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  }
  ss = warp_sum(ss);
  if (lane == 0) part[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    float t = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : 0.0f;
    t = warp_sum(t);
    if (lane == 0) part[0] = t;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(part[0] / static_cast<float>(dim) + eps);
  float4* yr = out ? reinterpret_cast<float4*>(out + row * dim) : nullptr;
  if (!(tune & kTuneParamsEarly)) load_weights();
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= chunks) continue;
    const float4 y = make_float4(wk[k].x * (v[k].x * inv), wk[k].y * (v[k].y * inv),
                                 wk[k].z * (v[k].z * inv), wk[k].w * (v[k].w * inv));
    if (out) yr[c] = y;
    if (ob) store_bf16x4(ob + row * dim + 4 * static_cast<int64_t>(c), y);
  }
}

template <typename W>
void add_rmsnorm_typed(const AddRmsNormArgs& a, cudaStream_t s) {
  const auto* w = static_cast<const W*>(a.weight);
  const int64_t chunks = a.dim / 4;
  const bool rows_path = a.dim % 4 == 0 && chunks <= 4 * 1024 &&
                         ((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(a.delta) |
                           reinterpret_cast<uintptr_t>(a.out)) %
                          16) == 0;
  if (!rows_path) {  // the two one-op kernels (the host gives them delta and out)
    if (!a.delta || !a.out) throw std::logic_error("add_rmsnorm: no delta or out off the row path");
    const BinaryArgs add{a.x, a.delta, a.x, a.rows * a.dim};
    launch_add(&add, s);
    const RmsNormArgs norm{a.x, a.weight, a.out, a.rows, a.dim, a.weight_type, a.eps};
    launch_rmsnorm(&norm, s);
    if (a.out_bf16) {
      const ConvertArgs c{a.out, a.out_bf16, ElemType::BF16, a.rows * a.dim};
      launch_convert(&c, s);
    }
    return;
  }
  auto* ob = static_cast<__nv_bfloat16*>(a.out_bf16);
  const int64_t threads = std::min<int64_t>(1024, (chunks + 31) / 32 * 32);
  const int64_t k = (chunks + threads - 1) / threads;
  const auto grid = static_cast<unsigned>(a.rows), block = static_cast<unsigned>(threads);
  const auto eps = static_cast<float>(a.eps);
  if (k == 1)
    return launch_pdl(add_rmsnorm_rows_kernel<W, 1>, grid, block, 0, s, a.x, a.delta, w, a.out, ob,
                      a.dim, eps, a.tune);
  if (k == 2)
    return launch_pdl(add_rmsnorm_rows_kernel<W, 2>, grid, block, 0, s, a.x, a.delta, w, a.out, ob,
                      a.dim, eps, a.tune);
  launch_pdl(add_rmsnorm_rows_kernel<W, 4>, grid, block, 0, s, a.x, a.delta, w, a.out, ob, a.dim,
             eps, a.tune);
}

// One warp per (token, head slot): slots [0, hq) are q heads, [hq, hq + hkv) k heads, then hkv v
// heads. q and k: RMSNorm over the head (as rmsnorm_kernel: w * (x * rsqrt(mean x^2 + eps))),
// then rotate-half RoPE from the table (as rope_kernel), written in place; k also to the key
// pool. v: copied to the value pool. Pool writes round to nearest even, as kv_write_kernel.
template <typename W, typename T>
__global__ void qk_norm_rope_kv_kernel(const QkNormRopeKvArgs a) {
  if (a.tune & kTuneEarlyTrigger) pdl_trigger();
  // 32-bit indices (the host checks n * heads and the slots fit): 64-bit division is emulated
  // and was a large share of this kernel's instructions.
  const int unit = static_cast<int>(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);
  const int lane = threadIdx.x % 32;
  const int heads = static_cast<int>(a.hq + 2 * a.hkv), d = static_cast<int>(a.head_dim);
  const int half = d / 2, bs = static_cast<int>(a.block_size);
  // The batch's slots and positions, the norm weights and the RoPE table are constant during a
  // step: with kTuneParamsEarly the head's parameters are read before the wait.
  const bool params_early = (a.tune & kTuneParamsEarly) != 0;
  if (!params_early) {
    pdl_wait();
    pdl_trigger();
  }
  if (unit >= static_cast<int>(a.n) * heads) return;
  const int token = unit / heads, h = unit % heads;
  const int slot = a.slots[token];
  const int64_t block = slot / bs, offset = slot % bs;
  T* const keys = static_cast<T*>(a.key_pool);
  T* const values = static_cast<T*>(a.value_pool);
  const bool is_q = h < a.hq, is_v = h >= a.hq + a.hkv;
  const W* w = static_cast<const W*>(is_q ? a.q_norm : a.k_norm);
  const int64_t pos = a.positions[token];
  constexpr int kMax = 8;
  const bool in_registers = d % 64 == 0 && d <= 256;
  const int hp = half / 32;
  float wlo[kMax / 2], whi[kMax / 2], cs[kMax / 2], sn[kMax / 2];
  if (in_registers && !is_v) {
#pragma unroll
    for (int i = 0; i < kMax / 2; ++i) {
      const int j = lane + 32 * i;
      const bool ok = i < hp;
      wlo[i] = ok ? to_f32(w[j]) : 0.0f;
      whi[i] = ok ? to_f32(w[j + half]) : 0.0f;
      cs[i] = ok ? a.cos[pos * half + j] : 0.0f;
      sn[i] = ok ? a.sin[pos * half + j] : 0.0f;
    }
  }
  if (params_early) {
    pdl_wait();
    pdl_trigger();
  }
  if (is_v) {  // a v head: straight to the cache
    const int64_t hk = h - a.hq - a.hkv;
    const float* src = a.v + (token * a.hkv + hk) * d;
    T* dst = values + ((hk * a.num_blocks + block) * a.block_size + offset) * d;
    for (int j = lane; j < d; j += 32) dst[j] = from_f32<T>(src[j]);
    return;
  }
  const int64_t hk = h - a.hq;
  float* x = is_q ? a.q + (token * a.hq + h) * d : a.k + (token * a.hkv + hk) * d;
  T* cache = is_q ? nullptr : keys + ((hk * a.num_blocks + block) * a.block_size + offset) * d;
  const float eps = static_cast<float>(a.eps);
  if (in_registers) {
    // The head in registers (x read once): lane holds j = lane + 32 i, and the RoPE partner
    // j + half is the same lane's element i + half / 32.
    const int per = d / 32;
    float v[kMax];
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < kMax; ++i) {
      v[i] = i < per ? x[lane + 32 * i] : 0.0f;
      ss += v[i] * v[i];
    }
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
#pragma unroll
    for (int i = 0; i < kMax / 2; ++i) {
      if (i >= hp) break;
      const int j = lane + 32 * i;
      const float lo = wlo[i] * (v[i] * inv), hi = whi[i] * (v[i + hp] * inv);
      const float r0 = lo * cs[i] - hi * sn[i], r1 = hi * cs[i] + lo * sn[i];
      x[j] = r0;
      x[j + half] = r1;
      if (cache) {
        cache[j] = from_f32<T>(r0);
        cache[j + half] = from_f32<T>(r1);
      }
    }
    return;
  }
  float ss = 0.0f;
  for (int j = lane; j < d; j += 32) ss += x[j] * x[j];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + eps);
  for (int j = lane; j < half; j += 32) {
    const float lo = to_f32(w[j]) * (x[j] * inv), hi = to_f32(w[j + half]) * (x[j + half] * inv);
    const float c = a.cos[pos * half + j], sn = a.sin[pos * half + j];
    const float r0 = lo * c - hi * sn, r1 = hi * c + lo * sn;
    x[j] = r0;
    x[j + half] = r1;
    if (cache) {
      cache[j] = from_f32<T>(r0);
      cache[j + half] = from_f32<T>(r1);
    }
  }
}

// A one-block-per-token qk-norm kernel's warp: 4 heads of q (the first hq / 4 warps), k or v.
struct TokenWarp {
  int token, lane, kind, h0;  // kind: 0 q, 1 k, 2 v; h0: the first of its 4 heads
  int slot, pos;              // the token's cache slot and position
};
__device__ __forceinline__ TokenWarp token_warp(const QkNormRopeKvArgs& a) {
  constexpr int kHeads = 4;
  TokenWarp t;
  t.token = static_cast<int>(blockIdx.x);
  t.lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int qw = static_cast<int>(a.hq) / kHeads, kw = static_cast<int>(a.hkv) / kHeads;
  t.kind = warp < qw ? 0 : warp < qw + kw ? 1 : 2;
  t.h0 = (warp - (t.kind == 0 ? 0 : t.kind == 1 ? qw : qw + kw)) * kHeads;
  t.slot = a.slots[t.token];
  t.pos = a.positions[t.token];
  return t;
}

// The same op with one block per token: warp w takes kHeads heads of q (the first hq / kHeads
// warps), k or v. A warp's heads are loaded together (kHeads independent loads and reductions in
// flight instead of one), and the token's position, slot, cos/sin row and the norm weights are
// read before pdl_wait(), while the q/k/v GEMM may still run (nothing in the step writes them).
// Per head the arithmetic is the one-head kernel's, in the same order.
template <typename W, typename T, int kPer>
__global__ void qk_norm_rope_kv_token_kernel(const QkNormRopeKvArgs a) {
  constexpr int kHeads = 4, kHp = kPer / 2, d = kPer * 32, half = d / 2;
  const auto [token, lane, kind, h0, slot, pos] = token_warp(a);
  const int bs = static_cast<int>(a.block_size);
  const int64_t block = slot / bs, offset = slot % bs;
  float c[kHp], sn[kHp], wlo[kHp], whi[kHp];
  if (kind < 2) {
    const W* w = static_cast<const W*>(kind == 0 ? a.q_norm : a.k_norm);
#pragma unroll
    for (int i = 0; i < kHp; ++i) {
      const int j = lane + 32 * i;
      c[i] = a.cos[static_cast<int64_t>(pos) * half + j];
      sn[i] = a.sin[static_cast<int64_t>(pos) * half + j];
      wlo[i] = to_f32(w[j]);
      whi[i] = to_f32(w[j + half]);
    }
  }
  pdl_wait();
  pdl_trigger();
  const int hkv = static_cast<int>(a.hkv);
  if (kind == 2) {  // v heads: straight to the cache
    const float* src = a.v + (static_cast<int64_t>(token) * hkv + h0) * d;
    float v[kHeads][kPer];
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh)
#pragma unroll
      for (int i = 0; i < kPer; ++i) v[hh][i] = src[hh * d + lane + 32 * i];
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      T* dst = static_cast<T*>(a.value_pool) +
               ((static_cast<int64_t>(h0 + hh) * a.num_blocks + block) * bs + offset) * d;
#pragma unroll
      for (int i = 0; i < kPer; ++i) dst[lane + 32 * i] = from_f32<T>(v[hh][i]);
    }
    return;
  }
  float* x = kind == 0 ? a.q + (static_cast<int64_t>(token) * a.hq + h0) * d
                       : a.k + (static_cast<int64_t>(token) * hkv + h0) * d;
  float v[kHeads][kPer], ss[kHeads];
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh) {
    ss[hh] = 0.0f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      v[hh][i] = x[hh * d + lane + 32 * i];
      ss[hh] += v[hh][i] * v[hh][i];
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) ss[hh] += __shfl_xor_sync(0xffffffffu, ss[hh], off);
  const float eps = static_cast<float>(a.eps);
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh) {
    const float inv = 1.0f / sqrtf(ss[hh] / static_cast<float>(d) + eps);
    T* cache = kind == 0
                   ? nullptr
                   : static_cast<T*>(a.key_pool) +
                         ((static_cast<int64_t>(h0 + hh) * a.num_blocks + block) * bs + offset) * d;
#pragma unroll
    for (int i = 0; i < kHp; ++i) {
      const int j = lane + 32 * i;
      const float lo = wlo[i] * (v[hh][i] * inv), hi = whi[i] * (v[hh][i + kHp] * inv);
      const float r0 = lo * c[i] - hi * sn[i], r1 = hi * c[i] + lo * sn[i];
      x[hh * d + j] = r0;
      x[hh * d + j + half] = r1;
      if (cache) {
        cache[j] = from_f32<T>(r0);
        cache[j + half] = from_f32<T>(r1);
      }
    }
  }
}

// The one-block-per-token kernel for bf16 inputs (QkNormRopeKvArgs::q16, the GEMM decoder stack)
// and a bf16 cache: lane l holds elements 2l + 64p + {0, 1} of each head (bf16x2 loads and
// stores, 32-bit offsets), whose RoPE partners (+ d / 2) are the same lane's p + kPer / 4, so
// head_dim 128 or 256. The per-element arithmetic is the f32 kernel's; the per-head sum of
// squares is summed in this lane order. The ncu profile of the f32-layout kernel on bf16 input
// (session 13) was issue-bound: 16 two-byte loads and 64-bit offsets per lane and head.
template <typename W, int kPer>
__global__ void qk_norm_rope_kv_bf16_kernel(const QkNormRopeKvArgs a) {
  constexpr int kHeads = 4, d = kPer * 32, half = d / 2, kPairs = kPer / 2, kHalf = kPairs / 2;
  using bf2 = __nv_bfloat162;
  const auto [token, lane, kind, h0, slot, pos] = token_warp(a);
  const int hq = static_cast<int>(a.hq), hkv = static_cast<int>(a.hkv);
  const int bs = static_cast<int>(a.block_size);
  const int block = slot / bs, offset = slot % bs;
  float2 c[kHalf], sn[kHalf], wlo[kHalf], whi[kHalf];
  if (kind < 2) {
    const W* w = static_cast<const W*>(kind == 0 ? a.q_norm : a.k_norm);
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const int j = 2 * lane + 64 * i;
      c[i] = *reinterpret_cast<const float2*>(a.cos + pos * half + j);
      sn[i] = *reinterpret_cast<const float2*>(a.sin + pos * half + j);
      wlo[i] = make_float2(to_f32(w[j]), to_f32(w[j + 1]));
      whi[i] = make_float2(to_f32(w[j + half]), to_f32(w[j + half + 1]));
    }
  }
  pdl_wait();
  pdl_trigger();
  const int head0 = token * (kind == 0 ? hq : hkv) + h0;  // < 2^31: the host checks n x heads
  const int64_t row = a.qkv16_row ? a.qkv16_row : int64_t{kind == 0 ? hq : hkv} * d;
  const auto* src =
      static_cast<const __nv_bfloat16*>(kind == 0 ? a.q16 : kind == 1 ? a.k16 : a.v16) +
      token * row + int64_t{h0} * d;
  bf2 raw[kHeads][kPairs];
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh)
#pragma unroll
    for (int p = 0; p < kPairs; ++p)
      raw[hh][p] = *reinterpret_cast<const bf2*>(src + hh * d + 2 * lane + 64 * p);
  // A head's row in the pool (pools of a kv head are within int32: attention's TileCopy check).
  auto pool_row = [&](void* pool, int head) {
    return static_cast<__nv_bfloat16*>(pool) +
           (static_cast<int64_t>(head) * a.num_blocks + block) * bs * d +
           static_cast<int64_t>(offset) * d;
  };
  if (kind == 2) {  // v heads: straight to the cache
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) {
      __nv_bfloat16* dst = pool_row(a.value_pool, h0 + hh);
#pragma unroll
      for (int p = 0; p < kPairs; ++p)
        *reinterpret_cast<bf2*>(dst + 2 * lane + 64 * p) = raw[hh][p];
    }
    return;
  }
  float2 v[kHeads][kPairs];
  float ss[kHeads];
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh) {
    ss[hh] = 0.0f;
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      v[hh][p] = __bfloat1622float2(raw[hh][p]);
      ss[hh] += v[hh][p].x * v[hh][p].x;
      ss[hh] += v[hh][p].y * v[hh][p].y;
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1)
#pragma unroll
    for (int hh = 0; hh < kHeads; ++hh) ss[hh] += __shfl_xor_sync(0xffffffffu, ss[hh], off);
  const float eps = static_cast<float>(a.eps), q16_scale = static_cast<float>(a.q16_scale);
  auto* const q16 = static_cast<__nv_bfloat16*>(a.q16_out);
#pragma unroll
  for (int hh = 0; hh < kHeads; ++hh) {
    const float inv = 1.0f / sqrtf(ss[hh] / static_cast<float>(d) + eps);
    __nv_bfloat16* cache = kind == 1 ? pool_row(a.key_pool, h0 + hh) : nullptr;
    float* x = kind == 0 ? (q16 ? nullptr : a.q) : a.k;  // f32 outputs, when wanted
    const int64_t at = static_cast<int64_t>(head0 + hh) * d;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const int j = 2 * lane + 64 * i;
      const float2 lo_in = v[hh][i], hi_in = v[hh][i + kHalf];
      float2 r0, r1;
      {
        const float lo = wlo[i].x * (lo_in.x * inv), hi = whi[i].x * (hi_in.x * inv);
        r0.x = lo * c[i].x - hi * sn[i].x;
        r1.x = hi * c[i].x + lo * sn[i].x;
      }
      {
        const float lo = wlo[i].y * (lo_in.y * inv), hi = whi[i].y * (hi_in.y * inv);
        r0.y = lo * c[i].y - hi * sn[i].y;
        r1.y = hi * c[i].y + lo * sn[i].y;
      }
      if (x) {
        *reinterpret_cast<float2*>(x + at + j) = r0;
        *reinterpret_cast<float2*>(x + at + j + half) = r1;
      }
      if (kind == 0 && q16) {
        *reinterpret_cast<bf2*>(q16 + at + j) =
            __floats2bfloat162_rn(r0.x * q16_scale, r0.y * q16_scale);
        *reinterpret_cast<bf2*>(q16 + at + j + half) =
            __floats2bfloat162_rn(r1.x * q16_scale, r1.y * q16_scale);
      }
      if (cache) {
        *reinterpret_cast<bf2*>(cache + j) = __floats2bfloat162_rn(r0.x, r0.y);
        *reinterpret_cast<bf2*>(cache + j + half) = __floats2bfloat162_rn(r1.x, r1.y);
      }
    }
  }
}

template <typename W, typename T>
bool launch_qk_norm_rope_kv_token(const QkNormRopeKvArgs& a, cudaStream_t s) {
  if (!qk_norm_token_kernel_applies(a)) return false;
  const int64_t warps = (a.hq + 2 * a.hkv) / 4;
  const auto grid = static_cast<unsigned>(a.n);
  const auto threads = static_cast<unsigned>(warps * 32);
  switch (a.head_dim) {
    case 64:
      launch_pdl(qk_norm_rope_kv_token_kernel<W, T, 2>, grid, threads, 0, s, a);
      return true;
    case 128:
      launch_pdl(qk_norm_rope_kv_token_kernel<W, T, 4>, grid, threads, 0, s, a);
      return true;
    case 256:
      launch_pdl(qk_norm_rope_kv_token_kernel<W, T, 8>, grid, threads, 0, s, a);
      return true;
    default:
      return false;
  }
}

template <typename W>
void qk_norm_rope_kv_for(const QkNormRopeKvArgs& a, cudaStream_t s) {
  if (a.q16 || a.k16 || a.v16) {
    if (!qk_norm_bf16_kernel_applies(a))
      throw std::logic_error("qk_norm_rope_kv: bf16 inputs outside the bf16 kernel's shapes");
    const auto grid = static_cast<unsigned>(a.n);
    const auto threads = static_cast<unsigned>((a.hq + 2 * a.hkv) / 4 * 32);
    if (a.head_dim == 128) return launch_pdl(qk_norm_rope_kv_bf16_kernel<W, 4>, grid, threads, 0, s, a);
    return launch_pdl(qk_norm_rope_kv_bf16_kernel<W, 8>, grid, threads, 0, s, a);
  }
  switch (a.cache_type) {
    case ElemType::F32:
      if (launch_qk_norm_rope_kv_token<W, float>(a, s)) return;
      break;
    case ElemType::F16:
      if (launch_qk_norm_rope_kv_token<W, __half>(a, s)) return;
      break;
    case ElemType::BF16:
      if (launch_qk_norm_rope_kv_token<W, __nv_bfloat16>(a, s)) return;
      break;
  }
  if (!a.k || a.q16_out)
    throw std::logic_error("qk_norm_rope_kv: no k or a bf16 q output outside the bf16 kernel");
  constexpr int kWarps = 8;
  const unsigned grid = blocks_for(a.n * (a.hq + 2 * a.hkv), kWarps);
  switch (a.cache_type) {
    case ElemType::F32:
      return launch_pdl(qk_norm_rope_kv_kernel<W, float>, grid, kWarps * 32, 0, s, a);
    case ElemType::F16:
      return launch_pdl(qk_norm_rope_kv_kernel<W, __half>, grid, kWarps * 32, 0, s, a);
    case ElemType::BF16:
      return launch_pdl(qk_norm_rope_kv_kernel<W, __nv_bfloat16>, grid, kWarps * 32, 0, s, a);
  }
}

// Argmax as one 64-bit key per candidate: the value's bits made order-preserving as unsigned
// (any value above -inf maps above 0) in the high word, the complement of the index in the low
// word, so that the larger key is the larger value and, among equal values, the lower index.
// 0 means no candidate (every value -inf or NaN).
__device__ __forceinline__ unsigned long long argmax_key(float v, int64_t j) {
  const unsigned bits = __float_as_uint(v);
  const unsigned ordered = bits & 0x80000000u ? ~bits : bits | 0x80000000u;
  return (static_cast<unsigned long long>(ordered) << 32) |
         (0xffffffffu - static_cast<unsigned>(j));
}

// Grid (blocks per row, rows): each block takes a slice of its row, keeps its best key (NaN and
// -inf are never candidates) and merges it into keys[row] with one atomicMax.
__global__ void argmax_rows_kernel(const float* __restrict__ x, unsigned long long* keys,
                                   int64_t width) {
  __shared__ unsigned long long best[32];
  const float* row = x + static_cast<int64_t>(blockIdx.y) * width;
  const int64_t per = (width + gridDim.x - 1) / gridDim.x;
  const int64_t lo = static_cast<int64_t>(blockIdx.x) * per, hi = min(width, lo + per);
  unsigned long long k = 0;
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    float e = row[j];
    if (e == 0.0f) e = 0.0f;  // -0 ties with +0 (the host compares values, not bits)
    if (e > -INFINITY) k = max(k, argmax_key(e, j));
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, off));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) best[warp] = k;
  __syncthreads();
  if (warp == 0) {
    k = lane < static_cast<int>(blockDim.x / 32) ? best[lane] : 0;
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, off));
    if (lane == 0 && k != 0) atomicMax(keys + blockIdx.y, k);
  }
}

}  // namespace

void launch_add_rmsnorm(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AddRmsNormArgs*>(p);
  switch (a.weight_type) {
    case ElemType::F32:
      return add_rmsnorm_typed<float>(a, s);
    case ElemType::F16:
      return add_rmsnorm_typed<__half>(a, s);
    case ElemType::BF16:
      return add_rmsnorm_typed<__nv_bfloat16>(a, s);
  }
}

bool qk_norm_bf16_kernel_applies(const QkNormRopeKvArgs& a) {
  return qk_norm_token_kernel_applies(a) && (a.head_dim == 128 || a.head_dim == 256) &&
         a.cache_type == ElemType::BF16;
}

bool qk_norm_token_kernel_applies(const QkNormRopeKvArgs& a) {
  const int64_t warps = (a.hq + 2 * a.hkv) / 4;
  return a.by_token && a.hq % 4 == 0 && a.hkv % 4 == 0 && warps * 32 <= 1024 &&
         a.n <= 2147483647 && (a.head_dim == 64 || a.head_dim == 128 || a.head_dim == 256);
}

void launch_qk_norm_rope_kv(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const QkNormRopeKvArgs*>(p);
  switch (a.norm_type) {
    case ElemType::F32:
      return qk_norm_rope_kv_for<float>(a, s);
    case ElemType::F16:
      return qk_norm_rope_kv_for<__half>(a, s);
    case ElemType::BF16:
      return qk_norm_rope_kv_for<__nv_bfloat16>(a, s);
  }
}

void launch_argmax_rows(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const ArgmaxArgs*>(p);
  cudaMemsetAsync(a.keys, 0, static_cast<size_t>(a.rows) * sizeof(unsigned long long), s);
  // Slices of at least 2048 values, at most 64 per row: a single row (batch-1 decode) is spread
  // over many multiprocessors instead of streaming through one.
  const int64_t slices = std::clamp<int64_t>(a.width / 2048, 1, 64);
  const dim3 grid(static_cast<unsigned>(slices), static_cast<unsigned>(a.rows));
  argmax_rows_kernel<<<grid, 256, 0, s>>>(a.x, a.keys, a.width);
}

}  // namespace infera::cuda
