// Backend::decoder_stack for one decode row as one kernel: all layers of a Qwen3-style decoder in
// a single launch of one block per SM, phases separated by grid barriers.
//
// Why: at batch 1 the per-op chain is ~229 dependent kernels of ~3-5 us each (session 7's
// cudab1 profile), each a single wave that ramps up and drains while HBM idles; fusing pieces of
// it (residual_mlp, output_mlp) moved work onto the critical path and did not pay. Here nothing
// waits for a launch: every warp loads its rows of the NEXT phase's weights into registers before
// it waits at the barrier in front of that phase (weights never depend on activations), so the
// weight stream runs across the barriers, the norms and the attention.
//
// Per layer (W = the grid's warps; gw = this warp's index in the grid):
//   A. every block: xn = rmsnorm(x) * attn_norm into shared memory (redundantly: 4 KB); warp gw
//      computes q/k/v rows gw, gw + W (already in its registers) into qkv.       | barrier
//   B. block (kv head g, split s) of hkv * splits: q-norm + RoPE of the group's q heads; the block
//      whose key range holds the new position also k-norms + rotates k and writes k and v to the
//      cache; each warp walks its keys (online softmax in f32), the block merges its warps, writes
//      its split's partials, and the split that finishes last merges them into attn. | barrier
//   C. every block: attn into shared memory; warp gw: x[gw] += attn . Wo[gw].       | barrier
//   D. every block: xn = rmsnorm(x) * mlp_norm; warp gw: h[j] = silu(xn . Wg[j]) * (xn . Wu[j]) for
//      j = gw, gw + W.                                                               | barrier
//   E. every block: h into shared memory; warp gw: x[gw] += h . Wd[gw].             | barrier
// The keys a warp reads in B (all but the new one were written by earlier steps) are loaded with
// the layer's q/k/v weights. Arithmetic as the one-op kernels (f32, bf16 weights and cache); the
// summation orders differ, so results match the composition to rounding, not bit for bit.
// On by default (CudaOptions::decode_stack); docs/notes/2026-12-03/session-12-lead.md has what it
// measured.
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "backend/cuda/decode_stack.h"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mbarrier.cuh"

namespace infera::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 512, kWarps = kThreads / 32;
// Register budget per lane, in 16-byte chunks of 8 bf16 (chunk c = lane + 32 i of a row):
constexpr int kChunksD = 4;    // a row of k = hidden <= 1024
constexpr int kChunksA = 8;    // a row of k = hq * head_dim <= 2048 (o projection)
constexpr int kChunksF = 12;   // a row of k = f <= 3072 (down projection)
constexpr int kQkvRows = 2;    // q/k/v rows per warp
constexpr int kGluRows = 2;    // gate/up pairs per warp
constexpr int kMaxGroup = 4;   // q heads per kv head (the kernel's G: 2 or 4)
constexpr int kKeyPre = 2;     // keys a warp loads with the layer's q/k/v weights
constexpr int kKeyBatch = 4;   // keys a warp loads at once past those

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

struct GridBarrier {
  unsigned* counter;
  uint64_t* trace;      // DecodeStackArgs::trace
  unsigned target = 0;  // thread 0's count of arrivals to wait for
  unsigned index = 0;   // barriers passed
  __device__ __forceinline__ void mark(unsigned k, int which) {
    if (trace) trace[(static_cast<uint64_t>(k) * gridDim.x + blockIdx.x) * 2 + which] = global_ns();
  }
  __device__ __forceinline__ void arrive() {
    __syncthreads();
    if (threadIdx.x == 0) {
      mark(index, 0);
      target += gridDim.x;
      __threadfence();
      atomicAdd(counter, 1u);
    }
  }
  __device__ __forceinline__ void wait() {
    if (threadIdx.x == 0) {
      while (load_acquire(counter) < target) {
      }
      mark(index++, 1);
    }
    __syncthreads();
  }
};

// A weight chunk, read once (no L1 allocation). Volatile: the compiler keeps the loads of the
// next phase's weights after the current phase's arithmetic, so the two sets of registers are
// not live at once (it would hoist them: they alias nothing).
__device__ __forceinline__ uint4 load_weight(const uint4* p) {
  uint4 u;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p));
  return u;
}

// Chunks lane + 32 i (i < C) of a bf16 row of kc chunks (zeros past it or for an invalid row).
template <int C>
__device__ __forceinline__ void load_row(uint4 (&u)[C], const bf16* row, int kc, bool valid) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = lane + 32 * i;
    u[i] = valid && c < kc ? load_weight(reinterpret_cast<const uint4*>(row) + c)
                            : make_uint4(0, 0, 0, 0);
  }
}

// The row's dot product with v (shared memory, f32), summed over the warp (every lane gets it).
template <int C>
__device__ __forceinline__ float dot_row(const uint4 (&u)[C], const float* v, int kc) {
  const int lane = threadIdx.x % 32;
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = lane + 32 * i;
    if (c < kc) {
      float w[8];
      unpack16(u[i], w, bf16{});
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
  }
  return warp_sum(acc);
}

// Requests bytes [p, p + n) of weights into L2 (one prefetch.global.L2 per 128-byte line, spread
// over the warp's lanes; p 128-byte aligned). Nothing waits for it: the register loads that read
// the rows later find them there.
__device__ __forceinline__ void prefetch_l2_warp(const void* p, int64_t n) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = static_cast<int64_t>(threadIdx.x % 32) * 128; o < n; o += 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c + o));
}

// n floats (n % 4 == 0) written by other blocks into shared memory s; the caller synchronizes.
__device__ __forceinline__ void load_vector(const float* g, int n, float* s) {
  for (int i = threadIdx.x; i < n / 4; i += kThreads)
    reinterpret_cast<float4*>(s)[i] = __ldcg(reinterpret_cast<const float4*>(g) + i);
}

// s = rmsnorm(x) * w (x [d] in global memory, d % 4 == 0), rmsnorm's formulas; synchronizes.
__device__ __forceinline__ void load_normed(const float* x, const bf16* w, int d, float eps,
                                            float* s, float* part) {
  float sq = 0.0f;
  for (int i = threadIdx.x; i < d / 4; i += kThreads) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(x) + i);
    reinterpret_cast<float4*>(s)[i] = v;
    sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  const float inv = 1.0f / sqrtf(block_sum(sq, part) / static_cast<float>(d) + eps);
  for (int i = threadIdx.x; i < d; i += kThreads) s[i] = __bfloat162float(w[i]) * (s[i] * inv);
  __syncthreads();
}

// A head's elements per lane: lane holds [lane * E, lane * E + E) (lanes >= D hold none at
// D = 16), E bf16 values loaded as one word.
template <int D>
struct HeadLanes {
  static constexpr int E = D >= 32 ? D / 32 : 1;
  using Raw = std::conditional_t<E == 4, uint2, std::conditional_t<E == 2, unsigned, unsigned short>>;
  static __device__ __forceinline__ bool active(int lane) { return D >= 32 || lane < D; }
  static __device__ __forceinline__ Raw load(const bf16* p) {
    return __ldg(reinterpret_cast<const Raw*>(p));
  }
  static __device__ __forceinline__ void unpack(Raw r, float (&f)[E]) {
    if constexpr (E == 4) {
      f[0] = __uint_as_float(r.x << 16);
      f[1] = __uint_as_float(r.x & 0xffff0000u);
      f[2] = __uint_as_float(r.y << 16);
      f[3] = __uint_as_float(r.y & 0xffff0000u);
    } else if constexpr (E == 2) {
      f[0] = __uint_as_float(r << 16);
      f[1] = __uint_as_float(r & 0xffff0000u);
    } else {
      f[0] = __uint_as_float(static_cast<unsigned>(r) << 16);
    }
  }
};

// The lane's norm weights (bf16 w) of its elements, zeros on inactive lanes.
template <int D>
__device__ __forceinline__ void load_norm_lane(const bf16* w, float (&out)[HeadLanes<D>::E]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < HeadLanes<D>::E; ++c)
    out[c] = HeadLanes<D>::active(lane) ? __bfloat162float(w[lane * HeadLanes<D>::E + c]) : 0.0f;
}

// RMSNorm of one head (the lane's E values v, zeros on inactive lanes) with the lane's norm
// weights w, then rotate-half RoPE with the lane's table values (cs, sn: the position's cos and
// sin at element e % (D / 2)); as qk_norm_rope_kv_kernel (fused.cu).
template <int D>
__device__ __forceinline__ void norm_rope(float (&v)[HeadLanes<D>::E],
                                          const float (&w)[HeadLanes<D>::E],
                                          const float (&cs)[HeadLanes<D>::E],
                                          const float (&sn)[HeadLanes<D>::E], float eps) {
  constexpr int E = HeadLanes<D>::E, kHalf = D / 2, kPartner = kHalf / E;
  const int lane = threadIdx.x % 32;
  const bool on = HeadLanes<D>::active(lane);
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < E; ++c) ss += v[c] * v[c];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
#pragma unroll
  for (int c = 0; c < E; ++c) {
    const int e = lane * E + c;
    const float n = w[c] * (v[c] * inv);
    const float p = __shfl_xor_sync(0xffffffffu, n, kPartner);  // element e +- D / 2
    if (on) v[c] = e < kHalf ? n * cs[c] - p * sn[c] : n * cs[c] + p * sn[c];
  }
}

// D: head_dim; G: the largest GQA group it handles (2 or 4: fewer registers for 2); S: the o
// projection's and the MLP's weight rows of each block stream into shared memory by bulk copies
// issued at the layer's start (DecodeStackArgs::smem_weights), instead of into registers one
// barrier ahead of their phase.
template <int D, int G, bool S>
__global__ void __launch_bounds__(kThreads, 1) decode_stack_kernel(const DecodeStackArgs a) {
  using HL = HeadLanes<D>;
  constexpr int E = HL::E;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  __shared__ __align__(8) uint64_t weight_bars[3];  // S: o rows, gate/up rows, down rows
  __shared__ float part[kWarps];
  __shared__ int last_split;
  const int d = static_cast<int>(a.d), f = static_cast<int>(a.f), hq = static_cast<int>(a.hq),
            hkv = static_cast<int>(a.hkv), group = hq / hkv, splits = static_cast<int>(a.splits);
  const int qw = hq * D, kvw = hkv * D, rows_qkv = qw + 2 * kvw;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gw = blockIdx.x * kWarps + warp, nw = gridDim.x * kWarps;
  const float eps = static_cast<float>(a.eps), scale = static_cast<float>(a.scale);
  // Shared memory: the phase's vector (xn, attn or h), or in B the warps' softmax states; then
  // the group's rotated queries and the new key and value.
  const int states = kWarps * kMaxGroup * (D + 2);
  const int vec_floats = max(max(max(d, qw), f), states);
  // S: block b's weight rows first: o rows b + nb k ([n_o][qw]), gate then up rows b + nb k
  // ([n_gu][d] each), down rows b + nb k ([n_dn][f]); nb = the grid.
  const int nb = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const int n_o = S ? (d - b + nb - 1) / nb : 0, n_gu = S ? (f - b + nb - 1) / nb : 0;
  const int max_o = S ? (d + nb - 1) / nb : 0, max_gu = S ? (f + nb - 1) / nb : 0;
  bf16* s_o = reinterpret_cast<bf16*>(smem_bytes);
  bf16* s_g = s_o + static_cast<int64_t>(max_o) * qw;
  bf16* s_u = s_g + static_cast<int64_t>(max_gu) * d;
  bf16* s_d = s_u + static_cast<int64_t>(max_gu) * d;
  float* smem = reinterpret_cast<float*>(s_d + static_cast<int64_t>(max_o) * f);
  float* svec = smem;
  float* sq = smem + vec_floats;  // [kMaxGroup][D]
  float* snk = sq + kMaxGroup * D;
  float* snv = snk + D;

  // The step's row: its position, cache slot and the keys it attends to.
  const int pos = a.positions[0], slot = a.slots[0];
  const int len = min(pos + 1, a.seq_lens[0]);
  const int bs = static_cast<int>(a.block_size);
  // This block's attention work item: kv head g, split sp of the keys [lo, hi).
  const bool has_item = static_cast<int>(blockIdx.x) < hkv * splits;
  const int g = blockIdx.x % hkv, sp = blockIdx.x / hkv;
  const int per = (len + splits - 1) / splits;
  const int lo = has_item ? min(len, sp * per) : 0, hi = has_item ? min(len, lo + per) : 0;
  auto key_at = [&](int t) -> int64_t {  // element offset of key t of head g in the pools
    const int blk = t / bs;
    const int64_t block = a.block_table[blk];
    return ((g * a.num_blocks + block) * a.block_size + (t - blk * bs)) * D;
  };
  const bool lane_on = HL::active(lane);
  // The lane's RoPE values at the step's position (the same in every layer).
  float rope_cos[E], rope_sin[E];
#pragma unroll
  for (int c = 0; c < E; ++c) {
    const int64_t j = static_cast<int64_t>(pos) * (D / 2) + (lane * E + c) % (D / 2);
    rope_cos[c] = lane_on ? a.cos[j] : 0.0f;
    rope_sin[c] = lane_on ? a.sin[j] : 0.0f;
  }
  // The pool offsets of the keys this warp preloads (the same in every layer: one block table).
  int64_t pre_at[kKeyPre];
#pragma unroll
  for (int j = 0; j < kKeyPre; ++j) {
    const int t = lo + warp + kWarps * j;
    pre_at[j] = t < hi && t != pos ? key_at(t) + lane * E : -1;
  }

  auto qkv_row = [&](const DecodeStackLayer& L, int r) {
    return r < qw         ? static_cast<const bf16*>(L.wq) + static_cast<int64_t>(r) * d
           : r < qw + kvw ? static_cast<const bf16*>(L.wk) + static_cast<int64_t>(r - qw) * d
                          : static_cast<const bf16*>(L.wv) + static_cast<int64_t>(r - qw - kvw) * d;
  };
  GridBarrier barrier{a.sync, a.trace};
  const unsigned ends = 5 * static_cast<unsigned>(a.num_layers) - 1;  // the start / end slot
  if (tid == 0) barrier.mark(ends, 0);
  uint4 wqkv[kQkvRows][kChunksD];
  typename HL::Raw kpre[kKeyPre] = {}, vpre[kKeyPre] = {};
  // The layer's q/k/v rows of this warp and the first keys it will read, into registers.
  auto load_layer_start = [&](const DecodeStackLayer& L) {
#pragma unroll
    for (int i = 0; i < kQkvRows; ++i) {
      const int r = gw + i * nw;
      load_row(wqkv[i], qkv_row(L, r), d / 8, r < rows_qkv);
    }
#pragma unroll
    for (int j = 0; j < kKeyPre; ++j)
      if (pre_at[j] >= 0 && lane_on) {
        kpre[j] = HL::load(static_cast<const bf16*>(L.keys) + pre_at[j]);
        vpre[j] = HL::load(static_cast<const bf16*>(L.values) + pre_at[j]);
      }
    if constexpr (S) {
      // Every warp of the block is past its last read of these rows (the barrier's arrival
      // synchronized the block); the bulk copies write through the async proxy.
      if (tid == 0) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        const auto row_o = static_cast<uint32_t>(qw) * 2, row_d = static_cast<uint32_t>(d) * 2,
                   row_f = static_cast<uint32_t>(f) * 2;
        mbar_expect_tx(&weight_bars[0], n_o * row_o);
        mbar_expect_tx(&weight_bars[1], 2 * n_gu * row_d);
        mbar_expect_tx(&weight_bars[2], n_o * row_f);
        for (int k = 0; k < n_o; ++k) {
          const int64_t r = b + static_cast<int64_t>(nb) * k;
          bulk_copy_g2s(s_o + static_cast<int64_t>(k) * qw, static_cast<const bf16*>(L.wo) + r * qw,
                        row_o, &weight_bars[0]);
        }
        for (int k = 0; k < n_gu; ++k) {
          const int64_t j = b + static_cast<int64_t>(nb) * k;
          bulk_copy_g2s(s_g + static_cast<int64_t>(k) * d, static_cast<const bf16*>(L.wg) + j * d,
                        row_d, &weight_bars[1]);
          bulk_copy_g2s(s_u + static_cast<int64_t>(k) * d, static_cast<const bf16*>(L.wu) + j * d,
                        row_d, &weight_bars[1]);
        }
        for (int k = 0; k < n_o; ++k) {
          const int64_t r = b + static_cast<int64_t>(nb) * k;
          bulk_copy_g2s(s_d + static_cast<int64_t>(k) * f, static_cast<const bf16*>(L.wd) + r * f,
                        row_f, &weight_bars[2]);
        }
      }
    }
  };
  // The layer table in shared memory: the phases read their pointers there, not from global
  // memory between a barrier's arrival and its wait.
  DecodeStackLayer* layers = reinterpret_cast<DecodeStackLayer*>(snv + D);
  {
    const auto* src = reinterpret_cast<const uint64_t*>(a.layers);
    auto* dst = reinterpret_cast<uint64_t*>(layers);
    const int words = static_cast<int>(a.num_layers) * static_cast<int>(sizeof(DecodeStackLayer) / 8);
    for (int i = tid; i < words; i += kThreads) dst[i] = src[i];
    if (S && tid == 0) {
      for (uint64_t& bar : weight_bars) mbar_init(&bar, 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
  }
  load_layer_start(layers[0]);

  for (int l = 0; l < static_cast<int>(a.num_layers); ++l) {
    // Pointers read where used (L1 hits), not held in registers across the layer.
    const DecodeStackLayer& L = layers[l];
    if (!S && a.l2_prefetch) {
      // This warp's rows of the layer's o, gate/up and down weights, in the order the phases
      // read them, then its q/k/v rows of the next layer: HBM streams them while the layer's
      // chain of norms, attention and barriers runs (it would otherwise idle there).
      if (gw < d) prefetch_l2_warp(static_cast<const bf16*>(L.wo) + static_cast<int64_t>(gw) * qw, qw * 2);
#pragma unroll
      for (int i = 0; i < kGluRows; ++i) {
        const int j = gw + i * nw;
        if (j < f) {
          prefetch_l2_warp(static_cast<const bf16*>(L.wg) + static_cast<int64_t>(j) * d, d * 2);
          prefetch_l2_warp(static_cast<const bf16*>(L.wu) + static_cast<int64_t>(j) * d, d * 2);
        }
      }
      if (gw < d) prefetch_l2_warp(static_cast<const bf16*>(L.wd) + static_cast<int64_t>(gw) * f, f * 2);
      if (l + 1 < static_cast<int>(a.num_layers))
#pragma unroll
        for (int i = 0; i < kQkvRows; ++i) {
          const int r = gw + i * nw;
          if (r < rows_qkv) prefetch_l2_warp(qkv_row(layers[l + 1], r), d * 2);
        }
    }
    // --- A: norm + q/k/v -------------------------------------------------------------------
    load_normed(a.x, static_cast<const bf16*>(L.attn_norm), d, eps, svec, part);
#pragma unroll
    for (int i = 0; i < kQkvRows; ++i) {
      const int r = gw + i * nw;
      if (r < rows_qkv) {
        const float v = dot_row(wqkv[i], svec, d / 8);
        if (lane == 0) a.qkv[r] = v;
      }
    }
    // The q/k norm weights of the heads this warp normalizes in B, while the barrier completes.
    barrier.arrive();
    float qk_w[E];
    load_norm_lane<D>(static_cast<const bf16*>(warp < group ? L.q_norm : L.k_norm), qk_w);
    barrier.wait();

    // --- B: attention ----------------------------------------------------------------------
    if (has_item) {
      if (warp < group) {  // q head g * group + warp: norm, rotate, scale
        const int h = g * group + warp;
        float v[E];
#pragma unroll
        for (int c = 0; c < E; ++c) v[c] = lane_on ? __ldcg(a.qkv + h * D + lane * E + c) : 0.0f;
        norm_rope<D>(v, qk_w, rope_cos, rope_sin, eps);
        if (lane_on)
#pragma unroll
          for (int c = 0; c < E; ++c) sq[warp * D + lane * E + c] = v[c] * scale;
      }
      if (pos >= lo && pos < hi && (warp == group || warp == group + 1)) {
        // The new key (normed, rotated) and value: to the cache, and as the cache holds them
        // (bf16) to shared memory for this block's own reads.
        const bool is_key = warp == group;
        const int src = (is_key ? qw : qw + kvw) + g * D;
        float v[E];
#pragma unroll
        for (int c = 0; c < E; ++c) v[c] = lane_on ? __ldcg(a.qkv + src + lane * E + c) : 0.0f;
        if (is_key) norm_rope<D>(v, qk_w, rope_cos, rope_sin, eps);
        const int64_t at = ((g * a.num_blocks + slot / bs) * a.block_size + slot % bs) * D;
        bf16* pool = static_cast<bf16*>(is_key ? L.keys : L.values);
        float* sn = is_key ? snk : snv;
        if (lane_on)
#pragma unroll
          for (int c = 0; c < E; ++c) {
            const bf16 b = __float2bfloat16_rn(v[c]);
            pool[at + lane * E + c] = b;
            sn[lane * E + c] = __bfloat162float(b);
          }
      }
      __syncthreads();
      float qv[G][E], m[G], lsum[G], acc[G][E];
#pragma unroll
      for (int i = 0; i < G; ++i) {
#pragma unroll
        for (int c = 0; c < E; ++c) {
          qv[i][c] = i < group && lane_on ? sq[i * D + lane * E + c] : 0.0f;
          acc[i][c] = 0.0f;
        }
        m[i] = -INFINITY;
        lsum[i] = 0.0f;
      }
      auto consume = [&](const float (&kf)[E], const float (&vf)[E]) {
#pragma unroll
        for (int i = 0; i < G; ++i) {
          if (i < group) {
            float s = 0.0f;
#pragma unroll
            for (int c = 0; c < E; ++c) s = fmaf(qv[i][c], kf[c], s);
            s = warp_sum(s);
            const float mn = fmaxf(m[i], s);
            const float corr = expf(m[i] - mn), p = expf(s - mn);
            lsum[i] = lsum[i] * corr + p;
#pragma unroll
            for (int c = 0; c < E; ++c) acc[i][c] = fmaf(acc[i][c], corr, p * vf[c]);
            m[i] = mn;
          }
        }
      };
      auto take = [&](int t, typename HL::Raw kr, typename HL::Raw vr) {
        float kf[E], vf[E];
        if (t == pos) {
#pragma unroll
          for (int c = 0; c < E; ++c) {
            kf[c] = lane_on ? snk[lane * E + c] : 0.0f;
            vf[c] = lane_on ? snv[lane * E + c] : 0.0f;
          }
        } else if (lane_on) {
          HL::unpack(kr, kf);
          HL::unpack(vr, vf);
        } else {
#pragma unroll
          for (int c = 0; c < E; ++c) kf[c] = vf[c] = 0.0f;
        }
        consume(kf, vf);
      };
#pragma unroll
      for (int j = 0; j < kKeyPre; ++j) {
        const int t = lo + warp + kWarps * j;
        if (t < hi) take(t, kpre[j], vpre[j]);
      }
      // Longer spans: the rest a batch of keys at a time.
      for (int t0 = lo + warp + kWarps * kKeyPre; t0 < hi; t0 += kWarps * kKeyBatch) {
        typename HL::Raw kraw[kKeyBatch] = {}, vraw[kKeyBatch] = {};
#pragma unroll
        for (int j = 0; j < kKeyBatch; ++j) {
          const int t = t0 + kWarps * j;
          if (t < hi && t != pos && lane_on) {
            const int64_t at = key_at(t) + lane * E;
            kraw[j] = HL::load(static_cast<const bf16*>(L.keys) + at);
            vraw[j] = HL::load(static_cast<const bf16*>(L.values) + at);
          }
        }
#pragma unroll
        for (int j = 0; j < kKeyBatch; ++j) {
          const int t = t0 + kWarps * j;
          if (t < hi) take(t, kraw[j], vraw[j]);
        }
      }
      // The warps' states into shared memory (svec is free in B), merged per (head, element).
      float* st = svec;  // [kWarps][kMaxGroup][2 + D]
#pragma unroll
      for (int i = 0; i < G; ++i) {
        if (i < group) {
          float* s = st + (warp * kMaxGroup + i) * (D + 2);
          if (lane == 0) {
            s[0] = m[i];
            s[1] = lsum[i];
          }
          if (lane_on)
#pragma unroll
            for (int c = 0; c < E; ++c) s[2 + lane * E + c] = acc[i][c];
        }
      }
      __syncthreads();
      if (tid < group * D) {
        const int i = tid / D, e = tid % D, h = g * group + i;
        float mx = -INFINITY;
        for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, st[(w * kMaxGroup + i) * (D + 2)]);
        float ls = 0.0f, o = 0.0f;
        if (mx != -INFINITY)
          for (int w = 0; w < kWarps; ++w) {
            const float* s = st + (w * kMaxGroup + i) * (D + 2);
            const float fw = s[0] == -INFINITY ? 0.0f : expf(s[0] - mx);
            ls += fw * s[1];
            o += fw * s[2 + e];
          }
        const int64_t vec = static_cast<int64_t>(sp) * hq + h;
        if (e == 0) {
          a.partial_ml[2 * vec] = mx;
          a.partial_ml[2 * vec + 1] = ls;
        }
        a.partial_out[vec * D + e] = o;
      }
      // The split that finishes last merges all of them (merge_splits_if_last's scheme, with one
      // fence a block as the grid barrier has: the block's writes are ordered before thread 0's
      // by __syncthreads).
      __syncthreads();
      if (tid == 0) {
        __threadfence();
        last_split = atomicAdd(&a.sync[2 + g], 1u) == static_cast<unsigned>(splits - 1);
        if (last_split) {
          a.sync[2 + g] = 0;
          __threadfence();
        }
      }
      __syncthreads();
      if (last_split) {
        // Every split's (max, sum) in one round of loads, a warp per head for the weights
        // e^(m_s - M) and the denominator, then each output over the splits with its loads
        // issued together (a rolled loop would wait for one L2 round trip per split).
        const int pairs = splits * group;
        float* sm = st;                  // [group][splits] maxima, then weights
        float* sl = st + pairs;          // [group][splits] sums
        float* den = st + 2 * pairs;     // [group]
        for (int i = tid; i < pairs; i += kThreads) {
          const int s = i / group, hi2 = i % group;
          const float2 ml = __ldcg(reinterpret_cast<const float2*>(a.partial_ml) +
                                   static_cast<int64_t>(s) * hq + g * group + hi2);
          sm[hi2 * splits + s] = ml.x;
          sl[hi2 * splits + s] = ml.y;
        }
        __syncthreads();
        if (warp < group) {
          float mx = -INFINITY;
          for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, sm[warp * splits + s]);
          mx = warp_max(mx);
          float ls = 0.0f;
          for (int s = lane; s < splits; s += 32) {
            const float ms = sm[warp * splits + s];
            const float fs = ms == -INFINITY ? 0.0f : expf(ms - mx);
            sm[warp * splits + s] = fs;
            ls += fs * sl[warp * splits + s];
          }
          ls = warp_sum(ls);
          if (lane == 0) den[warp] = ls;
        }
        __syncthreads();
        if (tid < group * D) {
          const int i = tid / D, e = tid % D, h = g * group + i;
          float o = 0.0f;
#pragma unroll 16
          for (int s = 0; s < splits; ++s)
            o = fmaf(sm[i * splits + s], __ldcg(a.partial_out + (static_cast<int64_t>(s) * hq + h) * D + e), o);
          a.attn[h * D + e] = den[i] > 0.0f ? o / den[i] : 0.0f;
        }
      }
    }
    // The o projection's rows: after the attention, whose registers they would crowd (S: in
    // shared memory since the layer's start).
    barrier.arrive();
    uint4 wo[kChunksA];
    if constexpr (!S)
      load_row(wo, static_cast<const bf16*>(L.wo) + static_cast<int64_t>(gw) * qw, qw / 8, gw < d);
    barrier.wait();
    const uint32_t parity = static_cast<uint32_t>(l) & 1u;  // S: this layer's phase of the bars

    // --- C: o projection + residual --------------------------------------------------------
    // (The residual's old value is requested with the vector, not after the dot product.) S:
    // warp w takes the block's rows w, w + 16, ... (row b + nb k of the matrix).
    const int r_c = S ? b + nb * warp : gw;
    float x_old = lane == 0 && r_c < d && (!S || warp < n_o) ? __ldcg(a.x + r_c) : 0.0f;
    load_vector(a.attn, qw, svec);
    __syncthreads();
    if constexpr (S) {
      mbar_wait(&weight_bars[0], parity);
      for (int k = warp; k < n_o; k += kWarps) {
        const int r = b + nb * k;
        const float o = warp_dot_smem(s_o + static_cast<int64_t>(k) * qw, svec, qw / 8);
        if (lane == 0) a.x[r] = (k == warp ? x_old : __ldcg(a.x + r)) + o;
      }
    } else if (gw < d) {
      const float o = dot_row(wo, svec, qw / 8);
      if (lane == 0) a.x[gw] = x_old + o;
    }
    barrier.arrive();
    uint4 wg[kGluRows][kChunksD], wu[kGluRows][kChunksD];
    if constexpr (!S) {
#pragma unroll
      for (int i = 0; i < kGluRows; ++i) {
        const int j = gw + i * nw;
        load_row(wg[i], static_cast<const bf16*>(L.wg) + static_cast<int64_t>(j) * d, d / 8, j < f);
        load_row(wu[i], static_cast<const bf16*>(L.wu) + static_cast<int64_t>(j) * d, d / 8, j < f);
      }
    }
    barrier.wait();

    // --- D: norm + gate/up + SwiGLU --------------------------------------------------------
    load_normed(a.x, static_cast<const bf16*>(L.mlp_norm), d, eps, svec, part);
    if constexpr (S) {
      mbar_wait(&weight_bars[1], parity);
      for (int k = warp; k < n_gu; k += kWarps) {
        const float gv = warp_dot_smem(s_g + static_cast<int64_t>(k) * d, svec, d / 8);
        const float uv = warp_dot_smem(s_u + static_cast<int64_t>(k) * d, svec, d / 8);
        if (lane == 0) a.h[b + nb * k] = gv / (1.0f + expf(-gv)) * uv;  // as swiglu_kernel
      }
    } else {
#pragma unroll
      for (int i = 0; i < kGluRows; ++i) {
        const int j = gw + i * nw;
        if (j < f) {
          const float gv = dot_row(wg[i], svec, d / 8), uv = dot_row(wu[i], svec, d / 8);
          if (lane == 0) a.h[j] = gv / (1.0f + expf(-gv)) * uv;  // as swiglu_kernel
        }
      }
    }
    barrier.arrive();
    uint4 wd[kChunksF];
    if constexpr (!S)
      load_row(wd, static_cast<const bf16*>(L.wd) + static_cast<int64_t>(gw) * f, f / 8, gw < d);
    barrier.wait();

    // --- E: down projection + residual -----------------------------------------------------
    x_old = lane == 0 && r_c < d && (!S || warp < n_o) ? __ldcg(a.x + r_c) : 0.0f;
    load_vector(a.h, f, svec);
    __syncthreads();
    if constexpr (S) {
      mbar_wait(&weight_bars[2], parity);
      for (int k = warp; k < n_o; k += kWarps) {
        const int r = b + nb * k;
        const float o = warp_dot_smem(s_d + static_cast<int64_t>(k) * f, svec, f / 8);
        if (lane == 0) a.x[r] = (k == warp ? x_old : __ldcg(a.x + r)) + o;
      }
    } else if (gw < d) {
      const float o = dot_row(wd, svec, f / 8);
      if (lane == 0) a.x[gw] = x_old + o;
    }
    if (l + 1 < static_cast<int>(a.num_layers)) {
      barrier.arrive();
      load_layer_start(layers[l + 1]);
      barrier.wait();
    }
  }

  // Every block has passed every barrier once it arrives here: the last one resets the counters
  // for the next launch (graph replays reuse them).
  __syncthreads();
  if (tid == 0) {
    barrier.mark(ends, 1);
    __threadfence();
    if (atomicAdd(&a.sync[1], 1u) == gridDim.x - 1) {
      a.sync[0] = 0;
      a.sync[1] = 0;
    }
  }
}

// Raises (never lowers: a smaller shape must not break a larger one's launches) the kernel's
// dynamic shared memory limit to `bytes`.
template <int D, int G, bool S>
void allow_smem(int bytes) {
  static int allowed = 0;
  if (bytes <= allowed) return;
  const cudaError_t err = cudaFuncSetAttribute(
      decode_stack_kernel<D, G, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(err));
  allowed = bytes;
}

template <int D, int G, bool S>
int64_t max_blocks_for(int64_t smem) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  allow_smem<D, G, S>(static_cast<int>(smem));
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_stack_kernel<D, G, S>, kThreads,
                                                    static_cast<size_t>(smem)) != cudaSuccess)
    return 0;
  return static_cast<int64_t>(per_sm) * sms;
}

template <int D, int G>
void launch_typed(const DecodeStackArgs& a, cudaStream_t s) {
  const auto bytes = static_cast<size_t>(decode_stack_smem_bytes(a));
  if (a.smem_weights)
    decode_stack_kernel<D, G, true><<<static_cast<unsigned>(a.blocks), kThreads, bytes, s>>>(a);
  else
    decode_stack_kernel<D, G, false><<<static_cast<unsigned>(a.blocks), kThreads, bytes, s>>>(a);
}

template <int D, int G>
int64_t max_blocks_either(bool smem_weights, int64_t smem) {
  return smem_weights ? max_blocks_for<D, G, true>(smem) : max_blocks_for<D, G, false>(smem);
}

}  // namespace

DecodeStackLimits decode_stack_limits() {
  return {kThreads, 32 * 8 * kChunksD, 32 * 8 * kChunksA, 32 * 8 * kChunksF, kMaxGroup};
}

int64_t decode_stack_smem_bytes(const DecodeStackArgs& a) {
  // smem_weights: the block's o, gate/up and down rows ahead of the rest (see the kernel).
  const int64_t rows_o = (a.d + a.blocks - 1) / a.blocks, rows_gu = (a.f + a.blocks - 1) / a.blocks;
  const int64_t weights =
      a.smem_weights ? (rows_o * a.hq * a.head_dim + 2 * rows_gu * a.d + rows_o * a.f) * 2 : 0;
  const int64_t states = int64_t{kWarps} * kMaxGroup * (a.head_dim + 2);
  const int64_t vec = std::max(std::max(std::max(a.d, a.hq * a.head_dim), a.f), states);
  // ... then sq, snk, snv, then the layer table (8-byte aligned: head_dim is even).
  return weights + (vec + (kMaxGroup + 2) * a.head_dim) * 4 +
         a.num_layers * static_cast<int64_t>(sizeof(DecodeStackLayer));
}

int64_t decode_stack_max_blocks(const DecodeStackArgs& a, int64_t smem) {
  const bool g2 = a.hq / a.hkv <= 2, w = a.smem_weights != 0;
  switch (a.head_dim) {
    case 16:
      return max_blocks_either<16, 4>(w, smem);
    case 32:
      return max_blocks_either<32, 4>(w, smem);
    case 64:
      return max_blocks_either<64, 4>(w, smem);
    case 128:
      return g2 ? max_blocks_either<128, 2>(w, smem) : max_blocks_either<128, 4>(w, smem);
    default:
      return 0;
  }
}

void launch_decode_stack(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const DecodeStackArgs*>(p);
  switch (a.head_dim) {
    case 16:
      return launch_typed<16, 4>(a, s);
    case 32:
      return launch_typed<32, 4>(a, s);
    case 64:
      return launch_typed<64, 4>(a, s);
    case 128:
      return a.hq / a.hkv <= 2 ? launch_typed<128, 2>(a, s) : launch_typed<128, 4>(a, s);
    default:
      throw std::runtime_error("decode_stack: unsupported head_dim");
  }
}

}  // namespace infera::cuda
