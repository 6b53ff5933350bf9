// Paged grouped-query attention on CUDA cores, flash style: one pass over the keys with an
// online softmax, never an L x L matrix. A block owns one (sequence, kv head, tile of up to 32
// query vectors) and optionally one of `splits` key ranges (decode: few queries, so the keys are
// split across blocks to fill the GPU; the last block of a tile to finish merges them). Per 32-key
// tile, the block stages keys and values in shared memory (f32) once for all its query vectors;
// each warp scores 4 query vectors at a time with one key per lane, updates their running max/sum,
// and accumulates P.V with one head dimension per lane. Everything is f32, so this is also the
// exact path for every cache type.
#include <algorithm>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/device_util.cuh"

namespace infera::cuda {
namespace {

constexpr int kKeys = 32, kWarps = 4;

struct SimtLayout {
  int64_t q, o, k, v, p, ml, range, offs, total;  // float offsets into dynamic shared memory
};

__host__ __device__ inline SimtLayout simt_layout(int64_t vectors, int64_t d) {
  const int64_t vp = (vectors + 3) / 4 * 4;  // whole groups of 4 vectors
  SimtLayout l{};
  l.q = 0;
  l.o = l.q + vp * d;
  l.k = l.o + vp * d;
  l.v = l.k + kKeys * (d + 1);  // +1: lanes read different key rows without bank conflicts
  l.p = l.v + kKeys * d;
  l.ml = l.p + vp * kKeys;
  l.range = l.ml + vp * 2;
  l.offs = (l.range + vp * 2 + 2 + 1) / 2 * 2;  // 8-byte aligned: kKeys int64 cache offsets
  l.total = l.offs + 2 * kKeys;
  return l;
}

// Keys and values [t0, t0 + kKeys) of the block's kv head (zeros from key_hi on) into shared
// memory as f32. Each key's cache address is looked up once; rows move in 16-byte loads (several
// in flight per thread) when the head dimension and the pools allow, else element by element.
template <typename T>
__device__ __forceinline__ void load_tile(const AttentionArgs& a, const T* keys, const T* values,
                                          int b, int g, int t0, int key_hi, float* ks, float* vs,
                                          int64_t* offs) {
  const int d = static_cast<int>(a.head_dim), tid = threadIdx.x;
  __syncthreads();  // the previous tile's readers are done with ks, vs and offs
  if (tid < kKeys) offs[tid] = t0 + tid < key_hi ? key_offset(a, b, g, t0 + tid) : -1;
  __syncthreads();
  constexpr int V = kVec16<T>;
  const bool vec =
      d % V == 0 &&
      ((reinterpret_cast<uintptr_t>(keys) | reinterpret_cast<uintptr_t>(values)) % 16) == 0;
  if (vec) {
    const int chunks = d / V, total = kKeys * chunks;
#pragma unroll 4
    for (int i = tid; i < total; i += blockDim.x) {
      const int j = i / chunks, c = i - j * chunks;
      const int64_t off = offs[j];
      uint4 ku = make_uint4(0, 0, 0, 0), vu = make_uint4(0, 0, 0, 0);
      if (off >= 0) {
        ku = __ldg(reinterpret_cast<const uint4*>(keys + off) + c);
        vu = __ldg(reinterpret_cast<const uint4*>(values + off) + c);
      }
      float kf[V], vf[V];
      unpack16(ku, kf, T{});
      unpack16(vu, vf, T{});
#pragma unroll
      for (int x = 0; x < V; ++x) {
        ks[j * (d + 1) + c * V + x] = kf[x];
        vs[j * d + c * V + x] = vf[x];
      }
    }
  } else {
    for (int i = tid; i < kKeys * d; i += blockDim.x) {
      const int j = i / d, e = i - j * d;
      const int64_t off = offs[j];
      ks[j * (d + 1) + e] = off >= 0 ? to_f32(keys[off + e]) : 0.0f;
      vs[j * d + e] = off >= 0 ? to_f32(values[off + e]) : 0.0f;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32) attention_simt_kernel(const AttentionArgs a) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(a.head_dim), group = static_cast<int>(a.hq / a.hkv);
  const int b = blockIdx.y, g = blockIdx.z % a.hkv, split = blockIdx.z / a.hkv;
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int vpt = static_cast<int>(a.vectors_per_tile);
  const int v0 = blockIdx.x * vpt, nv = min(vpt, rows * group - v0);
  if (nv <= 0) return;
  const int len = a.seq_lens[b];
  const SimtLayout L = simt_layout(vpt, d);
  float* qs = smem + L.q;
  float* os = smem + L.o;
  float* ks = smem + L.k;
  float* vs = smem + L.v;
  float* ps = smem + L.p;
  float* ml = smem + L.ml;
  int* range = reinterpret_cast<int*>(smem + L.range);  // [vp][2] lo, hi; then the block's span
  int64_t* offs = reinterpret_cast<int64_t*>(smem + L.offs);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int vp = (vpt + 3) / 4 * 4;
  const float scale = static_cast<float>(a.scale);

  for (int i = tid; i < vp * d; i += blockDim.x) {
    const int v = i / d, e = i % d;
    float val = 0.0f;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      val = a.q[(static_cast<int64_t>(row) * a.hq + head) * d + e] * scale;
    }
    qs[i] = val;
    os[i] = 0.0f;
  }
  for (int i = tid; i < vp * kKeys; i += blockDim.x) ps[i] = 0.0f;
  for (int v = tid; v < vp; v += blockDim.x) {
    int lo = 0, hi = 0;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      key_range(a, a.positions[row], len, lo, hi);
    }
    range[2 * v] = lo;
    range[2 * v + 1] = hi;
    ml[2 * v] = -INFINITY;
    ml[2 * v + 1] = 0.0f;
  }
  __syncthreads();
  if (tid == 0) {
    int lo = len, hi = 0;
    for (int v = 0; v < nv; ++v) {
      lo = min(lo, range[2 * v]);
      hi = max(hi, range[2 * v + 1]);
    }
    // This block's share of the keys: whole 32-key tiles of the span, split evenly.
    const int span = max(hi - lo, 0);
    const int per =
        (((span + static_cast<int>(a.splits) - 1) / static_cast<int>(a.splits)) + kKeys - 1) /
        kKeys * kKeys;
    range[2 * vp] = min(hi, lo + split * per);
    range[2 * vp + 1] = min(hi, lo + (split + 1) * per);
  }
  __syncthreads();
  const int key_lo = range[2 * vp], key_hi = range[2 * vp + 1];
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);

  for (int t0 = key_lo; t0 < key_hi; t0 += kKeys) {
    load_tile(a, keys, values, b, g, t0, key_hi, ks, vs, offs);
    __syncthreads();
    const int t = t0 + lane;
    for (int vb = warp * 4; vb < nv; vb += kWarps * 4) {
      float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const float* kr = ks + lane * (d + 1);
      for (int e = 0; e < d; ++e) {
        const float kv = kr[e];
#pragma unroll
        for (int c = 0; c < 4; ++c) s[c] = fmaf(qs[(vb + c) * d + e], kv, s[c]);
      }
      float alpha[4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        alpha[c] = 1.0f;
        const int v = vb + c;
        if (v >= nv) continue;  // uniform across the warp
        const bool valid = t < key_hi && t >= range[2 * v] && t < range[2 * v + 1];
        const float m_old = ml[2 * v];
        const float m_new = fmaxf(m_old, warp_max(valid ? s[c] : -INFINITY));
        float p = 0.0f;
        if (m_new != -INFINITY) {
          alpha[c] = expf(m_old - m_new);
          p = valid ? expf(s[c] - m_new) : 0.0f;
        }
        const float sum = warp_sum(p);
        ps[v * kKeys + lane] = p;
        __syncwarp();
        if (lane == 0) {
          ml[2 * v] = m_new;
          ml[2 * v + 1] = ml[2 * v + 1] * alpha[c] + sum;
        }
      }
      __syncwarp();
      for (int e = lane; e < d; e += 32) {
        float acc[4];
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[c] = os[(vb + c) * d + e] * alpha[c];
        for (int j = 0; j < kKeys; ++j) {
          const float vv = vs[j * d + e];
#pragma unroll
          for (int c = 0; c < 4; ++c) acc[c] = fmaf(ps[(vb + c) * kKeys + j], vv, acc[c]);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) os[(vb + c) * d + e] = acc[c];
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int i = tid; i < nv * d; i += blockDim.x) {
    const int v = i / d, e = i % d;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * d + e;
    if (a.splits == 1) {
      const float l = ml[2 * v + 1];
      a.out[at] = l > 0.0f ? os[i] / l : 0.0f;  // no visible key: zeros, as the CPU backend
    } else {
      const int64_t slice = static_cast<int64_t>(split) * a.num_tokens * a.hq;
      a.partial_out[slice * d + at] = os[i];
      if (e == 0) {
        const int64_t vec = slice + static_cast<int64_t>(row) * a.hq + head;
        a.partial_ml[2 * vec] = ml[2 * v];
        a.partial_ml[2 * vec + 1] = ml[2 * v + 1];
      }
    }
  }
  if (a.splits > 1) merge_splits_if_last(a, b, g, v0, nv, row_begin);
}

template <typename T>
void launch_typed(const AttentionArgs& a, cudaStream_t s) {
  const auto smem = static_cast<size_t>(attention_simt_smem_bytes(a.vectors_per_tile, a.head_dim));
  // Raising the dynamic shared-memory limit is not a stream operation; the first launch of any
  // configuration runs eagerly (never inside a graph capture), so this runs outside captures.
  static size_t raised = 48 * 1024;
  if (smem > raised) {
    cudaFuncSetAttribute(attention_simt_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
    raised = smem;
  }
  const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.hkv * a.splits));
  attention_simt_kernel<T><<<grid, kWarps * 32, smem, s>>>(a);
}

}  // namespace

int64_t attention_simt_smem_bytes(int64_t vectors_per_tile, int64_t head_dim) {
  return simt_layout(vectors_per_tile, head_dim).total * static_cast<int64_t>(sizeof(float));
}

void launch_attention_simt(const void* p, cudaStream_t s) {
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
