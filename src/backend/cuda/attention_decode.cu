// Decode attention: at most kDecodeMaxVectors query vectors (rows x the q heads sharing one kv
// head) per (sequence, kv head), as in a decode step. The general kernels give such a tile to one
// warp; here every warp of the block walks its own keys. A lane group of LPK lanes holds one key:
// each lane loads 16 bytes of its key's row and of its value row (one pass over the cache, no
// shared-memory staging), the group sums its partial dot products, and each warp keeps an online
// softmax (running max, sum, unnormalised P.V in registers) per vector, updated once per round of
// U steps of KPI = 32 / LPK keys, with the round's loads all in flight. The block merges its warps
// in shared memory; with split keys, the last block of a (sequence, kv head) merges the splits.
// Arithmetic is f32 throughout (every cache type; the exact path too).
#include <algorithm>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/device_util.cuh"

namespace infera::cuda {
namespace {

constexpr int kWarps = 4;

// NV: query vectors the registers hold (2 or 4; a block has nv <= NV), sizing the per-vector
// state so that the common GQA group of 2 keeps registers for more loads in flight (U steps)
// and fits four blocks per multiprocessor (128 registers, no spills).
// P (pipelined): rounds of U = 4 steps whose next round's loads are issued before this round's
// arithmetic, so a warp always has loads in flight (the same registers as 8 steps unpipelined,
// which left the memory idle while a warp computed: 2.1-2.8 TB/s at batch 64-256).
template <typename T, int LPK, int NV, bool P>
__global__ void __launch_bounds__(kWarps * 32, NV == 2 ? 4 : 1)
    attention_decode_kernel(const AttentionArgs a) {
  constexpr int V = kVec16<T>, KPI = 32 / LPK, U = P ? 4 : 8, D = LPK * V;
  // Every array 16-byte aligned and a multiple of 16 bytes long: the compiler widens the reads
  // of vr and span to 128-bit loads, which must not reach into a neighbour that another warp
  // writes without a barrier (racecheck flagged exactly that with vr placed after wml).
  __shared__ __align__(16) float qs[NV][D];
  __shared__ __align__(16) float wo[kWarps][NV][D];
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
  // Above: the batch's indices only (PDL, device_util.cuh); q and the cache after the wait.
  pdl_wait();
  pdl_trigger();
  for (int i = tid; i < NV * D; i += blockDim.x) {
    const int v = i / D, e = i % D;
    float val = 0.0f;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v, row, head);
      val = a.q[(static_cast<int64_t>(row) * a.hq + head) * D + e] * scale;
    }
    qs[v][e] = val;
  }
  decode_block_key_span<NV>(a, row_begin, g, nv, len, split, vr, span);
  const int key_lo = span[0], key_hi = span[1];
  const int c = lane % LPK, kg = lane / LPK;  // this lane: chunk c of key kg of each step
  float qv[NV][V], acc[NV][V], m[NV], l[NV];
  int lov[NV], hiv[NV];
#pragma unroll
  for (int v = 0; v < NV; ++v) {
#pragma unroll
    for (int x = 0; x < V; ++x) {
      qv[v][x] = qs[v][c * V + x];
      acc[v][x] = 0.0f;
    }
    m[v] = -INFINITY;
    l[v] = 0.0f;
    lov[v] = vr[v][0];
    hiv[v] = vr[v][1];
  }
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);
  constexpr int kStep = kWarps * KPI;  // keys between a warp's consecutive steps
  // Every load of a round's U steps at once (zeros past the range), then the arithmetic.
  auto load_round = [&](int base, uint4(&ku)[U], uint4(&vu)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = base + u * kStep + kg;
      ku[u] = vu[u] = make_uint4(0, 0, 0, 0);
      if (t < key_hi) {
        const int64_t off = key_offset(a, b, g, t) + c * V;
        ku[u] = __ldg(reinterpret_cast<const uint4*>(keys + off));
        vu[u] = __ldg(reinterpret_cast<const uint4*>(values + off));
      }
    }
  };
  uint4 ku[U], vu[U];
  if constexpr (P) load_round(key_lo + warp * KPI, ku, vu);
  for (int base = key_lo + warp * KPI; base < key_hi; base += kStep * U) {
    uint4 kn[U], vn[U];
    if constexpr (P)
      load_round(base + kStep * U, kn, vn);  // the next round, in flight during this one
    else
      load_round(base, ku, vu);
    // The U steps' scores first (independent: their shuffles overlap), then one online-softmax
    // update per vector for all U * KPI keys, so the loop-carried chain is per round, not per key.
    float sc[U][NV];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int t = base + u * kStep + kg;
      float kf[V];
      unpack16(ku[u], kf, T{});
#pragma unroll
      for (int v = 0; v < NV; ++v) {
        float dot = 0.0f;
#pragma unroll
        for (int x = 0; x < V; ++x) dot = fmaf(qv[v][x], kf[x], dot);
#pragma unroll
        for (int off = LPK / 2; off >= 1; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
        const bool visible = t < key_hi && t >= lov[v] && t < hiv[v];
        sc[u][v] = visible ? dot : -INFINITY;
      }
    }
#pragma unroll
    for (int v = 0; v < NV; ++v) {
      float top = -INFINITY;
#pragma unroll
      for (int u = 0; u < U; ++u) top = fmaxf(top, sc[u][v]);
#pragma unroll
      for (int off = LPK; off < 32; off *= 2)
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
      const float m_new = fmaxf(m[v], top);  // uniform across the warp
      if (v >= nv || m_new == -INFINITY) {   // no such vector, or nothing visible yet
#pragma unroll
        for (int u = 0; u < U; ++u) sc[u][v] = 0.0f;
        continue;
      }
      // __expf (ex2.approx): a few ulp on p, far inside every bound, and a third of the
      // instructions of expf in the loop that decides batched decode's bandwidth.
      const float alpha = __expf(m[v] - m_new);  // 0 while m is -inf
      float sum = 0.0f;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        sc[u][v] = sc[u][v] == -INFINITY ? 0.0f : __expf(sc[u][v] - m_new);  // now p
        sum += sc[u][v];
      }
      // Every lane of a key's group holds the same p: one term per key across the groups.
#pragma unroll
      for (int off = LPK; off < 32; off *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      l[v] = l[v] * alpha + sum;
      m[v] = m_new;
#pragma unroll
      for (int x = 0; x < V; ++x) acc[v][x] *= alpha;
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float vf[V];
      unpack16(vu[u], vf, T{});
#pragma unroll
      for (int v = 0; v < NV; ++v)
#pragma unroll
        for (int x = 0; x < V; ++x) acc[v][x] = fmaf(sc[u][v], vf[x], acc[v][x]);
    }
    if constexpr (P)
#pragma unroll
      for (int u = 0; u < U; ++u) {
        ku[u] = kn[u];
        vu[u] = vn[u];
      }
  }
  // The warp's P.V: the sum over its key groups, per chunk.
#pragma unroll
  for (int v = 0; v < NV; ++v)
#pragma unroll
    for (int x = 0; x < V; ++x)
#pragma unroll
      for (int off = LPK; off < 32; off *= 2)
        acc[v][x] += __shfl_xor_sync(0xffffffffu, acc[v][x], off);
  if (kg == 0)
#pragma unroll
    for (int v = 0; v < NV; ++v)
#pragma unroll
      for (int x = 0; x < V; ++x) wo[warp][v][c * V + x] = acc[v][x];
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
        o += f * wo[w][v][e];
      }
    int row, head;
    vector_row_head(a, row_begin, g, v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D + e;
    if (a.splits == 1) {
      a.out[at] = sum > 0.0f ? o / sum : 0.0f;  // no visible key: zeros, as the CPU backend
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
  if (a.splits > 1) merge_splits_if_last(a, b, g, 0, nv, row_begin);
}

template <typename T, int LPK, bool P>
void launch_lpk_p(const AttentionArgs& a, cudaStream_t s) {
  const dim3 grid(1, static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.hkv * a.splits));
  if (a.vectors_per_tile <= 2)
    launch_pdl(attention_decode_kernel<T, LPK, 2, P>, grid, kWarps * 32, 0, s, a);
  else
    launch_pdl(attention_decode_kernel<T, LPK, 4, P>, grid, kWarps * 32, 0, s, a);
}

template <typename T, int LPK>
void launch_lpk(const AttentionArgs& a, cudaStream_t s) {
  if (a.pipelined)
    launch_lpk_p<T, LPK, true>(a, s);
  else
    launch_lpk_p<T, LPK, false>(a, s);
}

template <typename T>
void launch_typed(const AttentionArgs& a, cudaStream_t s) {
  switch (a.head_dim / kVec16<T>) {
    case 1:
      return launch_lpk<T, 1>(a, s);
    case 2:
      return launch_lpk<T, 2>(a, s);
    case 4:
      return launch_lpk<T, 4>(a, s);
    case 8:
      return launch_lpk<T, 8>(a, s);
    case 16:
      return launch_lpk<T, 16>(a, s);
    default:
      return launch_lpk<T, 32>(a, s);
  }
}

}  // namespace

bool attention_decode_supports(ElemType type, int64_t head_dim) {
  const int64_t v = type == ElemType::F32 ? 4 : 8;
  if (head_dim <= 0 || head_dim % v != 0) return false;
  const int64_t lanes = head_dim / v;
  return lanes <= 32 && (lanes & (lanes - 1)) == 0;
}

void launch_attention_decode(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  switch (a.type) {
    case ElemType::F32:
      return launch_typed<float>(a, s);
    case ElemType::F16:
      return launch_typed<__half>(a, s);
    case ElemType::BF16:
      return launch_typed<__nv_bfloat16>(a, s);
  }
}

}  // namespace infera::cuda
