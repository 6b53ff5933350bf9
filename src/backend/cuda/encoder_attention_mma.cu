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
// row (each lane two columns, shuffles for the row's max and sum; the running max and sum live in
// registers), then O = O * alpha + P.V with O kept in shared memory (WMMA fragments' element
// order is opaque, so the per-row rescale happens there).
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
  float* Lsum = reinterpret_cast<float*>(wbase + L.ml);
  float* alpha = Lsum + 16;
  const float scale = static_cast<float>(a.scale);
  const int64_t stride = static_cast<int64_t>(heads) * d;  // f32 elements between rows

  // Staging: float4 loads (rows are 16-byte aligned: the host checks the base addresses), two
  // bf16x2 stores each.
  const int d4 = d / 4;
  for (int i = tid; i < kRows * d4; i += blockDim.x) {
    const int r = i / d4, e = (i % d4) * 4;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (q0 + r < len)
      v = *reinterpret_cast<const float4*>(a.q + (start + q0 + r) * stride + h * d + e);
    auto* dst = reinterpret_cast<__nv_bfloat162*>(qs + r * L.dp + e);
    dst[0] = __floats2bfloat162_rn(v.x * scale, v.y * scale);
    dst[1] = __floats2bfloat162_rn(v.z * scale, v.w * scale);
  }
  for (int i = lane; i < 16 * d; i += 32) O[(i / d) * L.op + i % d] = 0.0f;
  // Each row's running max and sum, held (identically) by every lane of the warp.
  float m_run[16], l_run[16];
#pragma unroll
  for (int i = 0; i < 16; ++i) m_run[i] = -INFINITY, l_run[i] = 0.0f;

  const int last = min(len, q0 + kRows) - 1;
  const bool dense = a.dense != 0;
  const int window = static_cast<int>(a.window);
  const int lo = dense || window < 0 ? 0 : max(0, q0 - window);
  int hi = dense || window < 0 ? len : min(len, last + window + 1);
  if (a.causal && !dense) hi = min(hi, last + 1);

  for (int t0 = lo / kKeys * kKeys; t0 < hi; t0 += kKeys) {
    __syncthreads();  // the previous tile's readers are done (and Q is staged)
    for (int i = tid; i < kKeys * d4; i += blockDim.x) {
      const int j = i / d4, e = (i % d4) * 4;
      float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vv = kv;
      if (t0 + j < len) {
        const int64_t at = (start + t0 + j) * stride + h * d + e;
        kv = *reinterpret_cast<const float4*>(a.k + at);
        vv = *reinterpret_cast<const float4*>(a.v + at);
      }
      auto* kd = reinterpret_cast<__nv_bfloat162*>(ks + j * L.dp + e);
      auto* vd = reinterpret_cast<__nv_bfloat162*>(vs + j * L.dp + e);
      kd[0] = __floats2bfloat162_rn(kv.x, kv.y);
      kd[1] = __floats2bfloat162_rn(kv.z, kv.w);
      vd[0] = __floats2bfloat162_rn(vv.x, vv.y);
      vd[1] = __floats2bfloat162_rn(vv.z, vv.w);
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
    // Online softmax, row by row over the warp's 16 rows: every lane two adjacent columns, the
    // row's max and sum by warp shuffles.
#pragma unroll
    for (int rr = 0; rr < 16; ++rr) {
      const int row = q0 + warp * 16 + rr, t = t0 + 2 * lane;
      const float2 sv = *reinterpret_cast<const float2*>(S + rr * kSPad + 2 * lane);
      const bool v0 =
          row < len && t < len && (!a.causal || t <= row) && (window < 0 || abs(row - t) <= window);
      const bool v1 = row < len && t + 1 < len && (!a.causal || t + 1 <= row) &&
                      (window < 0 || abs(row - t - 1) <= window);
      const float mx = warp_max(fmaxf(v0 ? sv.x : -INFINITY, v1 ? sv.y : -INFINITY));
      const float m_new = fmaxf(m_run[rr], mx);
      const float al = m_new == -INFINITY ? 1.0f : expf(m_run[rr] - m_new);  // 0 from -inf
      const float p0 = v0 ? expf(sv.x - m_new) : 0.0f, p1 = v1 ? expf(sv.y - m_new) : 0.0f;
      *reinterpret_cast<__nv_bfloat162*>(P + rr * kPPad + 2 * lane) = __floats2bfloat162_rn(p0, p1);
      l_run[rr] = l_run[rr] * al + warp_sum(p0 + p1);
      m_run[rr] = m_new;
      if (lane == 0) alpha[rr] = al;
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
  if (lane == 0)
#pragma unroll
    for (int i = 0; i < 16; ++i) Lsum[i] = l_run[i];
  __syncwarp();
  for (int i = lane; i < 16 * d; i += 32) {
    const int rr = i / d, e = i % d, q = q0 + warp * 16 + rr;
    if (q >= len) continue;
    const float l = Lsum[rr];
    const float y = l > 0.0f ? O[rr * L.op + e] / l : 0.0f;
    a.out[(start + q) * stride + h * d + e] = y;
    if (a.out_bf16)  // the next GEMM's input (CudaOptions::bf16_shadow)
      static_cast<__nv_bfloat16*>(a.out_bf16)[(start + q) * stride + h * d + e] =
          from_f32<__nv_bfloat16>(y);
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
