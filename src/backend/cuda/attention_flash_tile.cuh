// The flash attention kernel's tile (attention_flash.cu): its tile sizes and shared-memory layout,
// the cp.async / ldmatrix primitives, the copies of a key/value tile, the base-2 online softmax
// step, and the interleaved tile's products and softmax step.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda::flash {

constexpr int kVectors = static_cast<int>(kMmaVectorsPerTile), kKeys = 64, kWarps = 4;
constexpr int kThreads = kWarps * 32;

template <int D>
constexpr int kRow = D + 8;  // padded smem row (elements): rows 16 bytes apart mod 128, so the
                             // 8 row addresses of an ldmatrix hit distinct bank groups
template <int D>
constexpr size_t kTileElems = static_cast<size_t>(kKeys) * kRow<D>;
template <typename T, int D>
constexpr size_t kSmemBytes = 4 * kTileElems<D> * sizeof(T);  // K and V, two stages each

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* smem) {
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t* r, const void* smem) {
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// 16 bytes global -> shared, asynchronously; bytes = 0 writes zeros (a key past the range).
__device__ __forceinline__ void cp_async16(void* smem, const void* global, int bytes) {
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(a), "l"(global), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Issues the copies of keys and values [t0, t0 + kKeys) (zeros past key_hi) into one stage, by
// a block of NT threads.
template <typename T, int D, int NT = kThreads>
__device__ __forceinline__ void load_tile(const AttentionArgs& a, int b, int g, int t0, int key_hi,
                                          int row_begin, T* ks, T* vs) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kPerThread = kKeys * kChunks / NT;
  static_assert(kKeys * kChunks % NT == 0 && NT % kChunks == 0);
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);
  const int c = threadIdx.x % kChunks;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int j = threadIdx.x / kChunks + i * (NT / kChunks);  // key of the tile
    const int t = t0 + j;
    const bool ok = t < key_hi;
    // Packed (no block table): key t of the sequence is row row_begin + t of [T, hkv, D].
    const int64_t at = !ok             ? 0
                       : a.block_table ? key_offset(a, b, g, t)
                                       : (static_cast<int64_t>(row_begin + t) * a.hkv + g) * D;
    const int64_t off = ok ? at + c * 8 : 0;
    cp_async16(ks + j * kRow<D> + c * 8, keys + off, ok ? 16 : 0);
    cp_async16(vs + j * kRow<D> + c * 8, values + off, ok ? 16 : 0);
  }
}

// range[2 kVec], range[2 kVec + 1] = the union of the nv per-vector ranges range[2v, 2v + 1]
// (tile-aligned from the sequence's first row when packed), by one warp (lane = its lane).
template <int kVec>
__device__ __forceinline__ void warp_union_key_range(int nv, int len, bool packed, int lane,
                                                     int* range) {
  int lo = len, hi = 0;
  for (int v = lane; v < nv; v += 32) {
    lo = min(lo, range[2 * v]);
    hi = max(hi, range[2 * v + 1]);
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    lo = min(lo, __shfl_xor_sync(0xffffffffu, lo, off));
    hi = max(hi, __shfl_xor_sync(0xffffffffu, hi, off));
  }
  if (packed) lo = min(lo, hi) / kKeys * kKeys;
  if (lane == 0) {
    range[2 * kVec] = lo;
    range[2 * kVec + 1] = max(lo, hi);
  }
}

// The block's query vectors' key ranges, by threads 0..NT - 1: range[2v], range[2v + 1] = [lo,
// hi) of vector v < kVec ([0, 0) past nv); no barrier.
template <int kVec, int NT>
__device__ __forceinline__ void vector_key_ranges(const AttentionArgs& a, int row_begin, int g,
                                                  int v0, int nv, int len, bool packed,
                                                  int* range) {
  for (int v = static_cast<int>(threadIdx.x); v < kVec; v += NT) {
    int lo = 0, hi = 0;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      key_range(a, packed ? row - row_begin : a.positions[row], len, lo, hi);
    }
    range[2 * v] = lo;
    range[2 * v + 1] = hi;
  }
}

// vector_key_ranges, and range[2 kVec], range[2 kVec + 1] their union (tile-aligned from the
// sequence's first row when packed). Every thread calls it (it synchronizes twice).
template <int kVec, int NT>
__device__ __forceinline__ void block_key_ranges(const AttentionArgs& a, int row_begin, int g,
                                                 int v0, int nv, int len, bool packed, int* range) {
  const int tid = threadIdx.x, lane = tid % 32;
  vector_key_ranges<kVec, NT>(a, row_begin, g, v0, nv, len, packed, range);
  __syncthreads();
  if (tid < 32) warp_union_key_range<kVec>(nv, len, packed, lane, range);
  __syncthreads();
}

// The block's queries times `scale`, rounded to T, into qs [kVec][kRow<D>] (zeros past nv), by
// NT threads with 16-byte loads (q is 16-byte aligned, as the host checks); no barrier.
template <typename T, int D, int kVec, int NT>
__device__ __forceinline__ void stage_queries(const AttentionArgs& a, int row_begin, int g, int v0,
                                              int nv, float scale, T* qs) {
  constexpr int kQuads = D / 4;
#pragma unroll 4
  for (int i = threadIdx.x; i < kVec * kQuads; i += NT) {
    const int v = i / kQuads, e = (i % kQuads) * 4;
    float4 val = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      val =
          *reinterpret_cast<const float4*>(a.q + (static_cast<int64_t>(row) * a.hq + head) * D + e);
    }
    uint2 packed4;
    packed4.x = pack2<T>(val.x * scale, val.y * scale);
    packed4.y = pack2<T>(val.z * scale, val.w * scale);
    *reinterpret_cast<uint2*>(&qs[v * kRow<D> + e]) = packed4;
  }
}

__device__ __forceinline__ float ex2(float x) {  // 2^x (MUFU.EX2); ex2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// online_softmax_tile (mma_tile.cuh) for scores already in base 2 (log2(e) folded into the
// queries): with kMask false the caller knows every key of the tile is visible to both rows of
// every lane, so there is no mask, every score is finite and the running max is finite after the
// first tile: no -inf cases. With kMask true, the masked step (the tile the causal diagonal or a
// window edge crosses).
template <bool kMask, int D>
__device__ __forceinline__ void softmax_tile_base2(float (&s)[kKeys / 8][4], float (&o)[D / 8][4],
                                                   float& m0, float& m1, float& l0, float& l1,
                                                   int t0, int key_hi, int lo0, int hi0, int lo1,
                                                   int hi1, int tig) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      if (kMask) {
        const int t = t0 + nt * 8 + tig * 2 + x;
        const bool ok = t < key_hi;
        if (!(ok && t >= lo0 && t < hi0)) s[nt][x] = -INFINITY;
        if (!(ok && t >= lo1 && t < hi1)) s[nt][2 + x] = -INFINITY;
      }
      mx0 = fmaxf(mx0, s[nt][x]);
      mx1 = fmaxf(mx1, s[nt][2 + x]);
    }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  // A row none of whose keys so far is visible keeps mn = -inf: its scores are all -inf and
  // must give 0 (not ex2(-inf - -inf) = NaN), hence the base, 0 for such a row.
  const float b0 = kMask && mn0 == -INFINITY ? 0.0f : mn0;
  const float b1 = kMask && mn1 == -INFINITY ? 0.0f : mn1;
  const float alpha0 = ex2(m0 - b0), alpha1 = ex2(m1 - b1);  // m = -inf: 0 (nothing to rescale)
  float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
  for (int nt = 0; nt < kKeys / 8; ++nt)
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      s[nt][x] = ex2(s[nt][x] - b0);  // a masked score: ex2(-inf) = 0
      s[nt][2 + x] = ex2(s[nt][2 + x] - b1);
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

// --- the interleaved tile (kInterleaved, AttentionArgs::interleaved) -----------------------------
// ncu on the H200 put the kernel at 0.36 issued instructions per scheduler cycle with 2.6 resident
// warps, a third of the stalls waiting on fixed-latency dependencies: in the loops above each key
// group's two mma accumulate into the same scores back to back, every ldmatrix feeds the mma right
// after it, and the softmax's max and sum are 16-long chains plus two shuffle rounds per row per
// tile. The interleaved tile orders the products so that consecutive mma write different
// accumulators (key pairs within a 16-dim step; dims within a key step), loads the next step's
// fragments before the current step's mma, reduces max and sum as trees, and keeps each lane's
// partial row sum (the quad's lanes share the running max), summed over the quad once at the end.
// It also waits at one barrier a tile instead of two (the kernel's loop says how).

// mma without `volatile`: a register-only instruction the compiler may schedule freely (the
// fragments' ldmatrix keep `volatile`: they read shared memory that barriers guard).
__device__ __forceinline__ void mma_free(float* c, const uint32_t* a, uint32_t b0, uint32_t b1,
                                         __nv_bfloat16) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_free(float* c, const uint32_t* a, uint32_t b0, uint32_t b1,
                                         __half) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// S = Q . K^T for the warp's 16 rows and the tile's keys: step (kk, np) multiplies dims
// kk*16..+15 of key groups 2np and 2np+1 (one ldmatrix.x4: matrices (2np, dims +0..7), (2np,
// +8..15), (2np+1, +0..7), (2np+1, +8..15)).
template <typename T, int D>
__device__ __forceinline__ void scores_interleaved(float (&s)[kKeys / 8][4],
                                                   const uint32_t (&qa)[D / 16][4], const T* ks,
                                                   int lane) {
  constexpr int kPairs = kKeys / 16, kSteps = (D / 16) * kPairs;
  const int mi = lane / 8, lr = lane % 8;
  const T* base = ks + ((mi / 2) * 8 + lr) * kRow<D> + (mi % 2) * 8;
  uint32_t bf[2][4];
  ldmatrix_x4(bf[0], base);
#pragma unroll
  for (int st = 0; st < kSteps; ++st) {
    if (st + 1 < kSteps) {
      const int kk = (st + 1) / kPairs, np = (st + 1) % kPairs;
      ldmatrix_x4(bf[(st + 1) & 1], base + np * 16 * kRow<D> + kk * 16);
    }
    const int kk = st / kPairs, np = st % kPairs;
    mma_free(s[2 * np], qa[kk], bf[st & 1][0], bf[st & 1][1], T{});
    mma_free(s[2 * np + 1], qa[kk], bf[st & 1][2], bf[st & 1][3], T{});
  }
}

// O += P . V: P's 16-key groups kt as A fragments (packed once), step (kt, dp) multiplies them by
// dims 2dp and 2dp+1 of V (ldmatrix.trans: matrices keys +0..7 and +8..15 of dims (2dp)*8..+7,
// then of (2dp+1)*8..+7).
template <typename T, int D>
__device__ __forceinline__ void values_interleaved(float (&o)[D / 8][4],
                                                   const float (&s)[kKeys / 8][4], const T* vs,
                                                   int lane) {
  constexpr int kDimPairs = D / 16, kSteps = (kKeys / 16) * kDimPairs;
  uint32_t pa[kKeys / 16][4];
#pragma unroll
  for (int kt = 0; kt < kKeys / 16; ++kt) {
    pa[kt][0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
    pa[kt][1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
    pa[kt][2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
    pa[kt][3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
  }
  const int mi = lane / 8, lr = lane % 8;
  const T* base = vs + ((mi % 2) * 8 + lr) * kRow<D> + (mi / 2) * 8;
  uint32_t bf[2][4];
  ldmatrix_x4_trans(bf[0], base);
#pragma unroll
  for (int st = 0; st < kSteps; ++st) {
    if (st + 1 < kSteps) {
      const int kt = (st + 1) / kDimPairs, dp = (st + 1) % kDimPairs;
      ldmatrix_x4_trans(bf[(st + 1) & 1], base + kt * 16 * kRow<D> + dp * 16);
    }
    const int kt = st / kDimPairs, dp = st % kDimPairs;
    mma_free(o[2 * dp], pa[kt], bf[st & 1][0], bf[st & 1][1], T{});
    mma_free(o[2 * dp + 1], pa[kt], bf[st & 1][2], bf[st & 1][3], T{});
  }
}

// softmax_tile_base2 with lane-partial sums (l0, l1: this lane's share), over kGroups groups of 8
// keys from t0 (a power of two; a whole tile by default), without the accumulators' rescale:
// alpha0 / alpha1 are the factors for rows 0 and 1 (the wgmma kernels skip the rescale when both
// are 1). Row maxima and sums: tree reductions over arrays up to 8 groups; past that (the TMA
// kernel's 128-key tiles) four running values each, as those arrays went to local memory there
// (a 128-byte stack frame, ~46 % of the warps' cycles stalled on it: lead23_h200/run4).
template <bool kMask, int kGroups>
__device__ __forceinline__ void softmax_scores(float (&s)[kGroups][4], float& m0, float& m1,
                                               float& l0, float& l1, float& alpha0, float& alpha1,
                                               int t0, int key_hi, int lo0, int hi0, int lo1,
                                               int hi1, int tig) {
  if (kMask) {
#pragma unroll
    for (int nt = 0; nt < kGroups; ++nt)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        const int t = t0 + nt * 8 + tig * 2 + x;
        const bool ok = t < key_hi;
        if (!(ok && t >= lo0 && t < hi0)) s[nt][x] = -INFINITY;
        if (!(ok && t >= lo1 && t < hi1)) s[nt][2 + x] = -INFINITY;
      }
  }
  constexpr bool kTree = kGroups <= 8;
  float mx0, mx1;
  if constexpr (kTree) {
    float r0[kGroups], r1[kGroups];
#pragma unroll
    for (int nt = 0; nt < kGroups; ++nt) {
      r0[nt] = fmaxf(s[nt][0], s[nt][1]);
      r1[nt] = fmaxf(s[nt][2], s[nt][3]);
    }
#pragma unroll
    for (int w = kGroups / 2; w >= 1; w /= 2)
#pragma unroll
      for (int i = 0; i < w; ++i) {
        r0[i] = fmaxf(r0[i], r0[i + w]);
        r1[i] = fmaxf(r1[i], r1[i + w]);
      }
    mx0 = r0[0], mx1 = r1[0];
  } else {
    float a0 = s[0][0], b0 = s[0][1], a1 = s[0][2], b1 = s[0][3];
#pragma unroll
    for (int nt = 1; nt < kGroups; ++nt) {
      a0 = fmaxf(a0, s[nt][0]);
      b0 = fmaxf(b0, s[nt][1]);
      a1 = fmaxf(a1, s[nt][2]);
      b1 = fmaxf(b1, s[nt][3]);
    }
    mx0 = fmaxf(a0, b0), mx1 = fmaxf(a1, b1);
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  // A row none of whose keys so far is visible keeps mn = -inf: its scores must give 0, hence
  // the base 0 for such a row (ex2(-inf - -inf) would be NaN).
  const float b0 = kMask && mn0 == -INFINITY ? 0.0f : mn0;
  const float b1 = kMask && mn1 == -INFINITY ? 0.0f : mn1;
  alpha0 = ex2(m0 - b0);  // m = -inf: 0 (nothing to rescale)
  alpha1 = ex2(m1 - b1);
  float sum0, sum1;
  if constexpr (kTree) {
    float r0[kGroups], r1[kGroups];
#pragma unroll
    for (int nt = 0; nt < kGroups; ++nt) {
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        s[nt][x] = ex2(s[nt][x] - b0);
        s[nt][2 + x] = ex2(s[nt][2 + x] - b1);
      }
      r0[nt] = s[nt][0] + s[nt][1];
      r1[nt] = s[nt][2] + s[nt][3];
    }
#pragma unroll
    for (int w = kGroups / 2; w >= 1; w /= 2)
#pragma unroll
      for (int i = 0; i < w; ++i) {
        r0[i] += r0[i + w];
        r1[i] += r1[i + w];
      }
    sum0 = r0[0], sum1 = r1[0];
  } else {
    float a0 = 0.0f, c0 = 0.0f, a1 = 0.0f, c1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kGroups; ++nt) {
      s[nt][0] = ex2(s[nt][0] - b0);
      s[nt][1] = ex2(s[nt][1] - b0);
      s[nt][2] = ex2(s[nt][2] - b1);
      s[nt][3] = ex2(s[nt][3] - b1);
      a0 += s[nt][0];
      c0 += s[nt][1];
      a1 += s[nt][2];
      c1 += s[nt][3];
    }
    sum0 = a0 + c0, sum1 = a1 + c1;
  }
  l0 = l0 * alpha0 + sum0;
  l1 = l1 * alpha1 + sum1;
  m0 = mn0;
  m1 = mn1;
}

// Keys [full_lo, full_hi) that every row of the warp sees, from each lane's two rows' ranges
// [lo0, hi0) and [lo1, hi1) (empty when a row is past nv: its range is [0, 0)); a key tile
// inside it needs no mask.
__device__ __forceinline__ void warp_full_key_span(int lo0, int hi0, int lo1, int hi1, int& full_lo,
                                                   int& full_hi) {
  full_lo = max(lo0, lo1);
  full_hi = min(hi0, hi1);
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    full_lo = max(full_lo, __shfl_xor_sync(0xffffffffu, full_lo, off));
    full_hi = min(full_hi, __shfl_xor_sync(0xffffffffu, full_hi, off));
  }
}

// softmax_scores, then the accumulators rescaled by alpha.
template <bool kMask, int D, int kGroups = kKeys / 8>
__device__ __forceinline__ void softmax_tile_interleaved(float (&s)[kGroups][4],
                                                         float (&o)[D / 8][4], float& m0, float& m1,
                                                         float& l0, float& l1, int t0, int key_hi,
                                                         int lo0, int hi0, int lo1, int hi1,
                                                         int tig) {
  static_assert((kGroups & (kGroups - 1)) == 0);
  float alpha0, alpha1;
  softmax_scores<kMask, kGroups>(s, m0, m1, l0, l1, alpha0, alpha1, t0, key_hi, lo0, hi0, lo1, hi1,
                                 tig);
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    o[dt][0] *= alpha0;
    o[dt][1] *= alpha0;
    o[dt][2] *= alpha1;
    o[dt][3] *= alpha1;
  }
}

// Host: fn(Type<T>{}, HeadDim<D>{}) for the flash kernels' element type (bf16 or f16) and head_dim
// (64 or 128): the dispatch every flash-family launcher starts with (tags, so a generic lambda
// can name T and D: `[&](auto t, auto d) { f<typename decltype(t)::type, decltype(d)::value>();
// }`).
template <typename T>
struct Type {
  using type = T;
};
template <int D>
using HeadDim = std::integral_constant<int, D>;

template <typename Fn>
void dispatch_type_and_head_dim(const AttentionArgs& a, Fn&& fn) {
  const auto by_head_dim = [&](auto t) {
    if (a.head_dim == 64) return fn(t, HeadDim<64>{});
    fn(t, HeadDim<128>{});
  };
  if (a.type == ElemType::BF16) return by_head_dim(Type<__nv_bfloat16>{});
  by_head_dim(Type<__half>{});
}

}  // namespace infera::cuda::flash
