// Decode attention on tensor cores (bf16/f16 caches, head_dim 64 or 128, <= 8 query vectors per
// (sequence, kv head)): the staged kernel's shape (every warp streams its own keys and values
// through shared-memory stages with cp.async, warps merged at the end, splits merged by the last
// block) with the arithmetic moved from CUDA-core FMAs to mma.sync m16n8k16.
//
// Why: the staged kernel (attention_decode_staged.cu) spent ~92 warp instructions per key (8
// lanes per key, FMA chains, shuffles, bf16 unpacking, an address per 16-byte copy) and read the
// H200's cache at 3.3-3.6 TB/s, co-limited by issue slots. Here a warp tile is 32 keys, which
// 32-key-aligned tiles take from one cache block (one block-table lookup per tile where the
// block size is a multiple of 32): S = Q K^T with the query vectors as the mma's M rows (rows
// >= the vectors are zeros) and 8 keys per N tile, O += P V with P straight from S's
// accumulators (the flash-attention register layout), K and V read by ldmatrix (V transposed)
// from 16-byte chunks XOR-swizzled per row (no bank conflicts). About 7 warp instructions a key.
// q and P are rounded to the cache type for the mma (as the prefill flash kernels do); scores,
// softmax and accumulation are f32. Online softmax in base 2, once per 32-key tile.
// CudaOptions::decode_mma (INFERA_CUDA_DECODE_MMA=0: the staged kernel).
#include <algorithm>
#include <type_traits>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_decode_mma.h"
#include "backend/cuda/device_util.cuh"

namespace infera::cuda {
namespace {

constexpr int kTileKeys = 32;   // keys per warp tile (one softmax update, two 16-key mma steps)
constexpr int kMaxVectors = 8;  // query vectors per block: the mma's rows g = lane / 4

template <int D>
constexpr int kStageBytes = 2 * kTileKeys* D * 2;  // a tile's keys, then its values (2 B each)
template <int D, int W, int S>
constexpr size_t kSmemBytes = size_t{W} * S* kStageBytes<D>;

__device__ __forceinline__ void copy16(unsigned smem, const void* global, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(global),
               "r"(bytes));
}
__device__ __forceinline__ void commit_group() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a . b for one m16n8k16 tile whose A rows 8..15 are zero (a1 = a3 = 0): the query rows.
__device__ __forceinline__ void mma(float (&c)[4], unsigned a0, unsigned a2, unsigned b0,
                                    unsigned b1, __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma(float (&c)[4], unsigned a0, unsigned a2, unsigned b0,
                                    unsigned b1, __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}
__device__ __forceinline__ unsigned pack2(float lo, float hi, __nv_bfloat16) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  unsigned u;
  memcpy(&u, &v, 4);
  return u;
}
__device__ __forceinline__ unsigned pack2(float lo, float hi, __half) {
  const __half2 v = __floats2half2_rn(lo, hi);
  unsigned u;
  memcpy(&u, &v, 4);
  return u;
}

// The union [lo, hi) of the key ranges of the block's nv query vectors (empty: lo >= hi).
__device__ __forceinline__ void vectors_key_span(const AttentionArgs& a, int row_begin, int g,
                                                 int nv, int len, int& lo, int& hi) {
  lo = len;
  hi = 0;
  for (int v = 0; v < nv; ++v) {
    int row, head, vlo, vhi;
    vector_row_head(a, row_begin, g, v, row, head);
    key_range(a, a.positions[row], len, vlo, vhi);
    if (vlo >= vhi) continue;
    lo = min(lo, vlo);
    hi = max(hi, vhi);
  }
}

template <typename T, int D, int W, int S>
__global__ void __launch_bounds__(W * 32) attention_decode_mma_kernel(const AttentionArgs a) {
  constexpr int CPR = D / 8;                    // 16-byte chunks per key row
  constexpr int KSTEPS = D / 16;                // mma k steps of S = Q K^T, pairs of O's dim tiles
  constexpr int COPIES = kTileKeys * CPR / 32;  // a lane's chunks of a tile's keys (and values)
  constexpr int kRowStep = 32 / CPR;            // rows between a lane's consecutive chunks
  static_assert(CPR >= 8 && CPR <= 32 && 32 % CPR == 0);
  static_assert(size_t{kMaxVectors} * D * 4 <= size_t{S} * kStageBytes<D>);  // wo fits
  extern __shared__ __align__(128) unsigned char mma_smem[];
  __shared__ __align__(16) float wml[W][kMaxVectors][2];
  const int group = static_cast<int>(a.hq / a.hkv);
  const int b = blockIdx.y, g = blockIdx.z % a.hkv, split = blockIdx.z / a.hkv;
  const int row_begin = a.query_start[b], nv = (a.query_start[b + 1] - row_begin) * group;
  if (nv <= 0) return;  // the same for every split of this (sequence, kv head)
  const int len = a.seq_lens[b];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int qg = lane / 4, qt = lane % 4;  // the mma fragment's row (query vector) and column pair
  if (a.tune & kTuneEarlyTrigger) pdl_trigger();
  // Known before the wait (the batch's indices are uploaded before the step's first kernel).
  int span_lo, span_hi;
  vectors_key_span(a, row_begin, g, nv, len, span_lo, span_hi);
  int vlo = 0, vhi = 0;  // this lane's query vector's keys (none past nv)
  int qrow = 0, qhead = 0;
  if (qg < nv) {
    vector_row_head(a, row_begin, g, qg, qrow, qhead);
    key_range(a, a.positions[qrow], len, vlo, vhi);
  }
  // Whole 32-key tiles (aligned to key 0) of the span, split evenly between the splits.
  const int t_first = span_lo / kTileKeys;
  const int t_count = span_hi > span_lo ? (span_hi + kTileKeys - 1) / kTileKeys - t_first : 0;
  const int splits = static_cast<int>(a.splits), per = (t_count + splits - 1) / splits;
  const int my_first = t_first + min(t_count, split * per);
  const int my_end = t_first + min(t_count, (split + 1) * per);
  const int ntiles = my_first + warp < my_end ? (my_end - my_first - warp + W - 1) / W : 0;
  const int bs = static_cast<int>(a.block_size);
  const bool one_block = bs % kTileKeys == 0;  // a tile lies in one cache block
  const int bs_shift = (bs & (bs - 1)) == 0 ? __ffs(bs) - 1 : -1;
  const int32_t* table = a.block_table + static_cast<int64_t>(b) * a.max_blocks;
  const T* keys = static_cast<const T*>(a.keys);
  const T* values = static_cast<const T*>(a.values);

  pdl_wait();  // q and the cache are written by the step's earlier kernels
  pdl_trigger();
  // The query as the mma's A operand: row qg, columns 16k + 2qt (+1) and 16k + 8 + 2qt (+1).
  unsigned qa[KSTEPS][2];
  {
    const float* q = a.q + (static_cast<int64_t>(qrow) * a.hq + qhead) * D;
#pragma unroll
    for (int k = 0; k < KSTEPS; ++k) {
      float2 lo = make_float2(0.0f, 0.0f), hi = lo;
      if (qg < nv) {
        lo = *reinterpret_cast<const float2*>(q + 16 * k + 2 * qt);
        hi = *reinterpret_cast<const float2*>(q + 16 * k + 8 + 2 * qt);
      }
      qa[k][0] = pack2(lo.x, lo.y, T{});
      qa[k][1] = pack2(hi.x, hi.y, T{});
    }
  }
  const float scale = static_cast<float>(a.scale) * 1.4426950408889634f;  // base-2 softmax

  const unsigned smem0 = static_cast<unsigned>(__cvta_generic_to_shared(mma_smem));
  const unsigned stages = smem0 + warp * S * kStageBytes<D>;
  // Tile i of this warp into stage i % S: key rows of 16-byte chunks, chunk c of row r at
  // position c ^ (r & 7); keys outside the span zero-filled. One commit group per tile, empty
  // past the last, so that wait_group<S - 1> always means "tile i has landed".
  auto issue = [&](int i) {
    if (i < ntiles) {
      const unsigned ks = stages + (i % S) * kStageBytes<D>, vs = ks + kStageBytes<D> / 2;
      const int key0 = (my_first + warp + i * W) * kTileKeys;
      int64_t base = 0;
      if (one_block) {
        const int blk = bs_shift >= 0 ? key0 >> bs_shift : key0 / bs;
        base = ((g * a.num_blocks + table[blk]) * a.block_size + (key0 - blk * bs)) * D;
      }
#pragma unroll
      for (int r = 0; r < COPIES; ++r) {
        const int row = r * kRowStep + lane / CPR, ch = lane % CPR, t = key0 + row;
        const bool ok = t >= span_lo && t < span_hi;
        int64_t off = 0;
        if (one_block)
          off = base + row * D + ch * 8;
        else if (ok)
          off = key_offset(a, b, g, t) + ch * 8;
        const unsigned at = (row * CPR + (ch ^ (row & 7))) * 16;
        copy16(ks + at, keys + off, ok ? 16 : 0);
        copy16(vs + at, values + off, ok ? 16 : 0);
      }
    }
    commit_group();
  };
  float acc[2 * KSTEPS][4];  // O: rows qg (c0, c1) and qg + 8 (zeros), dims 8j + 2qt (+1)
#pragma unroll
  for (int j = 0; j < 2 * KSTEPS; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // base-2 running max (uniform over qt) and this lane's sum
  // ldmatrix lanes: matrix lane / 8, its row lane % 8.
  const int lm = lane / 8, lr = lane % 8;
#pragma unroll
  for (int i = 0; i < S - 1; ++i) issue(i);
  for (int i = 0; i < ntiles; ++i) {
    issue(i + S - 1);  // into the stage the warp finished with in the previous iteration
    wait_group<S - 1>();
    __syncwarp();  // every lane's copies of tile i are visible to the whole warp
    const unsigned ks = stages + (i % S) * kStageBytes<D>, vs = ks + kStageBytes<D> / 2;
    const int key0 = (my_first + warp + i * W) * kTileKeys;
    // S = Q K^T: 4 N tiles of 8 keys; lane holds keys 8n + 2qt (+1) of row qg.
    float sc[4][4];
#pragma unroll
    for (int n = 0; n < 4; ++n) sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // 16-key halves: matrices (keys +0/+8) x (chunk 2k / 2k + 1)
      const int row = 16 * h + (lm >> 1) * 8 + lr;
#pragma unroll
      for (int k = 0; k < KSTEPS; ++k) {
        unsigned kb[4];
        ldmatrix_x4(ks + (row * CPR + ((2 * k + (lm & 1)) ^ lr)) * 16, kb);
        mma(sc[2 * h], qa[k][0], qa[k][1], kb[0], kb[1], T{});
        mma(sc[2 * h + 1], qa[k][0], qa[k][1], kb[2], kb[3], T{});
      }
    }
    // Online softmax over the tile's 32 keys, per query row (the 4 lanes qt of row qg).
    float top = -INFINITY;
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int t = key0 + 8 * n + 2 * qt + e;
        const float s = sc[n][e] * scale;
        sc[n][e] = t >= vlo && t < vhi ? s : -INFINITY;
        top = fmaxf(top, sc[n][e]);
      }
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
    top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 2));
    const float m_new = fmaxf(m, top);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: p = 0
    // Nothing accumulated while m is -inf: any finite factor does; 1 keeps the vote below quiet.
    const float alpha = m == -INFINITY ? 1.0f : exp2f(m - m_use);
    m = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[n][e] = exp2f(sc[n][e] - m_use);  // exp2(-inf) = 0
        sum += sc[n][e];
      }
    l = l * alpha + sum;
    if (__any_sync(0xffffffffu, alpha != 1.0f))
#pragma unroll
      for (int j = 0; j < 2 * KSTEPS; ++j) {
        acc[j][0] *= alpha;
        acc[j][1] *= alpha;
      }
      // O += P V: P's A fragment is S's accumulators (keys 2qt (+1) and 8 + 2qt (+1) of a half).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const unsigned p0 = pack2(sc[2 * h][0], sc[2 * h][1], T{});
      const unsigned p2 = pack2(sc[2 * h + 1][0], sc[2 * h + 1][1], T{});
      const int row = 16 * h + (lm & 1) * 8 + lr;
#pragma unroll
      for (int k = 0; k < KSTEPS; ++k) {  // dim tiles 2k and 2k + 1
        unsigned vb[4];
        ldmatrix_x4_trans(vs + (row * CPR + ((2 * k + (lm >> 1)) ^ lr)) * 16, vb);
        mma(acc[2 * k], p0, p2, vb[0], vb[1], T{});
        mma(acc[2 * k + 1], p0, p2, vb[2], vb[3], T{});
      }
    }
    __syncwarp();  // the warp is done with this stage before the next iteration refills it
  }
  wait_group<0>();  // only empty groups are left; none may outlive the reuse below
  __syncwarp();
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  // wo[warp] lives in the warp's own stages: no other warp touches them, and this warp's last
  // reads of them are behind the __syncwarp above.
  auto wo = [&](int w) { return reinterpret_cast<float*>(mma_smem + w * S * kStageBytes<D>); };
  if (qg < nv) {
#pragma unroll
    for (int j = 0; j < 2 * KSTEPS; ++j)
      *reinterpret_cast<float2*>(wo(warp) + qg * D + 8 * j + 2 * qt) =
          make_float2(acc[j][0], acc[j][1]);
    if (qt == 0) {
      wml[warp][qg][0] = m;
      wml[warp][qg][1] = l;
    }
  }
  __syncthreads();
  // Merge the warps: out = sum_w 2^(m_w - M) o_w / sum_w 2^(m_w - M) l_w.
  for (int i = threadIdx.x; i < nv * D; i += W * 32) {
    const int v = i / D, e = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < W; ++w) mx = fmaxf(mx, wml[w][v][0]);
    float sum = 0.0f, o = 0.0f;
    if (mx != -INFINITY)
#pragma unroll
      for (int w = 0; w < W; ++w) {
        if (wml[w][v][0] == -INFINITY) continue;
        const float f = exp2f(wml[w][v][0] - mx);
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
        // merge_splits_if_last works in base e.
        a.partial_ml[2 * vec] = mx == -INFINITY ? mx : mx * 0.6931471805599453f;
        a.partial_ml[2 * vec + 1] = sum;
      }
    }
  }
  if (a.splits > 1) merge_splits_if_last(a, b, g, 0, nv, row_begin);
}

template <typename T, int D, int W, int S>
void launch_dws(const AttentionArgs& a, cudaStream_t s) {
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(attention_decode_mma_kernel<T, D, W, S>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemBytes<D, W, S>)) == cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the mma decode attention's shared memory");
  const dim3 grid(1, static_cast<unsigned>(a.num_seqs), static_cast<unsigned>(a.hkv * a.splits));
  launch_pdl(attention_decode_mma_kernel<T, D, W, S>, grid, W * 32, kSmemBytes<D, W, S>, s, a);
}

template <typename T, int D, int W, int S>
int blocks_per_sm_of() {
  static const int cached = [] {
    int n = 0;
    if (cudaFuncSetAttribute(attention_decode_mma_kernel<T, D, W, S>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes<D, W, S>)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, attention_decode_mma_kernel<T, D, W, S>,
                                                      W * 32, kSmemBytes<D, W, S>) != cudaSuccess) {
      cudaGetLastError();
      return 1;
    }
    return std::max(n, 1);
  }();
  return cached;
}

// The (warps, stages) shapes for bf16 at head_dim 128 (Qwen3's): `config`
// (CudaOptions::decode_mma_config) picks one, 0 = the default; the other types and head sizes
// take the default. f is a functor taking the template arguments.
constexpr int kDefaultWarps = 2, kDefaultStages = 3;
template <typename T, int D, typename F>
auto with_config(int64_t config, F&& f) {
  if constexpr (!std::is_same_v<T, __nv_bfloat16> || D != 128)
    return f.template operator()<T, D, kDefaultWarps, kDefaultStages>();
  else
    switch (config) {
      case 1:
        return f.template operator()<T, D, 1, 4>();
      case 2:
        return f.template operator()<T, D, 2, 2>();
      case 3:
        return f.template operator()<T, D, 2, 3>();
      case 4:
        return f.template operator()<T, D, 4, 2>();
      case 5:
        return f.template operator()<T, D, 1, 3>();
      case 6:
        return f.template operator()<T, D, 2, 4>();
      default:
        return f.template operator()<T, D, kDefaultWarps, kDefaultStages>();
    }
}

struct Launch {
  const AttentionArgs& a;
  cudaStream_t s;
  template <typename T, int D, int W, int S>
  void operator()() const {
    launch_dws<T, D, W, S>(a, s);
  }
};
struct Occupancy {
  template <typename T, int D, int W, int S>
  int operator()() const {
    return blocks_per_sm_of<T, D, W, S>();
  }
};

}  // namespace

bool attention_decode_mma_supports(ElemType type, int64_t head_dim) {
  return (type == ElemType::BF16 || type == ElemType::F16) && (head_dim == 64 || head_dim == 128);
}

int attention_decode_mma_blocks_per_sm(int64_t head_dim, int64_t config) {
  // The bf16 and f16 kernels have the same shape; bf16 stands for both.
  using T = __nv_bfloat16;
  return head_dim == 64 ? with_config<T, 64>(config, Occupancy{})
                        : with_config<T, 128>(config, Occupancy{});
}

void launch_attention_decode_mma(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  const Launch l{a, s};
  if (a.type == ElemType::F16) {
    if (a.head_dim == 64) return with_config<__half, 64>(a.stages, l);
    return with_config<__half, 128>(a.stages, l);
  }
  if (a.head_dim == 64) return with_config<__nv_bfloat16, 64>(a.stages, l);
  with_config<__nv_bfloat16, 128>(a.stages, l);
}

}  // namespace infera::cuda
