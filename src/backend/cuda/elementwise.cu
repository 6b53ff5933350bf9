// The memory-bound ops: embedding, RMSNorm, RoPE, SwiGLU, add, row gather, KV cache writes and
// the f32 -> f16/bf16 conversion in front of tensor-core GEMMs. Each is one pass over its data.
#include <algorithm>
#include <atomic>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/rope_rotate.cuh"

namespace infera::cuda {
namespace {

template <typename T>
__global__ void embedding_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids,
                                 float* __restrict__ out, int64_t dim) {
  const int64_t i = blockIdx.x;
  const T* row = table + static_cast<int64_t>(ids[i]) * dim;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) out[i * dim + j] = to_f32(row[j]);
}

// One warp per row: mean of squares in f32, then w * (x * rsqrt), as transformers' Qwen3RMSNorm.
template <typename W>
__global__ void rmsnorm_kernel(const float* x, const W* __restrict__ w, float* out, int64_t rows,
                               int64_t dim, float eps) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * dim;
  float ss = 0.0f;
  for (int64_t i = lane; i < dim; i += 32) ss += xr[i] * xr[i];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(dim) + eps);
  float* yr = out + row * dim;
  for (int64_t i = lane; i < dim; i += 32) yr[i] = to_f32(w[i]) * (xr[i] * inv);
}

// One block per row for rows whose width is a multiple of 4: the row's float4s stay in registers
// (up to K per thread) between the sum of squares and the scaling, so x is read once, and the
// block's threads keep many loads in flight (a warp walking a 1024-wide row alone is
// latency-bound: decode's norms took 10 us each that way).
template <typename W, int K>
__global__ void rmsnorm_rows_kernel(const float* x, const W* __restrict__ w, float* out,
                                    int64_t dim, float eps) {
  __shared__ float part[32];
  pdl_wait();
  pdl_trigger();
  const int64_t row = blockIdx.x;
  const int chunks = static_cast<int>(dim / 4), lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float4* xr = reinterpret_cast<const float4*>(x + row * dim);
  float4 v[K];
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    v[k] = c < chunks ? xr[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
  }
  ss = warp_sum(ss);
  if (lane == 0) part[warp] = ss;
  __syncthreads();
  if (warp == 0) {
    float t = lane < static_cast<int>(blockDim.x / 32) ? part[lane] : 0.0f;
    t = warp_sum(t);
    if (lane == 0) part[0] = t;
  }
  __syncthreads();
  const float inv = 1.0f / sqrtf(part[0] / static_cast<float>(dim) + eps);
  float4* yr = reinterpret_cast<float4*>(out + row * dim);
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c >= chunks) continue;
    const W* wc = w + 4 * static_cast<int64_t>(c);
    yr[c] = make_float4(to_f32(wc[0]) * (v[k].x * inv), to_f32(wc[1]) * (v[k].y * inv),
                        to_f32(wc[2]) * (v[k].z * inv), to_f32(wc[3]) * (v[k].w * inv));
  }
}

__global__ void rope_kernel(float* x, const int32_t* __restrict__ positions,
                            const float* __restrict__ cos_table,
                            const float* __restrict__ sin_table, int64_t heads, int64_t d) {
  const int64_t row = blockIdx.x;  // one (token, head) per block row
  const int64_t token = row / heads, half = d / 2;
  const int64_t pos = positions[token];
  float* v = x + row * d;
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) {
    const float c = cos_table[pos * half + j], s = sin_table[pos * half + j];
    rope_rotate(v[j], v[j + half], c, s, v[j], v[j + half]);
  }
}

// The same rotation with blockDim (half, rows per block): whole warps of (row, j) pairs instead
// of one block of half threads per row (a ModernBERT layer's 2^19 (token, head) rows as as many
// 32-thread blocks ran at a quarter of the memory bandwidth). 32-bit indices: the host checks
// n * heads * d < 2^31.
__global__ void rope_rows_kernel(float* x, const int32_t* __restrict__ positions,
                                 const float* __restrict__ cos_table,
                                 const float* __restrict__ sin_table, int rows, int heads, int d) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, j = threadIdx.x, half = d / 2;
  if (row >= rows) return;
  const int pos = positions[row / heads];
  float* v = x + static_cast<int64_t>(row) * d;
  const float c = cos_table[static_cast<int64_t>(pos) * half + j];
  const float s = sin_table[static_cast<int64_t>(pos) * half + j];
  rope_rotate(v[j], v[j + half], c, s, v[j], v[j + half]);
}

// rope_attention_packed's staging for the flash kernel, over n * hq q rows, then n * hkv k rows,
// then n * hkv v rows (blockDim (half, rows per block), as rope_rows_kernel): q rotated in place;
// k rotated in place and its bf16 copy written to kb; v's bf16 copy written to vb. The rotation
// and the rounding are rope_rows_kernel's and the conversion's, so the bits are those of rope,
// rope, then the two conversions. 32-bit indices: the host checks n * (hq + 2 hkv) * d < 2^31.
__global__ void rope_stage_kernel(float* q, float* k, const float* __restrict__ v,
                                  __nv_bfloat16* __restrict__ kb, __nv_bfloat16* __restrict__ vb,
                                  const int32_t* __restrict__ positions,
                                  const float* __restrict__ cos_table,
                                  const float* __restrict__ sin_table, int n, int hq, int hkv,
                                  int d) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, j = threadIdx.x, half = d / 2;
  const int q_rows = n * hq, kv_rows = n * hkv;
  if (row >= q_rows + 2 * kv_rows) return;
  if (row >= q_rows + kv_rows) {
    const int64_t at = static_cast<int64_t>(row - q_rows - kv_rows) * d;
    vb[at + j] = __float2bfloat16_rn(v[at + j]);
    vb[at + j + half] = __float2bfloat16_rn(v[at + j + half]);
    return;
  }
  const bool is_q = row < q_rows;
  const int r = is_q ? row : row - q_rows;
  const int pos = positions[r / (is_q ? hq : hkv)];
  float* x = (is_q ? q : k) + static_cast<int64_t>(r) * d;
  const float c = cos_table[static_cast<int64_t>(pos) * half + j];
  const float s = sin_table[static_cast<int64_t>(pos) * half + j];
  float lo, hi;
  rope_rotate(x[j], x[j + half], c, s, lo, hi);
  x[j] = lo;
  x[j + half] = hi;
  if (!is_q) {
    kb[static_cast<int64_t>(r) * d + j] = __float2bfloat16_rn(lo);
    kb[static_cast<int64_t>(r) * d + j + half] = __float2bfloat16_rn(hi);
  }
}

// The encoder stack's staging: n * heads q rows then as many k rows of bf16 [n, heads, d] (the
// q/k/v GEMMs' outputs), each rotated in place as rope_rows_kernel rotates f32 rows (the same
// tables and expression, from the bf16 values), q times q_scale before its rounding. Two adjacent
// elements per thread from each half of a row (bf16x2 loads and stores); blockDim (d / 4, rows
// per block). 32-bit indices: the host checks 2 n * heads * d < 2^31.
__global__ void rope_stage16_kernel(__nv_bfloat16* q, __nv_bfloat16* k,
                                    const int32_t* __restrict__ positions,
                                    const float* __restrict__ cos_table,
                                    const float* __restrict__ sin_table, int n, int heads, int d,
                                    float q_scale) {
  const int row = blockIdx.x * blockDim.y + threadIdx.y, j = 2 * threadIdx.x, half = d / 2;
  const int rows = n * heads;
  if (row >= 2 * rows) return;
  const bool is_q = row < rows;
  const int r = is_q ? row : row - rows;
  const int pos = positions[r / heads];
  __nv_bfloat16* x = (is_q ? q : k) + static_cast<int64_t>(r) * d;
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x + j));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x + j + half));
  const float* ct = cos_table + static_cast<int64_t>(pos) * half + j;
  const float* st = sin_table + static_cast<int64_t>(pos) * half + j;
  float lo0, hi0, lo1, hi1;
  rope_rotate(a.x, b.x, ct[0], st[0], lo0, hi0);
  rope_rotate(a.y, b.y, ct[1], st[1], lo1, hi1);
  if (is_q) {
    lo0 *= q_scale, hi0 *= q_scale, lo1 *= q_scale, hi1 *= q_scale;
  }
  *reinterpret_cast<__nv_bfloat162*>(x + j) = __floats2bfloat162_rn(lo0, lo1);
  *reinterpret_cast<__nv_bfloat162*>(x + j + half) = __floats2bfloat162_rn(hi0, hi1);
}

struct SwigluOp {
  __device__ float operator()(float g, float u) const { return g / (1.0f + expf(-g)) * u; }
};

__global__ void swiglu_kernel(const float* gate, const float* up, float* out, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = SwigluOp()(gate[i], up[i]);
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t count) {
  pdl_wait();
  pdl_trigger();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void gather_rows_kernel(const float* __restrict__ src, const int32_t* __restrict__ rows,
                                   float* __restrict__ dst, int64_t width) {
  pdl_wait();
  pdl_trigger();
  const int64_t i = blockIdx.x;
  const float* s = src + static_cast<int64_t>(rows[i]) * width;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) dst[i * width + j] = s[j];
}

template <typename T>
__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                const int32_t* __restrict__ slots, T* __restrict__ key_pool,
                                T* __restrict__ value_pool, int64_t kv_heads, int64_t block_size,
                                int64_t d, int64_t num_blocks) {
  const int64_t i = blockIdx.x;  // token
  const int64_t slot = slots[i], block = slot / block_size, offset = slot % block_size;
  for (int64_t e = threadIdx.x; e < kv_heads * d; e += blockDim.x) {
    const int64_t h = e / d, j = e % d;
    const int64_t dst = ((h * num_blocks + block) * block_size + offset) * d + j;
    key_pool[dst] = from_f32<T>(k[i * kv_heads * d + e]);
    value_pool[dst] = from_f32<T>(v[i * kv_heads * d + e]);
  }
}

template <typename T>
__global__ void convert_kernel(const float* __restrict__ src, T* __restrict__ dst, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = from_f32<T>(src[i]);
}

// Grid-stride launches: enough blocks to fill the GPU, no more than the work needs.
unsigned stride_blocks(int64_t count) {
  return static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 132 * 16));
}

unsigned threads_for(int64_t width) {
  return static_cast<unsigned>(std::min<int64_t>(256, ((width + 31) / 32) * 32));
}

}  // namespace

void launch_embedding(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const EmbeddingArgs*>(p);
  const unsigned threads = threads_for(a.dim);
  const auto grid = static_cast<unsigned>(a.n);
  switch (a.type) {
    case ElemType::F32:
      embedding_kernel<<<grid, threads, 0, s>>>(static_cast<const float*>(a.table), a.ids, a.out,
                                                a.dim);
      break;
    case ElemType::F16:
      embedding_kernel<<<grid, threads, 0, s>>>(static_cast<const __half*>(a.table), a.ids, a.out,
                                                a.dim);
      break;
    case ElemType::BF16:
      embedding_kernel<<<grid, threads, 0, s>>>(static_cast<const __nv_bfloat16*>(a.table), a.ids,
                                                a.out, a.dim);
      break;
  }
}

template <typename W>
void rmsnorm_typed(const RmsNormArgs& a, cudaStream_t s) {
  const auto* w = static_cast<const W*>(a.weight);
  const int64_t chunks = a.dim / 4;
  const bool rows_path =
      a.dim % 4 == 0 && chunks <= 4 * 1024 &&
      ((reinterpret_cast<uintptr_t>(a.x) | reinterpret_cast<uintptr_t>(a.out)) % 16) == 0;
  if (rows_path) {
    const int64_t threads = std::min<int64_t>(1024, (chunks + 31) / 32 * 32);
    const int64_t k = (chunks + threads - 1) / threads;
    const auto grid = static_cast<unsigned>(a.rows), block = static_cast<unsigned>(threads);
    const auto eps = static_cast<float>(a.eps);
    if (k == 1)
      return launch_pdl(rmsnorm_rows_kernel<W, 1>, grid, block, 0, s, a.x, w, a.out, a.dim, eps);
    if (k == 2)
      return launch_pdl(rmsnorm_rows_kernel<W, 2>, grid, block, 0, s, a.x, w, a.out, a.dim, eps);
    return launch_pdl(rmsnorm_rows_kernel<W, 4>, grid, block, 0, s, a.x, w, a.out, a.dim, eps);
  }
  constexpr int kWarps = 8;
  rmsnorm_kernel<<<blocks_for(a.rows, kWarps), kWarps * 32, 0, s>>>(a.x, w, a.out, a.rows, a.dim,
                                                                    static_cast<float>(a.eps));
}

void launch_rmsnorm(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const RmsNormArgs*>(p);
  switch (a.weight_type) {
    case ElemType::F32:
      return rmsnorm_typed<float>(a, s);
    case ElemType::F16:
      return rmsnorm_typed<__half>(a, s);
    case ElemType::BF16:
      return rmsnorm_typed<__nv_bfloat16>(a, s);
  }
}

void launch_rope(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const RopeArgs*>(p);
  const int64_t half = a.head_dim / 2, rows = a.n * a.heads;
  if (half <= 256 && 256 % half == 0 && rows * a.head_dim < (int64_t{1} << 31)) {
    const dim3 block(static_cast<unsigned>(half), static_cast<unsigned>(256 / half));
    rope_rows_kernel<<<blocks_for(rows, 256 / half), block, 0, s>>>(
        a.x, a.positions, a.cos, a.sin, static_cast<int>(rows), static_cast<int>(a.heads),
        static_cast<int>(a.head_dim));
    return;
  }
  const unsigned threads = threads_for(a.head_dim / 2);
  rope_kernel<<<static_cast<unsigned>(a.n * a.heads), threads, 0, s>>>(a.x, a.positions, a.cos,
                                                                       a.sin, a.heads, a.head_dim);
}

bool rope_stage_applies(const RopeStageArgs& a) {
  const int64_t half = a.head_dim / 2;
  return a.head_dim % 2 == 0 && half > 0 && half <= 256 && 256 % half == 0 &&
         a.n * (a.hq + 2 * a.hkv) * a.head_dim < (int64_t{1} << 31);
}

void launch_rope_stage(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const RopeStageArgs*>(p);
  if (!rope_stage_applies(a)) throw std::runtime_error("rope stage: unsupported shape");
  const int64_t half = a.head_dim / 2, rows = a.n * (a.hq + 2 * a.hkv);
  const dim3 block(static_cast<unsigned>(half), static_cast<unsigned>(256 / half));
  rope_stage_kernel<<<blocks_for(rows, 256 / half), block, 0, s>>>(
      a.q, a.k, a.v, static_cast<__nv_bfloat16*>(a.k_bf16), static_cast<__nv_bfloat16*>(a.v_bf16),
      a.positions, a.cos, a.sin, static_cast<int>(a.n), static_cast<int>(a.hq),
      static_cast<int>(a.hkv), static_cast<int>(a.head_dim));
}

bool rope_stage16_applies(const RopeStage16Args& a) {
  const int64_t quarter = a.head_dim / 4;
  return a.head_dim % 4 == 0 && quarter > 0 && quarter <= 256 && 256 % quarter == 0 &&
         2 * a.n * a.heads * a.head_dim < (int64_t{1} << 31) &&
         reinterpret_cast<uintptr_t>(a.q16) % 4 == 0 && reinterpret_cast<uintptr_t>(a.k16) % 4 == 0;
}

void launch_rope_stage16(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const RopeStage16Args*>(p);
  if (!rope_stage16_applies(a)) throw std::runtime_error("rope stage16: unsupported shape");
  const int64_t quarter = a.head_dim / 4, rows = 2 * a.n * a.heads;
  const dim3 block(static_cast<unsigned>(quarter), static_cast<unsigned>(256 / quarter));
  rope_stage16_kernel<<<blocks_for(rows, 256 / quarter), block, 0, s>>>(
      static_cast<__nv_bfloat16*>(a.q16), static_cast<__nv_bfloat16*>(a.k16), a.positions, a.cos,
      a.sin, static_cast<int>(a.n), static_cast<int>(a.heads), static_cast<int>(a.head_dim),
      a.q_scale);
}

void launch_swiglu(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const BinaryArgs*>(p);
  if (a.count % 4 == 0 && aligned16(a.a) && aligned16(a.b) && aligned16(a.out)) {
    binary_vec4_kernel<SwigluOp><<<stride_blocks(a.count / 4), 256, 0, s>>>(
        reinterpret_cast<const float4*>(a.a), reinterpret_cast<const float4*>(a.b),
        reinterpret_cast<float4*>(a.out), static_cast<__nv_bfloat16*>(a.out_bf16), a.count / 4);
    return;
  }
  swiglu_kernel<<<stride_blocks(a.count), 256, 0, s>>>(a.a, a.b, a.out, a.count);
  if (a.out_bf16) {
    const ConvertArgs c{a.out, a.out_bf16, ElemType::BF16, a.count};
    launch_convert(&c, s);
  }
}

namespace {
// A gated unit (SwiGLU, GeGLU) over the bf16 GEMM results of matmul_swiglu's / matmul_geglu's
// prefill path: 8 elements a step (one 16-byte load of each operand), the f32 result and its bf16
// shadow written together. Op(a, b): silu(gate) * up, or gelu(input) * gate.
template <typename Op>
__global__ void glu_bf16_vec8_kernel(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                     float4* __restrict__ out, uint4* __restrict__ ob,
                                     int64_t count8) {
  const Op op;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 g = a[i], u = b[i];
    const auto* gh = reinterpret_cast<const __nv_bfloat162*>(&g);
    const auto* uh = reinterpret_cast<const __nv_bfloat162*>(&u);
    float r[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 gf = __bfloat1622float2(gh[j]), uf = __bfloat1622float2(uh[j]);
      r[2 * j] = op(gf.x, uf.x);
      r[2 * j + 1] = op(gf.y, uf.y);
    }
    if (out) {  // nullptr: the bf16 result only (matmul_swiglu_down)
      out[2 * i] = make_float4(r[0], r[1], r[2], r[3]);
      out[2 * i + 1] = make_float4(r[4], r[5], r[6], r[7]);
    }
    if (ob) {
      uint4 packed;
      auto* ph = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
      for (int j = 0; j < 4; ++j) ph[j] = __floats2bfloat162_rn(r[2 * j], r[2 * j + 1]);
      ob[i] = packed;
    }
  }
}

template <typename Op>
__global__ void glu_bf16_kernel(const __nv_bfloat16* __restrict__ a,
                                const __nv_bfloat16* __restrict__ b, float* __restrict__ out,
                                __nv_bfloat16* __restrict__ ob, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float r = Op()(__bfloat162float(a[i]), __bfloat162float(b[i]));
    if (out) out[i] = r;
    if (ob) ob[i] = __float2bfloat16_rn(r);
  }
}

template <typename Op>
void launch_glu_bf16(const SwigluBf16Args& a, cudaStream_t s) {
  if (a.count % 8 == 0 && aligned16(a.gate) && aligned16(a.up) && aligned16(a.out) &&
      (!a.out_bf16 || aligned16(a.out_bf16))) {
    glu_bf16_vec8_kernel<Op><<<stride_blocks(a.count / 8), 256, 0, s>>>(
        static_cast<const uint4*>(a.gate), static_cast<const uint4*>(a.up),
        reinterpret_cast<float4*>(a.out), static_cast<uint4*>(a.out_bf16), a.count / 8);
    return;
  }
  glu_bf16_kernel<Op><<<stride_blocks(a.count), 256, 0, s>>>(
      static_cast<const __nv_bfloat16*>(a.gate), static_cast<const __nv_bfloat16*>(a.up), a.out,
      static_cast<__nv_bfloat16*>(a.out_bf16), a.count);
}
}  // namespace

void launch_swiglu_bf16(const void* p, cudaStream_t s) {
  launch_glu_bf16<SwigluOp>(*static_cast<const SwigluBf16Args*>(p), s);
}

void launch_geglu_bf16(const void* p, cudaStream_t s) {
  launch_glu_bf16<GegluOp>(*static_cast<const SwigluBf16Args*>(p), s);
}

void launch_add(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const BinaryArgs*>(p);
  launch_pdl(add_kernel, stride_blocks(a.count), 256, 0, s, a.a, a.b, a.out, a.count);
}

void launch_gather_rows(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const GatherRowsArgs*>(p);
  launch_pdl(gather_rows_kernel, static_cast<unsigned>(a.count), threads_for(a.width), 0, s, a.src,
             a.rows, a.dst, a.width);
}

void launch_kv_write(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const KvWriteArgs*>(p);
  const unsigned threads = threads_for(a.kv_heads * a.head_dim);
  const auto grid = static_cast<unsigned>(a.n);
  switch (a.type) {
    case ElemType::F32:
      kv_write_kernel<<<grid, threads, 0, s>>>(a.k, a.v, a.slots, static_cast<float*>(a.key_pool),
                                               static_cast<float*>(a.value_pool), a.kv_heads,
                                               a.block_size, a.head_dim, a.num_blocks);
      break;
    case ElemType::F16:
      kv_write_kernel<<<grid, threads, 0, s>>>(a.k, a.v, a.slots, static_cast<__half*>(a.key_pool),
                                               static_cast<__half*>(a.value_pool), a.kv_heads,
                                               a.block_size, a.head_dim, a.num_blocks);
      break;
    case ElemType::BF16:
      kv_write_kernel<<<grid, threads, 0, s>>>(a.k, a.v, a.slots,
                                               static_cast<__nv_bfloat16*>(a.key_pool),
                                               static_cast<__nv_bfloat16*>(a.value_pool),
                                               a.kv_heads, a.block_size, a.head_dim, a.num_blocks);
      break;
  }
}

void launch_convert(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const ConvertArgs*>(p);
  if (a.type == ElemType::BF16)
    convert_kernel<<<stride_blocks(a.count), 256, 0, s>>>(a.src, static_cast<__nv_bfloat16*>(a.dst),
                                                          a.count);
  else
    convert_kernel<<<stride_blocks(a.count), 256, 0, s>>>(a.src, static_cast<__half*>(a.dst),
                                                          a.count);
}

namespace {
std::atomic<bool> g_programmatic_launch{true};
thread_local bool t_pdl_suppressed = false;
}  // namespace
void set_programmatic_launch(bool on) { g_programmatic_launch.store(on); }
bool programmatic_launch() {
  return !t_pdl_suppressed && g_programmatic_launch.load(std::memory_order_relaxed);
}
void set_thread_pdl_suppressed(bool suppressed) { t_pdl_suppressed = suppressed; }

}  // namespace infera::cuda
