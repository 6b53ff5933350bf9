// Packed encoder attention on bf16 tensor cores (flash-style, one pass): the default for
// attention_packed when every q head has its own kv head and head_dim is a multiple of 16 up to
// 128 (ModernBERT: 64). q, k and v arrive as f32 [T, heads, d] and are rounded to bf16 as they are
// staged in shared memory; scores, the online softmax and the output accumulate in f32; the
// probabilities are rounded to bf16 for the P.V product. The f32 kernel (encoder.cu) serves
// everything else and the exact-f32 mode.
//
// A block owns (query tile of 64 rows, sequence, head); each of its 4 warps 16 of the rows. It
// walks the 64-key tiles (aligned to the sequence start) that overlap the union of its rows'
// windows, or every tile with a.dense: per tile S = Q.K^T (WMMA 16x16x16), masking per element
// (beyond the sequence, outside the window, after the row when causal), the online softmax per
// row, then O = O * alpha + P.V with O kept in shared memory (WMMA fragments' element order is
// opaque, so the per-row rescale happens there).
#include <mma.h>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

using namespace nvcuda;

constexpr int kRows = 64;  // query rows per block
constexpr int kKeys = 64;  // keys per tile
constexpr int kWarps = 4;  // 16 rows each
constexpr int kSPad = 68;  // f32 row stride of a warp's score tile
constexpr int kPPad = 72;  // bf16 row stride of a warp's probability tile

struct Layout {
  int dp, op;  // bf16 row stride of Q/K/V tiles, f32 row stride of a warp's O
  size_t q, k, v, warp, s, p, o, ml, bytes;
};

__host__ __device__ inline Layout layout(int d) {
  Layout L{};
  L.dp = d + 8;
  L.op = d + 4;
  L.q = 0;
  L.k = L.q + sizeof(__nv_bfloat16) * kRows * L.dp;
  L.v = L.k + sizeof(__nv_bfloat16) * kKeys * L.dp;
  L.warp = L.v + sizeof(__nv_bfloat16) * kKeys * L.dp;
  // Per warp: S [16][kSPad] f32, P [16][kPPad] bf16, O [16][op] f32, m, l, alpha [16] f32.
  L.s = 0;
  L.p = L.s + sizeof(float) * 16 * kSPad;
  L.o = L.p + sizeof(__nv_bfloat16) * 16 * kPPad;
  L.ml = L.o + sizeof(float) * 16 * L.op;
  const size_t per_warp = (L.ml + sizeof(float) * 48 + 127) / 128 * 128;
  L.bytes = L.warp + kWarps * per_warp;
  return L;
}

__device__ __forceinline__ size_t warp_stride(const Layout& L) {
  return (L.ml + sizeof(float) * 48 + 127) / 128 * 128;
}

__global__ void __launch_bounds__(kWarps * 32)
    packed_attention_mma_kernel(const PackedAttentionArgs a) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int d = static_cast<int>(a.head_dim), heads = static_cast<int>(a.hq);
  const int b = blockIdx.y, h = blockIdx.z;
  const int start = a.query_start[b], len = a.query_start[b + 1] - start;
  const int q0 = blockIdx.x * kRows;
  if (q0 >= len) return;
  const Layout L = layout(d);
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem + L.q);
  auto* ks = reinterpret_cast<__nv_bfloat16*>(smem + L.k);
  auto* vs = reinterpret_cast<__nv_bfloat16*>(smem + L.v);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  unsigned char* wbase = smem + L.warp + warp * warp_stride(L);
  auto* S = reinterpret_cast<float*>(wbase + L.s);
  auto* P = reinterpret_cast<__nv_bfloat16*>(wbase + L.p);
  auto* O = reinterpret_cast<float*>(wbase + L.o);
  float* M = reinterpret_cast<float*>(wbase + L.ml);
  float* Lsum = M + 16;
  float* alpha = M + 32;
  const float scale = static_cast<float>(a.scale);
  const int64_t stride = static_cast<int64_t>(heads) * d;  // f32 elements between rows

  for (int i = tid; i < kRows * d; i += blockDim.x) {
    const int r = i / d, e = i % d;
    const float v = q0 + r < len ? a.q[(start + q0 + r) * stride + h * d + e] * scale : 0.0f;
    qs[r * L.dp + e] = __float2bfloat16(v);
  }
  for (int i = lane; i < 16 * d; i += 32) O[(i / d) * L.op + i % d] = 0.0f;
  if (lane < 16) {
    M[lane] = -INFINITY;
    Lsum[lane] = 0.0f;
  }

  const int last = min(len, q0 + kRows) - 1;
  const bool dense = a.dense != 0;
  const int window = static_cast<int>(a.window);
  const int lo = dense || window < 0 ? 0 : max(0, q0 - window);
  int hi = dense || window < 0 ? len : min(len, last + window + 1);
  if (a.causal && !dense) hi = min(hi, last + 1);
  const int r = lane / 2, half = lane % 2;  // softmax: a lane owns half of one row
  const int row = q0 + warp * 16 + r;       // that row's offset in the sequence

  for (int t0 = lo / kKeys * kKeys; t0 < hi; t0 += kKeys) {
    __syncthreads();  // the previous tile's readers are done (and Q is staged)
    for (int i = tid; i < kKeys * d; i += blockDim.x) {
      const int j = i / d, e = i % d;
      const bool in = t0 + j < len;
      const int64_t at = (start + t0 + j) * stride + h * d + e;
      ks[j * L.dp + e] = __float2bfloat16(in ? a.k[at] : 0.0f);
      vs[j * L.dp + e] = __float2bfloat16(in ? a.v[at] : 0.0f);
    }
    __syncthreads();
    // S = Q_w . K^T: 16 x 64, four 16-key fragments.
#pragma unroll
    for (int n = 0; n < kKeys / 16; ++n) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kk = 0; kk < d; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
        wmma::load_matrix_sync(fa, qs + (warp * 16) * L.dp + kk, L.dp);
        wmma::load_matrix_sync(fb, ks + (n * 16) * L.dp + kk, L.dp);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(S + n * 16, acc, kSPad, wmma::mem_row_major);
    }
    __syncwarp();
    // Online softmax of row r over this tile's visible keys (two lanes per row).
    float mx = -INFINITY;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const int t = t0 + c;
      const bool vis =
          row < len && t < len && (!a.causal || t <= row) && (window < 0 || abs(row - t) <= window);
      const float s = vis ? S[r * kSPad + c] : -INFINITY;
      S[r * kSPad + c] = s;
      mx = fmaxf(mx, s);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_old = M[r];
    const float m_new = fmaxf(m_old, mx);
    float sum = 0.0f;
    const float al = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);  // 0 when m_old is -inf
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const float s = S[r * kSPad + c];
      const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
      P[r * kPPad + c] = __float2bfloat16(p);
      sum += p;
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    __syncwarp();
    if (half == 0) {
      M[r] = m_new;
      Lsum[r] = Lsum[r] * al + sum;
      alpha[r] = al;
    }
    __syncwarp();
    // O = O * alpha + P . V, 64 output columns at a time through S as scratch.
    for (int c0 = 0; c0 < d; c0 += 64) {
      const int frags = min(4, (d - c0) / 16);
      for (int n = 0; n < frags; ++n) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < kKeys; kk += 16) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb;
          wmma::load_matrix_sync(fa, P + kk, kPPad);
          wmma::load_matrix_sync(fb, vs + kk * L.dp + c0 + n * 16, L.dp);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(S + n * 16, acc, kSPad, wmma::mem_row_major);
      }
      __syncwarp();
      for (int i = lane; i < 16 * frags * 16; i += 32) {
        const int rr = i / (frags * 16), cc = i % (frags * 16);
        float& o = O[rr * L.op + c0 + cc];
        o = o * alpha[rr] + S[rr * kSPad + cc];
      }
      __syncwarp();
    }
  }
  __syncwarp();
  for (int i = lane; i < 16 * d; i += 32) {
    const int rr = i / d, e = i % d, q = q0 + warp * 16 + rr;
    if (q >= len) continue;
    const float l = Lsum[rr];
    a.out[(start + q) * stride + h * d + e] = l > 0.0f ? O[rr * L.op + e] / l : 0.0f;
  }
}

}  // namespace

int64_t packed_attention_mma_smem_bytes(int64_t head_dim) {
  return static_cast<int64_t>(layout(static_cast<int>(head_dim)).bytes);
}

void launch_packed_attention_mma(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const PackedAttentionArgs*>(p);
  const auto smem = static_cast<size_t>(packed_attention_mma_smem_bytes(a.head_dim));
  // Not a stream operation; a configuration's first launch runs eagerly, outside any capture.
  static size_t raised = 48 * 1024;
  if (smem > raised) {
    cudaFuncSetAttribute(packed_attention_mma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
    raised = smem;
  }
  const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.hq));
  packed_attention_mma_kernel<<<grid, kWarps * 32, smem, s>>>(a);
}

}  // namespace infera::cuda
