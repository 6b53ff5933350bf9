// Prefill attention on the tensor cores, pipelined (FlashAttention-2 structure, like
// attention_mma.cu, which it replaces for head_dim 64 and 128): a block of 4 warps owns 64 query
// vectors (sequence rows x the q heads of one kv head, row-major), 16 per warp. Key and value
// tiles of 64 keys go global -> shared memory with cp.async, double-buffered, so tile t + 1 is in
// flight while tile t is multiplied; the mma.sync B fragments come from ldmatrix (values with
// .trans, so they are stored row-major: no transposing stores). Scores and P.V accumulate in f32;
// P is rounded to the cache type for the second product, as in attention_mma.cu. The query tiles
// are launched longest first (the causal triangle's last rows see the most keys), so the short
// ones fill the tail of the grid. Without a block table it is the encoders' packed attention
// (CudaBackend::attention_packed): keys and values are bf16 copies of k and v [T, hkv, D].
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda {
namespace {

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

// Issues the copies of keys and values [t0, t0 + kKeys) (zeros past key_hi) into one stage.
template <typename T, int D>
__device__ __forceinline__ void load_tile(const AttentionArgs& a, int b, int g, int t0, int key_hi,
                                          int row_begin, T* ks, T* vs) {
  constexpr int kChunks = D / 8;  // 16-byte chunks per row
  constexpr int kPerThread = kKeys * kChunks / kThreads;
  static_assert(kKeys * kChunks % kThreads == 0 && kThreads % kChunks == 0);
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);
  const int c = threadIdx.x % kChunks;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int j = threadIdx.x / kChunks + i * (kThreads / kChunks);  // key of the tile
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

// softmax_tile_base2 with tree reductions and lane-partial sums (l0, l1: this lane's share).
template <bool kMask, int D>
__device__ __forceinline__ void softmax_tile_interleaved(float (&s)[kKeys / 8][4],
                                                         float (&o)[D / 8][4], float& m0, float& m1,
                                                         float& l0, float& l1, int t0, int key_hi,
                                                         int lo0, int hi0, int lo1, int hi1,
                                                         int tig) {
  constexpr int kGroups = kKeys / 8;
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
  float mx0 = r0[0], mx1 = r1[0];
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
  }
  const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
  const float b0 = kMask && mn0 == -INFINITY ? 0.0f : mn0;
  const float b1 = kMask && mn1 == -INFINITY ? 0.0f : mn1;
  const float alpha0 = ex2(m0 - b0), alpha1 = ex2(m1 - b1);
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
  l0 = l0 * alpha0 + r0[0];
  l1 = l1 * alpha1 + r1[0];
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

// A chunk's rows (r0, r1 of each warp): unnormalised output and (max, sum) to the partials at
// chunk `split`; then, in the tile's last block to finish, out (and out_bf16) = the merge of the
// tile's `chunks` partials: sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s (base e without kFast).
// Each block publishes its partials before it counts itself done; the block that brings the count
// to `chunks` sees every other block's partials and resets the counter for the next launch. The
// merge is latency-bound (a few L2 round trips on the tile's critical path), so its loads are
// issued together: the chunks' factors first (staged in the free key buffer `smem`), then per
// chunk one 16-byte load of each of the thread's D / 8 output quads.
template <int D, bool kFast>
__device__ __forceinline__ void write_and_merge_split(const AttentionArgs& a, int b, int g,
                                                      int tile, int split, int chunks, int v0,
                                                      int nv, int row_begin,
                                                      const float (&o)[D / 8][4], float m0,
                                                      float m1, float l0, float l1, float* smem) {
  __shared__ int merge;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, gid = lane / 4, tig = lane % 4;
  const int64_t stride = a.num_tokens * a.hq;  // vectors per chunk of the partials
  const auto vector_index = [&](int v) {
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    return static_cast<int64_t>(row) * a.hq + head;
  };
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = warp * 16 + gid + half * 8;
    if (v >= nv) continue;
    const int64_t vec = split * stride + vector_index(v);
    float* dst = a.partial_out + vec * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      __stcg(reinterpret_cast<float2*>(dst + dt * 8 + tig * 2),
             make_float2(o[dt][2 * half], o[dt][2 * half + 1]));
    if (tig == 0)
      __stcg(reinterpret_cast<float2*>(a.partial_ml) + vec,
             half == 0 ? make_float2(m0, l0) : make_float2(m1, l1));
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const int64_t counter = (static_cast<int64_t>(b) * a.hkv + g) * a.tiles + tile;
    merge = atomicAdd(&a.split_counters[counter], 1u) == static_cast<unsigned>(chunks - 1);
    if (merge) a.split_counters[counter] = 0;
  }
  __syncthreads();
  if (!merge) return;
  __threadfence();
  // smem: [kVectors][chunks] maxima, then factors; [kVectors] sums' inverses after them.
  float* factor = smem;
  float* inv = smem + kVectors * chunks;
  for (int i = tid; i < nv * chunks; i += kThreads) {
    const int v = i / chunks, sp = i % chunks;
    const float2 ml =
        __ldcg(reinterpret_cast<const float2*>(a.partial_ml) + sp * stride + vector_index(v));
    factor[i] = ml.x;
    inv[kVectors + i] = ml.y;  // sums, past the inverses (64 + 64 * 16 floats at most)
  }
  __syncthreads();
  for (int v = tid; v < nv; v += kThreads) {
    float m = -INFINITY, l = 0.0f;
    for (int sp = 0; sp < chunks; ++sp) m = fmaxf(m, factor[v * chunks + sp]);
    for (int sp = 0; sp < chunks; ++sp) {
      const float ms = factor[v * chunks + sp];
      const float f = ms == -INFINITY ? 0.0f : (kFast ? exp2f(ms - m) : expf(ms - m));
      factor[v * chunks + sp] = f;
      l += f * inv[kVectors + v * chunks + sp];
    }
    inv[v] = l > 0.0f ? 1.0f / l : 0.0f;
  }
  __syncthreads();
  constexpr int kQuads = D / 4, kPer = kVectors * kQuads / kThreads;  // quads per thread
  float4 acc[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int sp = 0; sp < chunks; ++sp) {
    float4 po[kPer];
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int q = tid + i * kThreads, v = q / kQuads, e = (q % kQuads) * 4;
      po[i] = v < nv ? __ldcg(reinterpret_cast<const float4*>(
                           a.partial_out + (sp * stride + vector_index(v)) * D + e))
                     : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int v = (tid + i * kThreads) / kQuads;
      const float f = v < nv ? factor[v * chunks + sp] : 0.0f;
      acc[i].x += f * po[i].x;
      acc[i].y += f * po[i].y;
      acc[i].z += f * po[i].z;
      acc[i].w += f * po[i].w;
    }
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    const int q = tid + i * kThreads, v = q / kQuads, e = (q % kQuads) * 4;
    if (v >= nv) continue;
    const int64_t vec = vector_index(v);
    const float r = inv[v];
    const float4 y = make_float4(acc[i].x * r, acc[i].y * r, acc[i].z * r, acc[i].w * r);
    float2* dst = reinterpret_cast<float2*>(a.out + vec * D + e);  // out is 8-byte aligned
    dst[0] = make_float2(y.x, y.y);
    dst[1] = make_float2(y.z, y.w);
    if (a.out_bf16) {
      auto* dst16 = static_cast<__nv_bfloat16*>(a.out_bf16) + vec * D + e;
      reinterpret_cast<__nv_bfloat162*>(dst16)[0] = __floats2bfloat162_rn(y.x, y.y);
      reinterpret_cast<__nv_bfloat162*>(dst16)[1] = __floats2bfloat162_rn(y.z, y.w);
    }
  }
}

// Blocks per SM: 3 at head_dim 128 (registers and shared memory), 4 at 64 (fits in 128
// registers without spilling; more warps to hide the mma and shared-memory latencies).
template <int D>
constexpr int kMinBlocks = D == 64 ? 4 : 3;

// Split keys (kSplit, AttentionArgs::splits > 1): the causal triangle's long query tiles would
// otherwise decide the kernel's makespan (a 2048-token prompt's last tile walks 32 key tiles while
// the GPU's slots average ~21), so a tile of n key tiles is cut into ceil(n / split_key_tiles)
// (at most `splits`) chunks of whole key tiles, each a block of its own; each writes its rows'
// unnormalised output and (max, sum) to the partials and the tile's last block merges them
// (write_and_merge_split). Grid z enumerates query tiles major (longest first), chunk minor, so
// a long tile's chunks run side by side at the start and merge early, and the grid's tail is
// the short unsplit tiles; the blocks of chunks a short tile does not have return at once.
// (Chunk-major order ran 2048-token prompts slower: the long tiles' last chunks and their merges
// formed the tail.)
template <typename T, int D, bool kFast, bool kSplit, bool kInterleaved>
__global__ void __launch_bounds__(kThreads, kMinBlocks<D>)
    attention_flash_kernel(const AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const kbuf = reinterpret_cast<T*>(smem_raw);  // [2][kKeys][kRow]
  T* const vbuf = kbuf + 2 * kTileElems<D>;        // [2][kKeys][kRow]
  __shared__ int range[kVectors * 2 + 2];

  const int g = blockIdx.x, b = blockIdx.y;
  // Longest first; split: chunk index major (see above).
  int tile = static_cast<int>(gridDim.z - 1 - blockIdx.z), split = 0;
  if constexpr (kSplit) {
    const int splits = static_cast<int>(a.splits);
    split = static_cast<int>(blockIdx.z) % splits;
    tile = static_cast<int>(a.tiles) - 1 - static_cast<int>(blockIdx.z) / splits;
  }
  const int group = static_cast<int>(a.hq / a.hkv);
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int v0 = tile * kVectors, nv = min(kVectors, rows * group - v0);
  if (nv <= 0) return;
  // Packed encoder attention (Backend::attention_packed, no block table): keys are the sequence's
  // own rows, a row's position is its offset in the sequence, and key tiles start at multiples of
  // kKeys from the sequence's first row (the schedule the op counts).
  const bool packed = a.block_table == nullptr;
  const int len = packed ? rows : a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates
  // Fast: scores in base 2, so that the softmax's exponentials are single ex2 instructions.
  const float scale = static_cast<float>(a.scale) * (kFast ? 1.4426950408889634f : 1.0f);

  for (int v = tid; v < kVectors; v += kThreads) {
    int lo = 0, hi = 0;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      key_range(a, packed ? row - row_begin : a.positions[row], len, lo, hi);
    }
    range[2 * v] = lo;
    range[2 * v + 1] = hi;
  }
  // The block's key range: the union of its rows' ranges (tile-aligned from the sequence's first
  // row when packed), by thread 0 into range[2 * kVectors ...].
  const auto block_key_range = [&] {
    if (tid == 0) {
      int lo = len, hi = 0;
      for (int v = 0; v < nv; ++v) {
        lo = min(lo, range[2 * v]);
        hi = max(hi, range[2 * v + 1]);
      }
      if (packed) lo = min(lo, hi) / kKeys * kKeys;
      range[2 * kVectors] = lo;
      range[2 * kVectors + 1] = max(lo, hi);
    }
  };
  // This block's chunk [chunk_lo, chunk_hi) of the key range, and the tile's chunk count.
  int chunk_lo = 0, chunk_hi = 0, chunks = 1;
  if constexpr (kSplit) {
    __syncthreads();
    if (warp == 0) {  // block_key_range by a warp: blocks of a chunk-less split wait on it
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
        range[2 * kVectors] = lo;
        range[2 * kVectors + 1] = max(lo, hi);
      }
    }
    __syncthreads();
    const int lo = range[2 * kVectors], hi = range[2 * kVectors + 1];
    const int n = (hi - lo + kKeys - 1) / kKeys, per = static_cast<int>(a.split_key_tiles);
    chunks = max(1, min(static_cast<int>(a.splits), (n + per - 1) / per));
    if (split >= chunks) return;  // block-uniform: a chunk this tile does not have
    chunk_lo = lo + split * n / chunks * kKeys;
    chunk_hi = min(hi, lo + (split + 1) * n / chunks * kKeys);
  }
  // The queries, scaled and rounded to the cache type, staged in the second value stage (free
  // until tile 1's copies are issued, after the fragments are in registers).
  T* const qs = vbuf + kTileElems<D>;
  // Four elements per 16-byte load, several loads in flight per thread (the prologue's loads
  // were the kernel's main scoreboard stall for blocks with few key tiles; q is 16-byte aligned,
  // as the host checks).
  constexpr int kQuads = D / 4;
#pragma unroll 4
  for (int i = tid; i < kVectors * kQuads; i += kThreads) {
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
  __syncthreads();
  if constexpr (!kSplit) {  // the unsplit kernel overlaps this with the queries' loads
    block_key_range();
    __syncthreads();
  }
  const int key_hi = range[2 * kVectors + 1];
  if constexpr (!kSplit) {
    chunk_lo = range[2 * kVectors];
    chunk_hi = key_hi;
  }
  if (chunk_lo < chunk_hi) load_tile<T, D>(a, b, g, chunk_lo, key_hi, row_begin, kbuf, vbuf);
  cp_async_commit();

  const int r0 = warp * 16 + gid, r1 = r0 + 8;
  const int lo0 = range[2 * r0], hi0 = range[2 * r0 + 1];
  const int lo1 = range[2 * r1], hi1 = range[2 * r1 + 1];
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = kk * 16 + tig * 2;
    qa[kk][0] = *reinterpret_cast<const uint32_t*>(&qs[r0 * kRow<D> + c]);
    qa[kk][1] = *reinterpret_cast<const uint32_t*>(&qs[r1 * kRow<D> + c]);
    qa[kk][2] = *reinterpret_cast<const uint32_t*>(&qs[r0 * kRow<D> + c + 8]);
    qa[kk][3] = *reinterpret_cast<const uint32_t*>(&qs[r1 * kRow<D> + c + 8]);
  }
  __syncthreads();  // every warp holds its queries: the second stage is free

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  // ldmatrix lane roles: matrix mi = lane / 8, row lr = lane % 8 of it.
  const int mi = lane / 8, lr = lane % 8;
  // Keys [full_lo, full_hi) are visible to every row of this warp (empty when a row is past nv:
  // its range is [0, 0)); a tile inside it needs no mask.
  int full_lo = max(lo0, lo1), full_hi = min(hi0, hi1);
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    full_lo = max(full_lo, __shfl_xor_sync(0xffffffffu, full_lo, off));
    full_hi = min(full_hi, __shfl_xor_sync(0xffffffffu, full_hi, off));
  }

  int stage = 0;
  for (int t0 = chunk_lo; t0 < chunk_hi; t0 += kKeys, stage ^= 1) {
    if constexpr (kInterleaved) {
      // One barrier a tile: past it, tile t has landed and every warp is done with tile t - 1,
      // whose stage then takes tile t + 1's copies (in flight while tile t is multiplied).
      cp_async_wait<0>();
      __syncthreads();
      if (t0 + kKeys < chunk_hi)
        load_tile<T, D>(a, b, g, t0 + kKeys, key_hi, row_begin, kbuf + (stage ^ 1) * kTileElems<D>,
                        vbuf + (stage ^ 1) * kTileElems<D>);
      cp_async_commit();
    } else {
      // Tile t + 1's copies go out before tile t is waited for.
      if (t0 + kKeys < chunk_hi)
        load_tile<T, D>(a, b, g, t0 + kKeys, key_hi, row_begin, kbuf + (stage ^ 1) * kTileElems<D>,
                        vbuf + (stage ^ 1) * kTileElems<D>);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
    }
    const T* ks = kbuf + stage * kTileElems<D>;
    const T* vs = vbuf + stage * kTileElems<D>;

    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    if constexpr (kInterleaved) {
      scores_interleaved<T, D>(s, qa, ks, lane);
      if (t0 >= full_lo && t0 + kKeys <= full_hi)  // warp-uniform
        softmax_tile_interleaved<false, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1,
                                           tig);
      else
        softmax_tile_interleaved<true, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1,
                                          tig);
      values_interleaved<T, D>(o, s, vs, lane);
      continue;  // the next iteration's barrier guards this stage's refill
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; kk += 2)
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        // Matrices: (dims kk*16 + 0..7), (+8..15), ((kk+1)*16 + 0..7), (+8..15) of keys nt*8..+7.
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + (nt * 8 + lr) * kRow<D> + (kk + mi / 2) * 16 + (mi % 2) * 8);
        mma_16816(s[nt], qa[kk], bf[0], bf[1], T{});
        mma_16816(s[nt], qa[kk + 1], bf[2], bf[3], T{});
      }

    // Mask, then the online softmax of rows r0 and r1.
    if (!kFast)
      online_softmax_tile<kKeys, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
    else if (t0 >= full_lo && t0 + kKeys <= full_hi)  // warp-uniform
      softmax_tile_base2<false, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
    else
      softmax_tile_base2<true, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
      // O += P . V: two 8-key score tiles are an A fragment; V's B fragments by ldmatrix.trans.
#pragma unroll
    for (int kt = 0; kt < kKeys / 16; ++kt) {
      uint32_t pa[4];
      pa[0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        // Matrices: keys kt*16 + 0..7 and + 8..15 of dims dt*8..+7, then of (dt+1)*8..+7.
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vs + (kt * 16 + (mi % 2) * 8 + lr) * kRow<D> + (dt + mi / 2) * 8);
        mma_16816(o[dt], pa, bf[0], bf[1], T{});
        mma_16816(o[dt + 1], pa, bf[2], bf[3], T{});
      }
    }
    __syncthreads();  // this stage is consumed before the next iteration refills it
  }
  cp_async_wait<0>();
  if constexpr (kInterleaved) {  // the lanes' partial row sums -> the quad's
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
  }

  if (kSplit && chunks > 1)
    return write_and_merge_split<D, kFast>(a, b, g, tile, split, chunks, v0, nv, row_begin, o, m0,
                                           m1, l0, l1, reinterpret_cast<float*>(kbuf));
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = half == 0 ? r0 : r1;
    if (v >= nv) continue;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D;
    float* dst = a.out + at;
    __nv_bfloat16* dst_bf16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + at : nullptr;
    const float inv = half == 0 ? inv0 : inv1;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + tig * 2;
      const float2 y = make_float2(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
      *reinterpret_cast<float2*>(dst + c) = y;
      if (dst_bf16)
        *reinterpret_cast<__nv_bfloat162*>(dst_bf16 + c) = __floats2bfloat162_rn(y.x, y.y);
    }
  }
}

template <typename T, int D, bool kFast, bool kSplit, bool kInterleaved>
void launch_dksi(const AttentionArgs& a, cudaStream_t s) {
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(attention_flash_kernel<T, D, kFast, kSplit, kInterleaved>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemBytes<T, D>)) == cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the flash attention's shared memory");
  const int64_t chunks = kSplit ? a.splits : 1;
  const dim3 grid(static_cast<unsigned>(a.hkv), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.tiles * chunks));
  attention_flash_kernel<T, D, kFast, kSplit, kInterleaved>
      <<<grid, kThreads, kSmemBytes<T, D>, s>>>(a);
}

// The interleaved tile runs the base-2 softmax only (kFast).
template <typename T, int D, bool kFast, bool kSplit>
void launch_dks(const AttentionArgs& a, cudaStream_t s) {
  if constexpr (kFast)
    if (a.interleaved) return launch_dksi<T, D, true, kSplit, true>(a, s);
  launch_dksi<T, D, kFast, kSplit, false>(a, s);
}

template <typename T, int D, bool kFast>
void launch_dk(const AttentionArgs& a, cudaStream_t s) {
  if (a.splits > 1) return launch_dks<T, D, kFast, true>(a, s);
  launch_dks<T, D, kFast, false>(a, s);
}

template <typename T, int D>
void launch_d(const AttentionArgs& a, cudaStream_t s) {
  if (a.fast_softmax) return launch_dk<T, D, true>(a, s);
  launch_dk<T, D, false>(a, s);
}

template <typename T>
void launch_typed(const AttentionArgs& a, cudaStream_t s) {
  if (a.head_dim == 64) return launch_d<T, 64>(a, s);
  launch_d<T, 128>(a, s);
}

}  // namespace

int64_t attention_flash_blocks_per_sm(int64_t head_dim) {
  return head_dim == 64 ? kMinBlocks<64> : kMinBlocks<128>;
}

bool attention_flash_supports(ElemType type, int64_t head_dim) {
  return type != ElemType::F32 && (head_dim == 64 || head_dim == 128);
}

void launch_attention_flash(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  if (a.type == ElemType::BF16)
    launch_typed<__nv_bfloat16>(a, s);
  else
    launch_typed<__half>(a, s);
}

}  // namespace infera::cuda
