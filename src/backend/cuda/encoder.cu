// The encoder (ModernBERT) kernels: LayerNorm, GELU/GeGLU (exact erf form), bias add, mean pooling
// and packed bidirectional/windowed attention. All f32 arithmetic, as the CPU backend.
#include <algorithm>
#include <stdexcept>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"

namespace infera::cuda {
namespace {

// One block per row; two passes over the row (mean, then the mean of squared deviations), as
// torch.nn.LayerNorm. out may alias x: each element is read before its own write.
template <typename W>
__global__ void layernorm_kernel(const float* x, const W* __restrict__ w, const W* __restrict__ b,
                                 float* out, __nv_bfloat16* __restrict__ ob, int64_t dim,
                                 float eps) {
  __shared__ float part[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
  const float mean = block_sum(s, part) / static_cast<float>(dim);
  float q = 0.0f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float c = xr[i] - mean;
    q += c * c;
  }
  const float inv = 1.0f / sqrtf(block_sum(q, part) / static_cast<float>(dim) + eps);
  float* yr = out + static_cast<int64_t>(blockIdx.x) * dim;
  __nv_bfloat16* obr = ob ? ob + static_cast<int64_t>(blockIdx.x) * dim : nullptr;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float y = (xr[i] - mean) * inv * to_f32(w[i]) + (b ? to_f32(b[i]) : 0.0f);
    yr[i] = y;
    if (obr) obr[i] = from_f32<__nv_bfloat16>(y);
  }
}

// The same LayerNorm with the row in registers (K float4 per thread; dim % 4 == 0, 16-byte
// aligned rows): x is read once instead of twice, with 16-byte loads. Same two passes and
// formula; the sums' order follows the float4 partition (f32 rounding may differ from above).
// With delta (add_layernorm), the row is x + delta, written back to sum_out (== x) as the add
// kernel would: each thread writes only the chunks it read, so x may be updated in place.
template <typename W, int K>
__global__ void layernorm_rows_kernel(const float* x, const W* __restrict__ w,
                                      const W* __restrict__ b, float* out,
                                      __nv_bfloat16* __restrict__ ob, int64_t dim, float eps,
                                      const float* delta, float* sum_out) {
  __shared__ float part[32];
  const int64_t row = blockIdx.x;
  const int chunks = static_cast<int>(dim / 4);
  const float4* xr = reinterpret_cast<const float4*>(x + row * dim);
  const float4* dr = delta ? reinterpret_cast<const float4*>(delta + row * dim) : nullptr;
  float4* sr = sum_out ? reinterpret_cast<float4*>(sum_out + row * dim) : nullptr;
  float4 v[K];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    v[k] = c < chunks ? xr[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (dr && c < chunks) {
      const float4 d = dr[c];
      v[k] = make_float4(v[k].x + d.x, v[k].y + d.y, v[k].z + d.z, v[k].w + d.w);
      sr[c] = v[k];
    }
    s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
  }
  const float mean = block_sum(s, part) / static_cast<float>(dim);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= chunks) continue;
    const float a = v[k].x - mean, bb = v[k].y - mean, cc = v[k].z - mean, d = v[k].w - mean;
    q += (a * a + bb * bb) + (cc * cc + d * d);
  }
  const float inv = 1.0f / sqrtf(block_sum(q, part) / static_cast<float>(dim) + eps);
  float4* yr = out ? reinterpret_cast<float4*>(out + row * dim) : nullptr;  // null: bf16 only
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= chunks) continue;
    const int64_t i = 4 * static_cast<int64_t>(c);
    float4 y;
    y.x = (v[k].x - mean) * inv * to_f32(w[i]) + (b ? to_f32(b[i]) : 0.0f);
    y.y = (v[k].y - mean) * inv * to_f32(w[i + 1]) + (b ? to_f32(b[i + 1]) : 0.0f);
    y.z = (v[k].z - mean) * inv * to_f32(w[i + 2]) + (b ? to_f32(b[i + 2]) : 0.0f);
    y.w = (v[k].w - mean) * inv * to_f32(w[i + 3]) + (b ? to_f32(b[i + 3]) : 0.0f);
    if (yr) yr[c] = y;
    if (ob) store_bf16x4(ob + row * dim + i, y);
  }
}

template <typename W>
bool launch_layernorm_rows(const LayerNormArgs& a, cudaStream_t s) {
  const int64_t chunks = a.dim / 4;
  if (!layernorm_rows_apply(a)) return false;
  const int64_t threads = std::min<int64_t>(1024, (chunks + 31) / 32 * 32);
  const int64_t k = (chunks + threads - 1) / threads;
  const auto grid = static_cast<unsigned>(a.rows), block = static_cast<unsigned>(threads);
  const auto* w = static_cast<const W*>(a.weight);
  const auto* b = static_cast<const W*>(a.bias);
  auto* ob = static_cast<__nv_bfloat16*>(a.out_bf16);
  const auto eps = static_cast<float>(a.eps);
  if (k == 1)
    layernorm_rows_kernel<W, 1><<<grid, block, 0, s>>>(a.x, w, b, a.out, ob, a.dim, eps,
                                                             a.delta, a.sum_out);
  else if (k == 2)
    layernorm_rows_kernel<W, 2><<<grid, block, 0, s>>>(a.x, w, b, a.out, ob, a.dim, eps,
                                                             a.delta, a.sum_out);
  else
    layernorm_rows_kernel<W, 4><<<grid, block, 0, s>>>(a.x, w, b, a.out, ob, a.dim, eps,
                                                             a.delta, a.sum_out);
  return true;
}

__global__ void gelu_kernel(const float* a, const float* gate, float* out, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = gate ? gelu_erf(a[i]) * gate[i] : gelu_erf(a[i]);
}

template <typename W>
__global__ void add_bias_kernel(const float* x, const W* __restrict__ bias, float* out,
                                int64_t count, int64_t width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = x[i] + to_f32(bias[i % width]);
}

// One thread per (sequence, column): the sequence's rows summed in order, then divided.
__global__ void mean_pool_kernel(const float* __restrict__ x, const int32_t* __restrict__ qs,
                                 float* __restrict__ out, int64_t width) {
  const int64_t s = blockIdx.y, col = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (col >= width) return;
  const int32_t lo = qs[s], hi = qs[s + 1];
  float sum = 0.0f;
  for (int32_t r = lo; r < hi; ++r) sum += x[static_cast<int64_t>(r) * width + col];
  out[s * width + col] = hi > lo ? sum / static_cast<float>(hi - lo) : 0.0f;
}

// Packed attention: a block owns (query tile of a.query_tile rows, sequence, kv head); its query
// vectors are the tile's rows x the q heads of that kv head (<= 32). It walks only the key tiles
// of kPackedKeys keys that overlap the union of its rows' windows (or, with a.dense, every key tile
// of the sequence: the measured baseline), staging each tile's keys and
// values once in shared memory for all its vectors; each warp scores a vector's tile with one
// key per lane, keeps the online softmax state, and accumulates P.V one head dimension per lane.
// Masked keys get probability exactly 0.
constexpr int kPackedWarps = 4;

__global__ void __launch_bounds__(kPackedWarps * 32)
    packed_attention_kernel(const PackedAttentionArgs a) {
  extern __shared__ float smem[];
  const int d = static_cast<int>(a.head_dim), group = static_cast<int>(a.hq / a.hkv);
  const int b = blockIdx.y, g = blockIdx.z;
  const int start = a.query_start[b], len = a.query_start[b + 1] - start;
  const int qt = static_cast<int>(a.query_tile), q0 = blockIdx.x * qt;
  if (q0 >= len) return;
  const int rows = min(qt, len - q0), nv = rows * group;
  constexpr int KT = kPackedKeys;
  float* qs = smem;                    // [32][d], pre-scaled
  float* os = qs + 32 * d;             // [32][d]
  float* ks = os + 32 * d;             // [KT][d + 1]
  float* vs = ks + KT * (d + 1);       // [KT][d]
  float* ps = vs + KT * d;             // [warps][KT]
  float* ml = ps + kPackedWarps * KT;  // [32][2]
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const float scale = static_cast<float>(a.scale);
  for (int i = tid; i < 32 * d; i += blockDim.x) {
    const int v = i / d, e = i % d;
    float val = 0.0f;
    if (v < nv) {
      const int row = start + q0 + v / group, head = g * group + v % group;
      val = a.q[(static_cast<int64_t>(row) * a.hq + head) * d + e] * scale;
    }
    qs[i] = val;
    os[i] = 0.0f;
  }
  for (int v = tid; v < 32; v += blockDim.x) {
    ml[2 * v] = -INFINITY;
    ml[2 * v + 1] = 0.0f;
  }
  const int last = q0 + rows - 1;
  // Windowed: the key tiles overlapping the union of the rows' windows; dense: every tile.
  const bool dense = a.dense != 0;
  const int lo = dense || a.window < 0 ? 0 : max(0, q0 - static_cast<int>(a.window));
  int hi = dense || a.window < 0 ? len : min(len, last + static_cast<int>(a.window) + 1);
  if (a.causal && !dense) hi = min(hi, last + 1);
  for (int t0 = lo / KT * KT; t0 < hi; t0 += KT) {
    __syncthreads();  // previous tile's readers are done (and the setup above is visible)
    for (int i = tid; i < KT * d; i += blockDim.x) {
      const int j = i / d, e = i % d, t = t0 + j;
      const bool in = t < len;
      const int64_t at = (static_cast<int64_t>(start + t) * a.hkv + g) * d + e;
      ks[j * (d + 1) + e] = in ? a.k[at] : 0.0f;
      vs[j * d + e] = in ? a.v[at] : 0.0f;
    }
    __syncthreads();
    const int t = t0 + lane;
    for (int v = warp; v < nv; v += kPackedWarps) {
      const int i = q0 + v / group;  // the vector's row offset in the sequence
      const bool visible = t < len && (!a.causal || t <= i) &&
                           (a.window < 0 || abs(i - t) <= static_cast<int>(a.window));
      float s = 0.0f;
      const float* qr = qs + v * d;
      const float* kr = ks + lane * (d + 1);
      for (int e = 0; e < d; ++e) s = fmaf(qr[e], kr[e], s);
      const float m_old = ml[2 * v];
      const float m_new = fmaxf(m_old, warp_max(visible ? s : -INFINITY));
      if (m_new == -INFINITY) continue;         // nothing visible yet (uniform across the warp)
      const float alpha = expf(m_old - m_new);  // 0 when m_old is -inf
      const float p = visible ? expf(s - m_new) : 0.0f;
      const float sum = warp_sum(p);
      ps[warp * KT + lane] = p;
      __syncwarp();
      for (int e = lane; e < d; e += 32) {
        float acc = os[v * d + e] * alpha;
        for (int j = 0; j < KT; ++j) acc = fmaf(ps[warp * KT + j], vs[j * d + e], acc);
        os[v * d + e] = acc;
      }
      __syncwarp();
      if (lane == 0) {
        ml[2 * v] = m_new;
        ml[2 * v + 1] = ml[2 * v + 1] * alpha + sum;
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int i = tid; i < nv * d; i += blockDim.x) {
    const int v = i / d, e = i % d;
    const int row = start + q0 + v / group, head = g * group + v % group;
    const float l = ml[2 * v + 1];
    a.out[(static_cast<int64_t>(row) * a.hq + head) * d + e] = l > 0.0f ? os[i] / l : 0.0f;
  }
}

unsigned stride_grid(int64_t count) {
  return static_cast<unsigned>(std::clamp<int64_t>((count + 255) / 256, 1, 132 * 16));
}

}  // namespace

bool layernorm_rows_apply(const LayerNormArgs& a) {
  return a.dim % 4 == 0 && a.dim / 4 <= 4 * 1024 && aligned16(a.x) && aligned16(a.out) &&
         (a.out || a.out_bf16) && (!a.delta || (aligned16(a.delta) && a.sum_out == a.x));
}

int64_t packed_attention_smem_bytes(int64_t head_dim) {
  return (32 * head_dim * 2 + kPackedKeys * (2 * head_dim + 1) + kPackedWarps * kPackedKeys + 64) *
         static_cast<int64_t>(sizeof(float));
}

void launch_layernorm(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const LayerNormArgs*>(p);
  const auto threads = static_cast<unsigned>(std::min<int64_t>(512, (a.dim + 31) / 32 * 32));
  const auto grid = static_cast<unsigned>(a.rows);
  const auto eps = static_cast<float>(a.eps);
  auto* ob = static_cast<__nv_bfloat16*>(a.out_bf16);
  if (a.in_registers || a.delta) {
    const bool done = a.weight_type == ElemType::F32   ? launch_layernorm_rows<float>(a, s)
                      : a.weight_type == ElemType::F16 ? launch_layernorm_rows<__half>(a, s)
                                                       : launch_layernorm_rows<__nv_bfloat16>(a, s);
    if (done) return;
    if (a.delta) throw std::runtime_error("add_layernorm: the row does not fit the in-register kernel");
  }
  if (!a.out) throw std::runtime_error("layernorm: a bf16-only output needs the in-register kernel");
  switch (a.weight_type) {
    case ElemType::F32:
      return layernorm_kernel<<<grid, threads, 0, s>>>(a.x, static_cast<const float*>(a.weight),
                                                       static_cast<const float*>(a.bias), a.out, ob,
                                                       a.dim, eps);
    case ElemType::F16:
      return layernorm_kernel<<<grid, threads, 0, s>>>(a.x, static_cast<const __half*>(a.weight),
                                                       static_cast<const __half*>(a.bias), a.out,
                                                       ob, a.dim, eps);
    case ElemType::BF16:
      return layernorm_kernel<<<grid, threads, 0, s>>>(
          a.x, static_cast<const __nv_bfloat16*>(a.weight),
          static_cast<const __nv_bfloat16*>(a.bias), a.out, ob, a.dim, eps);
  }
}

void launch_gelu(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const BinaryArgs*>(p);
  if (a.b && a.count % 4 == 0 && aligned16(a.a) && aligned16(a.b) && aligned16(a.out)) {
    binary_vec4_kernel<GegluOp><<<stride_grid(a.count / 4), 256, 0, s>>>(
        reinterpret_cast<const float4*>(a.a), reinterpret_cast<const float4*>(a.b),
        reinterpret_cast<float4*>(a.out), static_cast<__nv_bfloat16*>(a.out_bf16), a.count / 4);
    return;
  }
  gelu_kernel<<<stride_grid(a.count), 256, 0, s>>>(a.a, a.b, a.out, a.count);
  if (a.out_bf16) {
    const ConvertArgs c{a.out, a.out_bf16, ElemType::BF16, a.count};
    launch_convert(&c, s);
  }
}

void launch_add_bias(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AddBiasArgs*>(p);
  const int64_t count = a.rows * a.width;
  switch (a.type) {
    case ElemType::F32:
      return add_bias_kernel<<<stride_grid(count), 256, 0, s>>>(
          a.x, static_cast<const float*>(a.bias), a.out, count, a.width);
    case ElemType::F16:
      return add_bias_kernel<<<stride_grid(count), 256, 0, s>>>(
          a.x, static_cast<const __half*>(a.bias), a.out, count, a.width);
    case ElemType::BF16:
      return add_bias_kernel<<<stride_grid(count), 256, 0, s>>>(
          a.x, static_cast<const __nv_bfloat16*>(a.bias), a.out, count, a.width);
  }
}

void launch_mean_pool(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const MeanPoolArgs*>(p);
  const dim3 grid(blocks_for(a.width, 128), static_cast<unsigned>(a.seqs));
  mean_pool_kernel<<<grid, 128, 0, s>>>(a.x, a.query_start, a.out, a.width);
}

void launch_packed_attention(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const PackedAttentionArgs*>(p);
  const auto smem = static_cast<size_t>(packed_attention_smem_bytes(a.head_dim));
  // Not a stream operation; a configuration's first launch runs eagerly, outside any capture.
  static size_t raised = 48 * 1024;
  if (smem > raised) {
    cudaFuncSetAttribute(packed_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem));
    raised = smem;
  }
  const dim3 grid(static_cast<unsigned>(a.tiles), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.hkv));
  packed_attention_kernel<<<grid, kPackedWarps * 32, smem, s>>>(a);
}

}  // namespace infera::cuda
