// The wgmma prefill attention's (attention_flash_wgmma_kernel.cuh) tile pieces: its shared-memory
// layout, the K/V copies of a tile (paged through a block table, or packed: the encoders' rows),
// the queries' staging, the softmax step and P V, and, for the packed encoders, RoPE applied as
// the queries are staged and to each landed key tile (PackedWgmmaArgs::rope_cos).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_flash_tile.cuh"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mma_tile.cuh"
#include "backend/cuda/rope_rotate.cuh"
#include "backend/cuda/wgmma.cuh"

namespace infera::cuda::flash_wgmma {

using namespace flash;  // attention_flash_tile.cuh: kKeys (64), cp.async, softmax step

constexpr int kWgVectors = 64;  // wgmma M: query vectors a warpgroup

template <int D>
constexpr int kQBytes = kWgVectors* D * 2;  // one warpgroup's queries
template <int D>
constexpr int kTileBytes = kKeys* D * 2;  // one K or V tile

// Byte offset of 16-byte chunk c (elements 8c..8c+7) of row r in a swizzled [D/64][rows][128 B]
// tile of `rows` rows.
__device__ __forceinline__ int swizzled(int r, int c, int rows) {
  return (c / 8) * rows * 128 + r * 128 + (((c % 8) ^ (r % 8)) << 4);
}

// The K/V copies of a tile by NT threads: thread i copies 16-byte chunk i % (D / 8) of keys
// i / (D / 8) + k NT / (D / 8) of the tile. Paged (kPacked false): a cache whose block size is a
// power of two and whose per-head pool plane (num_blocks x block_size x D elements) fits int32
// (the host checks both); everything but the keys' block ids is computed once (ncu on the H200
// put the per-key paged address arithmetic at ~40 % of the kernel's instructions when done per
// tile in 64 bits), and the ids are fetched a tile ahead (fetch_ids) so that issuing the copies
// does not wait for the block table. Packed (the encoders' [T, hkv, D] rows, no block table): key
// t of the sequence is row row_begin + t, t * hkv * D elements past the sequence's first row (the
// host checks T * hkv * D fits int32).
template <typename T, int D, int NT, bool kPacked = false>
struct TileCopy {
  static constexpr int kChunks = D / 8, kPer = kKeys * kChunks / NT, kStride = NT / kChunks;
  static_assert(kKeys * kChunks % NT == 0 && NT % kChunks == 0 && kStride % 8 == 0);
  int64_t plane;  // this thread's chunk of kv head g's plane in the pools, or of the sequence's
                  // first row (packed), in elements
  int row;        // the sequence's block-table row (first entry); packed: the row stride hkv * D
  int shift, mask, j0, dst0;  // log2(block size), block size - 1, first key, its smem offset
  int id[kPer];               // the physical block of each of this thread's keys (0 past key_hi)
  // (Pointers are re-derived from the kernel's parameters where used: registers are the 128-vector
  // tile's limit at 2 blocks an SM.)

  // (Set by init, where the kernel's schedule first needs it: the paged kernel's registers are
  // tight, so its live ranges start where they always did.)
  __device__ __forceinline__ void init(const AttentionArgs& a, int b, int g, int row_begin) {
    const int c = threadIdx.x % kChunks;
    if constexpr (kPacked) {
      row = static_cast<int>(a.hkv) * D;
      plane = (static_cast<int64_t>(row_begin) * a.hkv + g) * D + c * 8;
      shift = mask = 0;
    } else {
      const int bs = static_cast<int>(a.block_size);
      row = b * static_cast<int>(a.max_blocks);
      plane = static_cast<int64_t>(g) * a.num_blocks * bs * D + c * 8;
      shift = __ffs(bs) - 1;
      mask = bs - 1;
    }
    j0 = threadIdx.x / kChunks;
    // Keys j0 + k kStride share j0's row within the 8-row swizzle atom (kStride % 8 == 0).
    dst0 = (c / 8) * kKeys * 128 + j0 * 128 + (((c % 8) ^ (j0 % 8)) << 4);
  }
  __device__ __forceinline__ void fetch_ids(const AttentionArgs& a, int t0, int key_hi) {
    if constexpr (!kPacked) {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int t = t0 + j0 + i * kStride;
        id[i] = t < key_hi ? a.block_table[row + (t >> shift)] : 0;
      }
    }
  }
  // Element offset of key t (this thread's i-th of its tile) from plane.
  __device__ __forceinline__ int key_off(int i, int t) const {
    if constexpr (kPacked)
      return t * row;
    else
      return ((id[i] << shift) | (t & mask)) * D;
  }
  // Keys and values [t0, t0 + kKeys) (zeros past key_hi) into one stage, swizzled.
  __device__ __forceinline__ void issue_tile(const AttentionArgs& a, int t0, int key_hi,
                                             unsigned char* ks, unsigned char* vs) const {
    const T* const kplane = static_cast<const T*>(a.keys) + plane;
    const T* const vplane = static_cast<const T*>(a.values) + plane;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int t = t0 + j0 + i * kStride;
      const bool ok = t < key_hi;
      const int off = ok ? key_off(i, t) : 0;
      const int dst = dst0 + i * kStride * 128;
      cp_async16(ks + dst, kplane + off, ok ? 16 : 0);
      cp_async16(vs + dst, vplane + off, ok ? 16 : 0);
    }
  }
  // The pipelined loop's halves: K and V of different tiles in one copy group, so a tile's
  // offsets (from the ids) are computed for its K and kept for its V a tile later; -1: past key_hi.
  __device__ __forceinline__ void offsets(int t0, int key_hi, int (&off)[kPer]) const {
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int t = t0 + j0 + i * kStride;
      off[i] = t < key_hi ? key_off(i, t) : -1;
    }
  }
  __device__ __forceinline__ void issue(const void* pool, const int (&off)[kPer],
                                        unsigned char* dst_stage) const {
    const T* const p = static_cast<const T*>(pool) + plane;
#pragma unroll
    for (int i = 0; i < kPer; ++i)
      cp_async16(dst_stage + dst0 + i * kStride * 128, p + max(off[i], 0), off[i] >= 0 ? 16 : 0);
  }
};

// The online-softmax step of softmax_tile_interleaved (attention_flash_tile.cuh), but the
// accumulators' rescale (D / 2 multiplies a lane, as many as the step's other arithmetic) is
// skipped when no row of the warp has a new maximum (every alpha exactly 1: ex2(0)), which after
// the first tiles of a causal row is the common case. The pipelined loop runs softmax_scores
// (attention_flash_tile.cuh) while P V of the previous tile is in flight, then rescale_o.
template <int D>
__device__ __forceinline__ void rescale_o(float (&o)[D / 8][4], float alpha0, float alpha1) {
  if (__all_sync(0xffffffffu, alpha0 == 1.0f && alpha1 == 1.0f)) return;  // NaN: rescaled
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    o[dt][0] *= alpha0;
    o[dt][1] *= alpha0;
    o[dt][2] *= alpha1;
    o[dt][3] *= alpha1;
  }
}
template <bool kMask, int D, int kGroups>
__device__ __forceinline__ void softmax_step(float (&s)[kGroups][4], float (&o)[D / 8][4],
                                             float& m0, float& m1, float& l0, float& l1, int t0,
                                             int key_hi, int lo0, int hi0, int lo1, int hi1,
                                             int tig) {
  float alpha0, alpha1;
  softmax_scores<kMask, kGroups>(s, m0, m1, l0, l1, alpha0, alpha1, t0, key_hi, lo0, hi0, lo1, hi1,
                                 tig);
  rescale_o<D>(o, alpha0, alpha1);
}

// O += P V for a warpgroup's kSpan keys of a tile: P in registers (16 keys an A fragment), V
// MN-major at shared address vs (its first key's row; 16 keys = two 8-row groups, 2048 bytes).
template <int D, int kSpan, typename T>
__device__ __forceinline__ void pv_product(float (&o)[D / 8][4],
                                           const uint32_t (&pa)[kSpan / 16][4], uint32_t vs, T) {
  const uint64_t dv0 = wgmma::desc_sw128(vs, kKeys * 128, 1024);
#pragma unroll
  for (int kt = 0; kt < kSpan / 16; ++kt) {
    const uint64_t dv = wgmma::desc_add(dv0, kt * 2048);
    if constexpr (D == 128)
      wgmma::rs_m64n128k16(o, pa[kt], dv, T{});
    else
      wgmma::rs_m64n64k16(o, pa[kt], dv, T{});
  }
}

// The block's kVec queries times `scale`, rounded to T, swizzled per 64 (zeros past nv), by NT
// threads.
template <typename T, int D, int kVec, int NT>
__device__ __forceinline__ void stage_queries_swizzled(const AttentionArgs& a, int row_begin, int g,
                                                       int v0, int nv, float scale,
                                                       unsigned char* qs) {
  constexpr int kQuads = D / 4;
#pragma unroll 4
  for (int i = threadIdx.x; i < kVec * kQuads; i += NT) {
    const int v = i / kQuads, e = (i % kQuads) * 4;
    float4 val = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    uint2 packed4 = make_uint2(0u, 0u);
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D + e;
      if (a.q16)
        packed4 = *reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(a.q16) + at);
      else
        val = *reinterpret_cast<const float4*>(a.q + at);
    }
    if (!a.q16) {
      packed4.x = pack2<T>(val.x * scale, val.y * scale);
      packed4.y = pack2<T>(val.z * scale, val.w * scale);
    }
    const int wg = v / kWgVectors, r = v % kWgVectors;
    *reinterpret_cast<uint2*>(qs + wg * kQBytes<D> + swizzled(r, e / 8, kWgVectors) + (e % 8) * 2) =
        packed4;
  }
}

// CudaOptions::flash_wgmma_q_prefetch: stage_queries_swizzled split into loads and stores, so
// that the block's queries are in flight while it computes its key ranges and fetches its first
// K/V tile's block ids. Why: at 8x512 a block walks ~4.5 key tiles, and its prologue was a chain
// of dependent global round trips (query_start, positions, block table, K/V) followed by the
// queries' 16 float4 loads a thread issued 4 at a time (#pragma unroll 4: 4 more round trips
// before the first wgmma). Loads [k0, k0 + kN) of a thread's kQueryLoads are issued at once into
// registers; store_queries_swizzled writes exactly what stage_queries_swizzled writes (same
// expressions, same addresses): the outputs are bit for bit the same.
template <int D, int kVec, int NT>
constexpr int kQueryLoads = kVec*(D / 4) / NT;  // float4 a thread
template <int D, int kVec, int NT, int k0, int kN>
__device__ __forceinline__ void load_queries(const AttentionArgs& a, int row_begin, int g, int v0,
                                             int nv, float4 (&qv)[kN]) {
  constexpr int kQuads = D / 4;
  static_assert(kVec * kQuads % NT == 0 && NT % kQuads == 0);
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    const int i = threadIdx.x + (k0 + k) * NT, v = i / kQuads, e = (i % kQuads) * 4;
    qv[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D + e;
      if (a.q16) {  // 4 scaled bf16, carried as the bits of x and y (store_queries_swizzled)
        const uint2 u =
            __ldg(reinterpret_cast<const uint2*>(static_cast<const __nv_bfloat16*>(a.q16) + at));
        qv[k] = make_float4(__uint_as_float(u.x), __uint_as_float(u.y), 0.0f, 0.0f);
      } else {
        qv[k] = __ldg(reinterpret_cast<const float4*>(a.q + at));
      }
    }
  }
}
template <typename T, int D, int NT, int k0, int kN>
__device__ __forceinline__ void store_queries_swizzled(const float4 (&qv)[kN], float scale,
                                                       bool raw, unsigned char* qs) {
  constexpr int kQuads = D / 4;
#pragma unroll
  for (int k = 0; k < kN; ++k) {
    const int i = threadIdx.x + (k0 + k) * NT, v = i / kQuads, e = (i % kQuads) * 4;
    const float4 val = qv[k];
    uint2 packed4;
    if (raw) {  // AttentionArgs::q16: already scaled and rounded
      packed4 = make_uint2(__float_as_uint(val.x), __float_as_uint(val.y));
    } else {
      packed4.x = pack2<T>(val.x * scale, val.y * scale);
      packed4.y = pack2<T>(val.z * scale, val.w * scale);
    }
    const int wg = v / kWgVectors, r = v % kWgVectors;
    *reinterpret_cast<uint2*>(qs + wg * kQBytes<D> + swizzled(r, e / 8, kWgVectors) + (e % 8) * 2) =
        packed4;
  }
}

// The packed block's key range: the union of its rows' key_range (positions p0..p1, a row's
// position its offset in the sequence of len rows), tile-aligned from the sequence's first row as
// block_key_ranges makes it, in closed form (key_range's lo and hi never decrease with the
// position and each row's range holds the row itself, so the union is [lo(p0), hi(p1))): the
// block's first K/V copies go out before the queries' loads and the pass over the rows.
__device__ __forceinline__ void packed_key_span(const AttentionArgs& a, int p0, int p1, int len,
                                                int& lo, int& hi) {
  int lo0, hi0, lo1, hi1;
  key_range(a, p0, len, lo0, hi0);
  key_range(a, p1, len, lo1, hi1);
  lo = min(lo0, hi1) / kKeys * kKeys;
  hi = max(lo, hi1);
}

// --- RoPE inside the packed kernel (PackedWgmmaArgs::rope_cos, rope_sin) ------------------------
// The encoder stack otherwise rotates its bf16 q and k in a kernel of their own between the q/k/v
// GEMMs and the attention (rope_stage16_kernel: a launch a layer, and a pass over q and k). Here
// the queries are rotated as they are staged, and each key tile once it has landed in shared
// memory, with rope_stage16_kernel's arithmetic (rope_rotate on the bf16 values, the queries
// times the kernel's score scale, each result rounded to bf16): the operands are the same bits.
// A row's position is its offset in its sequence (the host checks the batch's positions).
// Items: 8 (lo, hi) pairs of a row, elements 8c..8c+7 and D/2 + 8c..+7 (16-byte chunks c and
// c + D/16).

// Cos and sin of frequencies j..j+7 at position pos (tables [positions][D / 2], f32, 16-byte
// aligned rows).
template <int D>
__device__ __forceinline__ void load_rope8(const float* rope_cos, const float* rope_sin, int pos,
                                           int j, float4 (&cs)[4]) {
  const auto* c = reinterpret_cast<const float4*>(rope_cos + pos * (D / 2) + j);
  const auto* s = reinterpret_cast<const float4*>(rope_sin + pos * (D / 2) + j);
  cs[0] = __ldg(c);
  cs[1] = __ldg(c + 1);
  cs[2] = __ldg(s);
  cs[3] = __ldg(s + 1);
}

// Rotates 8 pairs of bf16 (lo: 8 elements, hi: their partners), times `scale` when kScale.
template <bool kScale>
__device__ __forceinline__ void rope8(uint4& lo, uint4& hi, const float4 (&cs)[4], float scale) {
  uint32_t l[4] = {lo.x, lo.y, lo.z, lo.w}, h[4] = {hi.x, hi.y, hi.z, hi.w};
  const float c[8] = {cs[0].x, cs[0].y, cs[0].z, cs[0].w, cs[1].x, cs[1].y, cs[1].z, cs[1].w};
  const float s[8] = {cs[2].x, cs[2].y, cs[2].z, cs[2].w, cs[3].x, cs[3].y, cs[3].z, cs[3].w};
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    // bf16 -> f32 is exact: the bits in the high half.
    const float a0 = __uint_as_float(l[p] << 16), a1 = __uint_as_float(l[p] & 0xffff0000u);
    const float b0 = __uint_as_float(h[p] << 16), b1 = __uint_as_float(h[p] & 0xffff0000u);
    float lo0, hi0, lo1, hi1;
    rope_rotate(a0, b0, c[2 * p], s[2 * p], lo0, hi0);
    rope_rotate(a1, b1, c[2 * p + 1], s[2 * p + 1], lo1, hi1);
    if constexpr (kScale) {
      lo0 *= scale, hi0 *= scale, lo1 *= scale, hi1 *= scale;
    }
    l[p] = pack2<__nv_bfloat16>(lo0, lo1);
    h[p] = pack2<__nv_bfloat16>(hi0, hi1);
  }
  lo = make_uint4(l[0], l[1], l[2], l[3]);
  hi = make_uint4(h[0], h[1], h[2], h[3]);
}

// The block's kVec queries (bf16 AttentionArgs::q16 as the q/k/v GEMM wrote them) rotated, times
// scale, swizzled per 64 (zeros past nv), by NT threads: load() at the block's start (into
// registers), store() once the key ranges are done, as load_queries / store_queries_swizzled.
// Item i: group c = i % (D / 16) of vector i / (D / 16) (a row's 4 threads read 64 contiguous
// bytes twice).
template <int D, int kVec, int NT>
struct RopeQueries {
  static constexpr int kGroups = D / 16, kItems = kVec * kGroups / NT;
  static_assert(kVec * kGroups % NT == 0);
  uint4 lo[kItems], hi[kItems];
  float4 cs[kItems][4];

  __device__ __forceinline__ void load(const AttentionArgs& a, const float* rope_cos,
                                       const float* rope_sin, int row_begin, int g, int v0,
                                       int nv) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int i = threadIdx.x + k * NT, v = i / kGroups, c = i % kGroups;
      lo[k] = hi[k] = make_uint4(0u, 0u, 0u, 0u);
      int pos = 0;
      if (v < nv) {
        int row, head;
        vector_row_head(a, row_begin, g, v0 + v, row, head);
        pos = row - row_begin;
        const auto* q = static_cast<const __nv_bfloat16*>(a.q16) +
                        (static_cast<int64_t>(row) * a.hq + head) * D + c * 8;
        lo[k] = __ldg(reinterpret_cast<const uint4*>(q));
        hi[k] = __ldg(reinterpret_cast<const uint4*>(q + D / 2));
      }
      load_rope8<D>(rope_cos, rope_sin, pos, c * 8, cs[k]);
    }
  }
  __device__ __forceinline__ void store(float scale, unsigned char* qs) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int i = threadIdx.x + k * NT, v = i / kGroups, c = i % kGroups;
      rope8<true>(lo[k], hi[k], cs[k], scale);  // zeros past nv stay zeros
      unsigned char* const q = qs + (v / kWgVectors) * kQBytes<D>;
      *reinterpret_cast<uint4*>(q + swizzled(v % kWgVectors, c, kWgVectors)) = lo[k];
      *reinterpret_cast<uint4*>(q + swizzled(v % kWgVectors, c + kGroups, kWgVectors)) = hi[k];
    }
  }
};

// A landed K stage (swizzled, kKeys rows: keys t0..) rotated in place by NT threads; load() takes
// the cos/sin of the tile's keys a tile ahead (into registers), rotate() uses them. Item i: key
// i % kKeys, group i / kKeys (a quarter-warp's 8 rows of one chunk: 8 distinct bank groups).
// Keys past key_hi (zeros) are left alone.
template <int D, int NT>
struct RopeKeys {
  static constexpr int kGroups = D / 16, kItems = kKeys * kGroups / NT;
  static_assert(kKeys * kGroups % NT == 0);
  float4 cs[kItems][4];

  __device__ __forceinline__ void load(const float* rope_cos, const float* rope_sin, int t0,
                                       int key_hi) {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int i = threadIdx.x + k * NT, t = t0 + i % kKeys;
      load_rope8<D>(rope_cos, rope_sin, t < key_hi ? t : 0, (i / kKeys) * 8, cs[k]);
    }
  }
  __device__ __forceinline__ void rotate(unsigned char* ks, int t0, int key_hi) const {
#pragma unroll
    for (int k = 0; k < kItems; ++k) {
      const int i = threadIdx.x + k * NT, j = i % kKeys, c = i / kKeys;
      if (t0 + j >= key_hi) continue;
      auto* const plo = reinterpret_cast<uint4*>(ks + swizzled(j, c, kKeys));
      auto* const phi = reinterpret_cast<uint4*>(ks + swizzled(j, c + kGroups, kKeys));
      uint4 lo = *plo, hi = *phi;
      rope8<false>(lo, hi, cs[k], 1.0f);
      *plo = lo;
      *phi = hi;
    }
  }
};

}  // namespace infera::cuda::flash_wgmma
