// Paged grouped-query attention on the tensor cores (FlashAttention-2 structure) for f16/bf16
// caches: a block of 4 warps owns 64 query vectors (sequence rows x the q heads of one kv head,
// row-major), 16 per warp. Per 64-key tile, keys and (transposed) values are staged in shared
// memory once for all 64 vectors; each warp computes its 16 x 64 scores with mma.sync m16n8k16
// (f32 accumulation), masks them, updates the running max and sum in registers, and multiplies
// the probabilities (rounded to the cache type) by the values, again on the tensor cores. Queries
// are scaled and rounded to the cache type once. No L x L matrix exists anywhere.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda {
namespace {

constexpr int kVectors = static_cast<int>(kMmaVectorsPerTile), kKeys = 64, kWarps = 4;

__device__ __forceinline__ uint32_t load32(const void* p) {
  return *static_cast<const uint32_t*>(p);
}

template <typename T, int D>
__global__ void __launch_bounds__(kWarps * 32) attention_mma_kernel(const AttentionArgs a) {
  constexpr int kRow = D + 8;       // padded row of Q/K tiles (elements): conflict-free fragments
  constexpr int kVRow = kKeys + 8;  // padded row of the transposed V tile
  __shared__ __align__(16) T qk[kVectors * kRow];  // queries first, then each key tile
  __shared__ __align__(16) T vt[D * kVRow];        // values, transposed: [dim][key]
  __shared__ int range[kVectors * 2 + 2];
  __shared__ int64_t offs[kKeys];  // cache offset of each key of the tile (-1: past the range)

  const int group = static_cast<int>(a.hq / a.hkv);
  const int b = blockIdx.y, g = blockIdx.z;
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int v0 = blockIdx.x * kVectors, nv = min(kVectors, rows * group - v0);
  if (nv <= 0) return;
  const int len = a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates
  const float scale = static_cast<float>(a.scale);

  for (int i = tid; i < kVectors * D; i += blockDim.x) {
    const int v = i / D, e = i % D;
    float val = 0.0f;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      val = a.q[(static_cast<int64_t>(row) * a.hq + head) * D + e] * scale;
    }
    qk[v * kRow + e] = from_f32<T>(val);
  }
  for (int v = tid; v < kVectors; v += blockDim.x) {
    int lo = 0, hi = 0;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      key_range(a, a.positions[row], len, lo, hi);
    }
    range[2 * v] = lo;
    range[2 * v + 1] = hi;
  }
  __syncthreads();
  if (tid == 0) {
    int lo = len, hi = 0;
    for (int v = 0; v < nv; ++v) {
      lo = min(lo, range[2 * v]);
      hi = max(hi, range[2 * v + 1]);
    }
    range[2 * kVectors] = lo;
    range[2 * kVectors + 1] = max(lo, hi);
  }
  __syncthreads();

  // This thread's two query vectors (fragment rows gid and gid + 8 of its warp's 16).
  const int r0 = warp * 16 + gid, r1 = r0 + 8;
  const int lo0 = range[2 * r0], hi0 = range[2 * r0 + 1];
  const int lo1 = range[2 * r1], hi1 = range[2 * r1 + 1];
  const int key_lo = range[2 * kVectors], key_hi = range[2 * kVectors + 1];

  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = kk * 16 + tig * 2;
    qa[kk][0] = load32(&qk[r0 * kRow + c]);
    qa[kk][1] = load32(&qk[r1 * kRow + c]);
    qa[kk][2] = load32(&qk[r0 * kRow + c + 8]);
    qa[kk][3] = load32(&qk[r1 * kRow + c + 8]);
  }
  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);
  constexpr int kChunks = D / 8;  // 16-byte chunks per key row

  for (int t0 = key_lo; t0 < key_hi; t0 += kKeys) {
    __syncthreads();  // queries loaded into registers / the previous tile consumed
    // Each key's address once per tile (the block-table lookup and division), not per chunk.
    if (tid < kKeys) offs[tid] = t0 + tid < key_hi ? key_offset(a, b, g, t0 + tid) : -1;
    __syncthreads();
    // Keys: chunk-fastest, so a warp reads whole rows (coalesced) and stores whole rows.
    for (int i = tid; i < kKeys * kChunks; i += blockDim.x) {
      const int j = i / kChunks, c = i % kChunks;
      uint4 u = make_uint4(0, 0, 0, 0);
      if (offs[j] >= 0) u = __ldg(reinterpret_cast<const uint4*>(keys + offs[j]) + c);
      *reinterpret_cast<uint4*>(&qk[j * kRow + c * 8]) = u;
    }
    // Values: key-fastest, so that the transposed 2-byte stores of a warp hit distinct banks.
    for (int i = tid; i < kKeys * kChunks; i += blockDim.x) {
      const int j = i % kKeys, c = i / kKeys;
      uint4 u = make_uint4(0, 0, 0, 0);
      if (offs[j] >= 0) u = __ldg(reinterpret_cast<const uint4*>(values + offs[j]) + c);
      T el[8];
      memcpy(el, &u, 16);
#pragma unroll
      for (int x = 0; x < 8; ++x) vt[(c * 8 + x) * kVRow + j] = el[x];
    }
    __syncthreads();

    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        const T* kr = &qk[(nt * 8 + gid) * kRow + kk * 16 + tig * 2];
        mma_16816(s[nt], qa[kk], load32(kr), load32(kr + 8), T{});
      }

    // Mask, then the online softmax of rows r0 and r1 (mma_tile.cuh).
    online_softmax_tile<kKeys, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
    // O += P . V: the score accumulators of two 8-key tiles are exactly an A fragment.
#pragma unroll
    for (int kt = 0; kt < kKeys / 16; ++kt) {
      uint32_t pa[4];
      pa[0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const T* vr = &vt[(dt * 8 + gid) * kVRow + kt * 16 + tig * 2];
        mma_16816(o[dt], pa, load32(vr), load32(vr + 8), T{});
      }
    }
  }

  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = half == 0 ? r0 : r1;
    if (v >= nv) continue;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    float* dst = a.out + (static_cast<int64_t>(row) * a.hq + head) * D;
    const float inv = half == 0 ? inv0 : inv1;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + tig * 2;
      *reinterpret_cast<float2*>(dst + c) =
          make_float2(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
    }
  }
}

template <typename T>
void launch_typed(const AttentionArgs& a, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.hkv));
  switch (a.head_dim) {
    case 16:
      return attention_mma_kernel<T, 16><<<grid, kWarps * 32, 0, s>>>(a);
    case 32:
      return attention_mma_kernel<T, 32><<<grid, kWarps * 32, 0, s>>>(a);
    case 64:
      return attention_mma_kernel<T, 64><<<grid, kWarps * 32, 0, s>>>(a);
    default:
      return attention_mma_kernel<T, 128><<<grid, kWarps * 32, 0, s>>>(a);
  }
}

}  // namespace

bool attention_mma_supports(ElemType type, int64_t head_dim) {
  return type != ElemType::F32 &&
         (head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128);
}

void launch_attention_mma(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  if (a.type == ElemType::BF16)
    launch_typed<__nv_bfloat16>(a, s);
  else
    launch_typed<__half>(a, s);
}

}  // namespace infera::cuda
