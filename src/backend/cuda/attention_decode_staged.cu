// Decode attention with the keys and values staged through shared memory (f16/bf16 caches,
// head_dim 64 or 128, <= kDecodeMaxVectors query vectors per (sequence, kv head)).
//
// Why: the register-pipelined kernel (attention_decode.cu) keeps one round of loads in flight
// per warp, bounded by its registers: at batch 256 it read the bf16 cache at ~3 TB/s of the
// H200's ~4.3-4.8. Here every warp owns S stages of kKT keys in shared memory and streams its keys
// through them with cp.async: S - 1 tiles (K and V rows, 16 bytes a copy) are in flight while the
// warp computes on the oldest, and no registers hold data that is only waiting. Warps never wait
// for each other until the end (cp.async.wait_group + __syncwarp per tile, no block barrier).
// A key is read by 8 lanes (2 chunks of 8 elements each at head_dim 128): the dot product needs
// 3 shuffle levels for 4 keys per step instead of 4 levels for 2 keys.
// Arithmetic is f32, the online softmax and the merges (warps, then splits) as attention_decode.cu.
// Off by default (CudaOptions::decode_staged): see cuda_backend.h and docs/notes/2026-11-30/
// issue-11-cudaa.md for what it measured on the H200.
#include <algorithm>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/device_util.cuh"

namespace infera::cuda {
namespace {

constexpr int kWarps = 4, kLpk = 8, kKT = 8;  // warps, lanes per key, keys per warp tile

template <typename T, int D>
constexpr int kStageElems = 2 * kKT* D;  // a tile's keys, then its values
template <typename T, int D, int S>
constexpr size_t kSmemBytes = size_t{kWarps} * S* kStageElems<T, D> * sizeof(T);

__device__ __forceinline__ void stage_copy16(void* smem, const void* global, int bytes) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(global), "r"(bytes));
}
__device__ __forceinline__ void stage_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void stage_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// qk_norm_rope_kv_kernel's head in registers (fused.cu), for one warp: RMSNorm of the head at x
// with bf16 weights w, then rotate-half RoPE at position pos; lane's elements j = lane + 32 i.
template <int D>
__device__ __forceinline__ void norm_rope_head(const QkNormRopeKvArgs& f, const float* x,
                                               const __nv_bfloat16* w, int64_t pos, int lane,
                                               float (&r)[D / 32]) {
  constexpr int kPer = D / 32, kHp = D / 64, kHalf = D / 2;
  float v[kPer];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    v[i] = x[lane + 32 * i];
    ss += v[i] * v[i];
  }
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + static_cast<float>(f.eps));
#pragma unroll
  for (int i = 0; i < kHp; ++i) {
    const int j = lane + 32 * i;
    const float lo = to_f32(w[j]) * (v[i] * inv), hi = to_f32(w[j + kHalf]) * (v[i + kHp] * inv);
    const float c = f.cos[pos * kHalf + j], sn = f.sin[pos * kHalf + j];
    r[i] = lo * c - hi * sn;
    r[i + kHp] = hi * c + lo * sn;
  }
}

template <typename T, int D, int NV, int S, bool FQ = false>
__global__ void __launch_bounds__(kWarps * 32, NV == 2 ? (S <= 3 ? 4 : 3) : 2)
    attention_decode_staged_kernel(const AttentionArgs a) {
  constexpr int V = 8, CH = D / (kLpk * V), KPS = 32 / kLpk, STEPS = kKT / KPS;
  constexpr int CPR = D / V;              // 16-byte chunks per row
  constexpr int COPIES = kKT * CPR / 32;  // a lane's chunks of a tile's keys (as many values)
  static_assert(CH >= 1 && kKT * CPR % 32 == 0 && kKT % KPS == 0);
  static_assert(NV * D * sizeof(float) <= S * kStageElems<T, D> * sizeof(T));  // wo fits
  extern __shared__ __align__(16) unsigned char staged_smem[];
  // As attention_decode.cu: 16-byte aligned arrays, multiples of 16 bytes (widened accesses).
  __shared__ __align__(16) float qs[NV][D];
  __shared__ __align__(16) float wml[kWarps][NV][2];
  __shared__ __align__(16) int vr[NV][2];
  __shared__ __align__(16) int span[4];  // [0, 2) used
  const int group = static_cast<int>(a.hq / a.hkv);
  const int b = blockIdx.y, g = blockIdx.z % a.hkv, split = blockIdx.z / a.hkv;
  const int row_begin = a.query_start[b], nv = (a.query_start[b + 1] - row_begin) * group;
  if (nv <= 0) return;  // the same for every split of this (sequence, kv head)
  const int len = a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const float scale = static_cast<float>(a.scale);
  if (a.tune & kTuneEarlyTrigger) pdl_trigger();
  // The key ranges come from the batch's positions (uploaded before the step's first kernel):
  // known before the wait.
  decode_block_key_span<NV>(a, row_begin, g, nv, len, split, vr, span);
  const int key_lo = span[0], key_hi = span[1];
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);
  if (a.tune & kTuneKvPrefetch) {
    // This block's keys and values head for L2 while the previous kernels finish. The newest
    // key is written by the kernel before this one: an L2 prefetch of its line is harmless (L2
    // is the point of coherence; nothing lands in registers or L1 before the wait).
    constexpr int kLineElems = 128 / static_cast<int>(sizeof(T)), kLines = D / kLineElems;
    static_assert(D % kLineElems == 0);
    const int count = (key_hi - key_lo) * kLines;
    for (int i = tid; i < count; i += blockDim.x) {
      const int64_t off = key_offset(a, b, g, key_lo + i / kLines) + (i % kLines) * kLineElems;
      prefetch_l2(keys + off);
      prefetch_l2(values + off);
    }
  }
  pdl_wait();  // q and the cache are written by the step's earlier kernels
  pdl_trigger();
  if constexpr (FQ) {
    // The fused qk_norm_rope_kv_write (one query row per sequence, see AttentionArgs::fused_qk).
    const QkNormRopeKvArgs& f = a.qk;
    const auto* qn = static_cast<const __nv_bfloat16*>(f.q_norm);
    const auto* kn = static_cast<const __nv_bfloat16*>(f.k_norm);
    const int64_t pos = a.positions[row_begin];
    float r[D / 32];
    if (warp < NV) {
      float* qrow = qs[warp];
      if (warp < nv) {
        int row, head;
        vector_row_head(a, row_begin, g, warp, row, head);
        norm_rope_head<D>(f, a.q + (static_cast<int64_t>(row) * a.hq + head) * D, qn, pos, lane, r);
#pragma unroll
        for (int i = 0; i < D / 32; ++i) qrow[lane + 32 * i] = r[i];
      } else {
        for (int e = lane; e < D; e += 32) qrow[e] = 0.0f;
      }
    }
    if (pos >= key_lo && pos < key_hi && warp < 2) {  // this block reads the new key
      const int slot = f.slots[row_begin], bs = static_cast<int>(f.block_size);
      const int64_t at = ((g * f.num_blocks + slot / bs) * f.block_size + slot % bs) * D;
      const int64_t src = (static_cast<int64_t>(row_begin) * f.hkv + g) * D;
      if (warp == 0) {
        norm_rope_head<D>(f, f.k + src, kn, pos, lane, r);
#pragma unroll
        for (int i = 0; i < D / 32; ++i) {
          f.k[src + lane + 32 * i] = r[i];
          static_cast<T*>(f.key_pool)[at + lane + 32 * i] = from_f32<T>(r[i]);
        }
      } else {
        for (int e = lane; e < D; e += 32)
          static_cast<T*>(f.value_pool)[at + e] = from_f32<T>(f.v[src + e]);
      }
      __threadfence_block();  // the pool writes before this block's copies of them
    }
  } else {
    for (int i = tid; i < NV * D; i += blockDim.x) {
      const int v = i / D, e = i % D;
      float val = 0.0f;
      if (v < nv) {
        int row, head;
        vector_row_head(a, row_begin, g, v, row, head);
        val = a.q[(static_cast<int64_t>(row) * a.hq + head) * D + e];
      }
      qs[v][e] = val;
    }
  }
  __syncthreads();
  const int c = lane % kLpk, kg = lane / kLpk;  // chunks c, c + 8, ... of key kg of each step
  float qv[NV][CH * V], acc[NV][CH * V], m[NV], l[NV];
  int lov[NV], hiv[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
#pragma unroll
    for (int h = 0; h < CH; ++h)
#pragma unroll
      for (int x = 0; x < V; ++x) {
        qv[v][h * V + x] = qs[v][(c + h * kLpk) * V + x] * scale;
        acc[v][h * V + x] = 0.0f;
      }
    m[v] = -INFINITY;
    l[v] = 0.0f;
    lov[v] = vr[v][0];
    hiv[v] = vr[v][1];
  }
  T* const stages = reinterpret_cast<T*>(staged_smem) + warp * S * kStageElems<T, D>;
  constexpr int kStride = kWarps * kKT;  // keys between a warp's consecutive tiles
  const int first = key_lo + warp * kKT;
  const int ntiles = first < key_hi ? (key_hi - first + kStride - 1) / kStride : 0;
  // Tile i's keys and values into stage i % S (zeros past key_hi); one commit group per tile,
  // empty past the last, so that wait_group<S - 1> always means "tile i has landed".
  auto issue = [&](int i) {
    if (i < ntiles) {
      T* ks = stages + (i % S) * kStageElems<T, D>;
      T* vs = ks + kKT * D;
      const int t0 = first + i * kStride;
#pragma unroll
      for (int r = 0; r < COPIES; ++r) {
        const int j = lane + 32 * r, row = j / CPR, ch = j % CPR, t = t0 + row;
        const bool ok = t < key_hi;
        const int64_t off = ok ? key_offset(a, b, g, t) + ch * V : 0;
        stage_copy16(ks + row * D + ch * V, keys + off, ok ? 16 : 0);
        stage_copy16(vs + row * D + ch * V, values + off, ok ? 16 : 0);
      }
    }
    stage_commit();
  };
#pragma unroll
  for (int i = 0; i < S - 1; ++i) issue(i);
  for (int i = 0; i < ntiles; ++i) {
    issue(i + S - 1);  // into the stage the warp finished with in the previous iteration
    stage_wait<S - 1>();
    __syncwarp();  // every lane's copies of tile i are visible to the whole warp
    const T* ks = stages + (i % S) * kStageElems<T, D>;
    const T* vs = ks + kKT * D;
    const int t0 = first + i * kStride;
    float sc[STEPS][NV];
#pragma unroll
    for (int u = 0; u < STEPS; ++u) {
      const int row = u * KPS + kg, t = t0 + row;
      float kf[CH][V];
#pragma unroll
      for (int h = 0; h < CH; ++h)
        unpack16(*reinterpret_cast<const uint4*>(ks + row * D + (c + h * kLpk) * V), kf[h], T{});
#pragma unroll
      for (int v = 0; v < NV; ++v) {
        float dot = 0.0f;
#pragma unroll
        for (int h = 0; h < CH; ++h)
#pragma unroll
          for (int x = 0; x < V; ++x) dot = fmaf(qv[v][h * V + x], kf[h][x], dot);
#pragma unroll
        for (int off = kLpk / 2; off >= 1; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const bool visible = t < key_hi && t >= lov[v] && t < hiv[v];
        sc[u][v] = visible ? dot : -INFINITY;
      }
    }
    // One online-softmax update per vector for the tile's kKT keys (attention_decode.cu's).
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      float top = -INFINITY;
#pragma unroll
      for (int u = 0; u < STEPS; ++u) top = fmaxf(top, sc[u][v]);
#pragma unroll
      for (int off = kLpk; off < 32; off *= 2)
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
      const float m_new = fmaxf(m[v], top);  // uniform across the warp
      if (v >= nv || m_new == -INFINITY) {
#pragma unroll
        for (int u = 0; u < STEPS; ++u) sc[u][v] = 0.0f;
        continue;
      }
      const float alpha = __expf(m[v] - m_new);  // 0 while m is -inf
      float sum = 0.0f;
#pragma unroll
      for (int u = 0; u < STEPS; ++u) {
        sc[u][v] = sc[u][v] == -INFINITY ? 0.0f : __expf(sc[u][v] - m_new);  // now p
        sum += sc[u][v];
      }
#pragma unroll
      for (int off = kLpk; off < 32; off *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[v] = l[v] * alpha + sum;
      m[v] = m_new;
#pragma unroll
      for (int x = 0; x < CH * V; ++x) acc[v][x] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < STEPS; ++u) {
      const int row = u * KPS + kg;
      float vf[CH][V];
#pragma unroll
      for (int h = 0; h < CH; ++h)
        unpack16(*reinterpret_cast<const uint4*>(vs + row * D + (c + h * kLpk) * V), vf[h], T{});
#pragma unroll
      for (int v = 0; v < NV; ++v)
#pragma unroll
        for (int h = 0; h < CH; ++h)
#pragma unroll
          for (int x = 0; x < V; ++x)
            acc[v][h * V + x] = fmaf(sc[u][v], vf[h][x], acc[v][h * V + x]);
    }
    __syncwarp();  // the warp is done with this stage before the next iteration refills it
  }
  stage_wait<0>();  // only empty groups are left; none may outlive the reuse below
  // The warp's P.V: the sum over its key groups, per chunk.
#pragma unroll
  for (int v = 0; v < NV; ++v)
#pragma unroll
    for (int x = 0; x < CH * V; ++x)
#pragma unroll
      for (int off = kLpk; off < 32; off *= 2)
        acc[v][x] += __shfl_xor_sync(0xffffffffu, acc[v][x], off);
  // wo[warp] lives in the warp's own stages: no other warp touches them, and this warp's last
  // reads of them are behind the loop's final __syncwarp.
  auto wo = [&](int w) {
    return reinterpret_cast<float*>(reinterpret_cast<T*>(staged_smem) + w * S * kStageElems<T, D>);
  };
  if (kg == 0)
#pragma unroll
    for (int v = 0; v < NV; ++v)
#pragma unroll
      for (int h = 0; h < CH; ++h)
#pragma unroll
        for (int x = 0; x < V; ++x) wo(warp)[v * D + (c + h * kLpk) * V + x] = acc[v][h * V + x];
  if (lane == 0)
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      wml[warp][v][0] = m[v];
      wml[warp][v][1] = l[v];
    }
  __syncthreads();
  // Merge the warps: out = sum_w e^(m_w - M) o_w / sum_w e^(m_w - M) l_w.
  for (int i = tid; i < nv * D; i += blockDim.x) {
    const int v = i / D, e = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wml[w][v][0]);
    float sum = 0.0f, o = 0.0f;
    if (mx != -INFINITY)
      for (int w = 0; w < kWarps; ++w) {
        if (wml[w][v][0] == -INFINITY) continue;
        const float f = expf(wml[w][v][0] - mx);
        sum += f * wml[w][v][1];
        o += f * wo(w)[v * D + e];
      }
    int row, head;
    vector_row_head(a, row_begin, g, v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D + e;
    if (a.splits == 1) {
      const float r = sum > 0.0f ? o / sum : 0.0f;  // no visible key: zeros, as the CPU backend
      a.out[at] = r;
      if (a.out_bf16) static_cast<__nv_bfloat16*>(a.out_bf16)[at] = __float2bfloat16(r);
    } else {
      const int64_t slice = static_cast<int64_t>(split) * a.num_tokens * a.hq;
      a.partial_out[slice * D + at] = o;
      if (e == 0) {
        const int64_t vec = slice + static_cast<int64_t>(row) * a.hq + head;
        a.partial_ml[2 * vec] = mx;
        a.partial_ml[2 * vec + 1] = sum;
      }
    }
  }
  const bool last = a.splits == 1 || merge_splits_if_last(a, b, g, 0, nv, row_begin);
  if constexpr (FQ) {
    // Every block of this (sequence, kv head) has read q: the rotated heads go back in place.
    if (last)
      for (int i = tid; i < nv * D; i += blockDim.x) {
        int row, head;
        vector_row_head(a, row_begin, g, i / D, row, head);
        a.qk.q[(static_cast<int64_t>(row) * a.hq + head) * D + i % D] = qs[i / D][i % D];
      }
  }
}

template <typename T, int D, int NV, int S, bool FQ = false>
void launch_dns(const AttentionArgs& a, cudaStream_t s) {
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(attention_decode_staged_kernel<T, D, NV, S, FQ>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemBytes<T, D, S>)) == cudaSuccess;
  }();
  if (!attr_set)
    throw std::runtime_error("cannot raise the staged decode attention's shared memory");
  const dim3 grid(1, static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.hkv * a.splits));
  launch_pdl(attention_decode_staged_kernel<T, D, NV, S, FQ>, grid, kWarps * 32,
             kSmemBytes<T, D, S>, s, a);
}

template <typename T, int D, int NV>
void launch_dn(const AttentionArgs& a, cudaStream_t s) {
  if (a.fused_qk) return launch_dns<T, D, NV, 3, true>(a, s);  // the host asks for 3 stages
  switch (a.stages) {
    case 3:
      return launch_dns<T, D, NV, 3>(a, s);
    case 6:
      return launch_dns<T, D, NV, 6>(a, s);
    default:
      return launch_dns<T, D, NV, 4>(a, s);
  }
}

template <typename T, int D>
void launch_d(const AttentionArgs& a, cudaStream_t s) {
  if (a.vectors_per_tile <= 2)
    launch_dn<T, D, 2>(a, s);
  else
    launch_dn<T, D, 4>(a, s);
}

template <typename T>
void launch_typed(const AttentionArgs& a, cudaStream_t s) {
  if (a.head_dim == 64)
    launch_d<T, 64>(a, s);
  else
    launch_d<T, 128>(a, s);
}

// Asked once per kernel (the attention op is recorded every layer of every step).
template <typename T, int D, int NV, int S>
int blocks_per_sm() {
  static const int cached = [] {
    int n = 0;
    if (cudaFuncSetAttribute(attention_decode_staged_kernel<T, D, NV, S>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes<T, D, S>)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, attention_decode_staged_kernel<T, D, NV, S>, kWarps * 32, kSmemBytes<T, D, S>) !=
            cudaSuccess) {
      cudaGetLastError();
      return 1;
    }
    return std::max(n, 1);
  }();
  return cached;
}

}  // namespace

bool attention_decode_staged_supports(ElemType type, int64_t head_dim) {
  return (type == ElemType::BF16 || type == ElemType::F16) && (head_dim == 64 || head_dim == 128);
}

int attention_decode_staged_blocks_per_sm(int64_t head_dim, int64_t vectors, int64_t stages) {
  // The bf16 and f16 kernels have the same shape; bf16 stands for both.
  using T = __nv_bfloat16;
  const bool two = vectors <= 2;
  const int st = stages == 3 || stages == 6 ? static_cast<int>(stages) : 4;
  auto pick = [&](auto d) {
    constexpr int D = decltype(d)::value;
    if (two)
      return st == 3   ? blocks_per_sm<T, D, 2, 3>()
             : st == 6 ? blocks_per_sm<T, D, 2, 6>()
                       : blocks_per_sm<T, D, 2, 4>();
    return st == 3   ? blocks_per_sm<T, D, 4, 3>()
           : st == 6 ? blocks_per_sm<T, D, 4, 6>()
                     : blocks_per_sm<T, D, 4, 4>();
  };
  return head_dim == 64 ? pick(std::integral_constant<int, 64>{})
                        : pick(std::integral_constant<int, 128>{});
}

int64_t plan_decode_staged_splits(int64_t tiles, int64_t capacity, int64_t slots, int64_t min_keys,
                                  int64_t max_splits) {
  // Each block's time ~ its keys plus a fixed cost (filling the pipeline, the partials and the
  // merge), and the grid runs in ceil(blocks / slots) waves of equal blocks: pick the split count
  // that minimises waves x (keys per block + fixed cost). The fixed cost is large: on the H200
  // at batch 256 x 512 keys, 2 splits (11 waves of 288 keys) took 216 us against 175 us unsplit
  // (6 waves of 544), i.e. ~290 keys' worth (bench/reference/cudaa_h200, run 1); 256 here.
  // Depends only on the batch's shape and its block tables' capacity, so successive decode steps
  // launch identically (graph replay).
  constexpr int64_t kFixedKeys = 256;
  int64_t best = 1, best_cost = INT64_MAX;
  for (int64_t s = 1; s <= std::min<int64_t>(32, max_splits); ++s) {
    const int64_t per = (capacity + s - 1) / s;
    if (s > 1 && per < min_keys) break;
    const int64_t waves = (tiles * s + slots - 1) / slots;
    const int64_t cost = waves * (per + kFixedKeys);
    if (cost < best_cost) {
      best_cost = cost;
      best = s;
    }
  }
  return best;
}

void launch_attention_decode_staged(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  if (a.type == ElemType::F16)
    launch_typed<__half>(a, s);
  else
    launch_typed<__nv_bfloat16>(a, s);
}

}  // namespace infera::cuda
