// The flash kernel (attention_flash.cu) with query tiles of 128 vectors instead of 64
// (CudaOptions::flash_wide): every key/value tile a block copies to shared memory serves twice
// the queries, and there are half the blocks, so half the per-block prologue (key ranges, query
// stage, first copy) and half the L2 -> shared traffic. Two shapes of the same work:
//  - 4 warps of 32 rows (kMt = 2 mma row tiles a warp, FlashAttention-2's layout): each key or
//    value fragment a warp loads with ldmatrix feeds 4 mma instead of 2, and the two row tiles'
//    mma are independent chains; 255 registers a thread, 2 blocks (8 warps) an SM;
//  - 8 warps of 16 rows (kMt = 1): the 64-vector kernel's warp, 2 blocks (16 warps) an SM, at
//    most 128 registers a thread.
// Either way the queries stay in shared memory (they no longer fit in registers next to the
// 32-row accumulators) and are read by ldmatrix per 16-dim step; the first key/value tile's
// copies go out before the queries are staged; one barrier a tile (the interleaved tile's
// schedule); the softmax is base 2 with log2(e) folded into the query scale, and a row tile's
// key tile skips the mask when every row of the tile sees all of its keys (only the causal
// diagonal's and a window's edge tiles are masked). The causal split of long query tiles and
// its merge are the 64-vector kernel's (attention_flash_merge.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_flash_merge.cuh"
#include "backend/cuda/attention_flash_tile.cuh"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda {
namespace {

using namespace flash;  // attention_flash_tile.cuh

constexpr int kVec = static_cast<int>(kFlashWideVectors);

template <typename T, int D>
constexpr size_t kSmemWide = (4 * kTileElems<D> + kVec * kRow<D>)*sizeof(T);  // K, V x2; Q

template <typename T, int D, bool kSplit, int kWarpsW>
__global__ void __launch_bounds__(kWarpsW * 32, 2)
    attention_flash_wide_kernel(const AttentionArgs a) {
  constexpr int NT = kWarpsW * 32, kMt = kVec / (16 * kWarpsW);
  static_assert(kMt * 16 * kWarpsW == kVec);
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const kbuf = reinterpret_cast<T*>(smem_raw);  // [2][kKeys][kRow]
  T* const vbuf = kbuf + 2 * kTileElems<D>;        // [2][kKeys][kRow]
  T* const qs = vbuf + 2 * kTileElems<D>;          // [kVec][kRow]: scaled queries
  __shared__ int range[kVec * 2 + 2];

  const int g = blockIdx.x, b = blockIdx.y;
  int tile = static_cast<int>(gridDim.z - 1 - blockIdx.z), split = 0;  // longest first
  if constexpr (kSplit) {  // chunk minor (attention_flash.cu says why)
    const int splits = static_cast<int>(a.splits);
    split = static_cast<int>(blockIdx.z) % splits;
    tile = static_cast<int>(a.tiles) - 1 - static_cast<int>(blockIdx.z) / splits;
  }
  const int group = static_cast<int>(a.hq / a.hkv);
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int v0 = tile * kVec, nv = min(kVec, rows * group - v0);
  if (nv <= 0) return;
  const bool packed = a.block_table == nullptr;  // encoder attention: keys are the rows
  const int len = packed ? rows : a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates
  const float scale = static_cast<float>(a.scale) * 1.4426950408889634f;  // base 2

  block_key_ranges<kVec, NT>(a, row_begin, g, v0, nv, len, packed, range);
  const int key_lo = range[2 * kVec], key_hi = range[2 * kVec + 1];
  int chunk_lo = key_lo, chunk_hi = key_hi, chunks = 1;
  if constexpr (kSplit) {
    const int n = (key_hi - key_lo + kKeys - 1) / kKeys, per = static_cast<int>(a.split_key_tiles);
    chunks = max(1, min(static_cast<int>(a.splits), (n + per - 1) / per));
    if (split >= chunks) return;  // block-uniform: a chunk this tile does not have
    chunk_lo = key_lo + split * n / chunks * kKeys;
    chunk_hi = min(key_hi, key_lo + (split + 1) * n / chunks * kKeys);
  }
  // The first key/value tile's copies go out before the queries are staged.
  if (chunk_lo < chunk_hi) load_tile<T, D, NT>(a, b, g, chunk_lo, key_hi, row_begin, kbuf, vbuf);
  cp_async_commit();

  // The queries (the loop's first barrier publishes them).
  stage_queries<T, D, kVec, NT>(a, row_begin, g, v0, nv, scale, qs);

  // Row tile mt of this warp: rows r0 = first + gid and r1 = r0 + 8 of the block's vectors.
  int lo0[kMt], hi0[kMt], lo1[kMt], hi1[kMt], full_lo[kMt], full_hi[kMt];
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
    const int r0 = warp * 16 * kMt + mt * 16 + gid, r1 = r0 + 8;
    lo0[mt] = range[2 * r0];
    hi0[mt] = range[2 * r0 + 1];
    lo1[mt] = range[2 * r1];
    hi1[mt] = range[2 * r1 + 1];
    // Keys [full_lo, full_hi) are visible to every row of the row tile (empty when a row is past
    // nv: its range is [0, 0)); a key tile inside it needs no mask.
    int flo = max(lo0[mt], lo1[mt]), fhi = min(hi0[mt], hi1[mt]);
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      flo = max(flo, __shfl_xor_sync(0xffffffffu, flo, off));
      fhi = min(fhi, __shfl_xor_sync(0xffffffffu, fhi, off));
    }
    full_lo[mt] = flo;
    full_hi[mt] = fhi;
  }

  float o[kMt][D / 8][4];
  float m[kMt][2], l[kMt][2];  // running max (base 2) and this lane's share of the sum
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }
  // ldmatrix lane roles: matrix mi = lane / 8, row lr = lane % 8 of it. Queries (A fragments):
  // matrices (rows +0..7, dims +0..7), (+8..15, +0..7), (+0..7, +8..15), (+8..15, +8..15).
  const int mi = lane / 8, lr = lane % 8;
  const T* const qbase = qs + (warp * 16 * kMt + (mi % 2) * 8 + lr) * kRow<D> + (mi / 2) * 8;
  const int k_off = ((mi / 2) * 8 + lr) * kRow<D> + (mi % 2) * 8;  // keys: scores_interleaved's
  const int v_off = ((mi % 2) * 8 + lr) * kRow<D> + (mi / 2) * 8;  // values: values_interleaved's

  int stage = 0;
  for (int t0 = chunk_lo; t0 < chunk_hi; t0 += kKeys, stage ^= 1) {
    // One barrier a tile: past it, tile t has landed (and the queries are staged) and every warp
    // is done with tile t - 1, whose stage then takes tile t + 1's copies.
    cp_async_wait<0>();
    __syncthreads();
    if (t0 + kKeys < chunk_hi)
      load_tile<T, D, NT>(a, b, g, t0 + kKeys, key_hi, row_begin,
                          kbuf + (stage ^ 1) * kTileElems<D>, vbuf + (stage ^ 1) * kTileElems<D>);
    cp_async_commit();
    const T* ks = kbuf + stage * kTileElems<D> + k_off;
    const T* vs = vbuf + stage * kTileElems<D> + v_off;

    // S = Q . K^T: per 16-dim step, the row tiles' query fragments, then per pair of 8-key
    // groups one ldmatrix of keys feeding 2 * kMt independent mma.
    float s[kMt][kKeys / 8][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt)
        s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[kMt][4];
#pragma unroll
      for (int mt = 0; mt < kMt; ++mt) ldmatrix_x4(qa[mt], qbase + mt * 16 * kRow<D> + kk * 16);
#pragma unroll
      for (int np = 0; np < kKeys / 16; ++np) {
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + np * 16 * kRow<D> + kk * 16);
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
          mma_free(s[mt][2 * np], qa[mt], bf[0], bf[1], T{});
          mma_free(s[mt][2 * np + 1], qa[mt], bf[2], bf[3], T{});
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      if (t0 >= full_lo[mt] && t0 + kKeys <= full_hi[mt])  // warp-uniform
        softmax_tile_interleaved<false, D>(s[mt], o[mt], m[mt][0], m[mt][1], l[mt][0], l[mt][1], t0,
                                           key_hi, lo0[mt], hi0[mt], lo1[mt], hi1[mt], tig);
      else
        softmax_tile_interleaved<true, D>(s[mt], o[mt], m[mt][0], m[mt][1], l[mt][0], l[mt][1], t0,
                                          key_hi, lo0[mt], hi0[mt], lo1[mt], hi1[mt], tig);
    }
    // O += P . V: P's 16-key groups as A fragments; per (16 keys, 16 dims) one ldmatrix.trans of
    // values feeding 2 * kMt independent mma.
    uint32_t pa[kMt][kKeys / 16][4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
      for (int kt = 0; kt < kKeys / 16; ++kt) {
        pa[mt][kt][0] = pack2<T>(s[mt][2 * kt][0], s[mt][2 * kt][1]);
        pa[mt][kt][1] = pack2<T>(s[mt][2 * kt][2], s[mt][2 * kt][3]);
        pa[mt][kt][2] = pack2<T>(s[mt][2 * kt + 1][0], s[mt][2 * kt + 1][1]);
        pa[mt][kt][3] = pack2<T>(s[mt][2 * kt + 1][2], s[mt][2 * kt + 1][3]);
      }
#pragma unroll
    for (int kt = 0; kt < kKeys / 16; ++kt)
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vs + kt * 16 * kRow<D> + dp * 16);
#pragma unroll
        for (int mt = 0; mt < kMt; ++mt) {
          mma_free(o[mt][2 * dp], pa[mt][kt], bf[0], bf[1], T{});
          mma_free(o[mt][2 * dp + 1], pa[mt][kt], bf[2], bf[3], T{});
        }
      }
    // No barrier here: the next iteration's guards this stage's refill.
  }
  cp_async_wait<0>();
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)  // the lanes' partial row sums -> the quad's
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      l[mt][0] += __shfl_xor_sync(0xffffffffu, l[mt][0], off);
      l[mt][1] += __shfl_xor_sync(0xffffffffu, l[mt][1], off);
    }

  if (kSplit && chunks > 1) {
    float ml[kMt * 4];
#pragma unroll
    for (int mt = 0; mt < kMt; ++mt) {
      ml[mt * 4 + 0] = m[mt][0];
      ml[mt * 4 + 1] = m[mt][1];
      ml[mt * 4 + 2] = l[mt][0];
      ml[mt * 4 + 3] = l[mt][1];
    }
    return write_and_merge_split<D, true, kVec, NT, kMt>(a, b, g, tile, split, chunks, v0, nv,
                                                         row_begin, &o[0][0][0], ml,
                                                         reinterpret_cast<float*>(kbuf));
  }
#pragma unroll
  for (int mt = 0; mt < kMt; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int v = warp * 16 * kMt + mt * 16 + gid + half * 8;
      if (v >= nv) continue;
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D;
      float* dst = a.out + at;
      __nv_bfloat16* dst_bf16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + at : nullptr;
      const float sum = l[mt][half];
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const int c = dt * 8 + tig * 2;
        const float2 y = make_float2(o[mt][dt][2 * half] * inv, o[mt][dt][2 * half + 1] * inv);
        *reinterpret_cast<float2*>(dst + c) = y;
        if (dst_bf16)
          *reinterpret_cast<__nv_bfloat162*>(dst_bf16 + c) = __floats2bfloat162_rn(y.x, y.y);
      }
    }
}

template <typename T, int D, bool kSplit, int kWarpsW>
void launch_wide(const AttentionArgs& a, cudaStream_t s) {
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(attention_flash_wide_kernel<T, D, kSplit, kWarpsW>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemWide<T, D>)) == cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the wide flash attention's shared memory");
  const int64_t chunks = kSplit ? a.splits : 1;
  const dim3 grid(static_cast<unsigned>(a.hkv), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.tiles * chunks));
  attention_flash_wide_kernel<T, D, kSplit, kWarpsW><<<grid, kWarpsW * 32, kSmemWide<T, D>, s>>>(a);
}

template <typename T, int D, bool kSplit>
void launch_ds(const AttentionArgs& a, cudaStream_t s) {
  if (a.wide_warps == 8) return launch_wide<T, D, kSplit, 8>(a, s);
  launch_wide<T, D, kSplit, 4>(a, s);
}

template <typename T, int D>
void launch_d(const AttentionArgs& a, cudaStream_t s) {
  if (a.splits > 1) return launch_ds<T, D, true>(a, s);
  launch_ds<T, D, false>(a, s);
}

}  // namespace

void launch_attention_flash_wide(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  dispatch_type_and_head_dim(
      a, [&](auto t, auto d) { launch_d<typename decltype(t)::type, decltype(d)::value>(a, s); });
}

}  // namespace infera::cuda
