// Prefill attention on the tensor cores, pipelined (FlashAttention-2 structure, like
// attention_mma.cu, which it replaces for head_dim 64 and 128): a block of 4 warps owns 64 query
// vectors (sequence rows x the q heads of one kv head, row-major), 16 per warp. Key and value
// tiles of 64 keys go global -> shared memory with cp.async, double-buffered, so tile t + 1 is in
// flight while tile t is multiplied; the mma.sync B fragments come from ldmatrix (values with
// .trans, so they are stored row-major: no transposing stores). Scores and P.V accumulate in f32;
// P is rounded to the cache type for the second product, as in attention_mma.cu. The query tiles
// are launched longest first (the causal triangle's last rows see the most keys), so the short
// ones fill the tail of the grid. Without a block table it is the encoders' packed attention
// (CudaBackend::attention_packed): keys and values are bf16 copies of k and v [T, hkv, D].
// The tile's primitives and its interleaved variant (the default) are in attention_flash_tile.cuh;
// the optional key split of long causal tiles is here, its merge in attention_flash_merge.cuh.
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

// Blocks per SM: 3 at head_dim 128 (registers and shared memory), 4 at 64 (fits in 128
// registers without spilling; more warps to hide the mma and shared-memory latencies).
template <int D>
constexpr int kMinBlocks = D == 64 ? 4 : 3;

// Split keys (kSplit, AttentionArgs::splits > 1): the causal triangle's long query tiles would
// otherwise decide the kernel's makespan (a 2048-token prompt's last tile walks 32 key tiles while
// the GPU's slots average ~21), so a tile of n key tiles is cut into ceil(n / split_key_tiles)
// (at most `splits`) chunks of whole key tiles, each a block of its own; each writes its rows'
// unnormalised output and (max, sum) to the partials and the tile's last block merges them
// (write_and_merge_split). Grid z enumerates query tiles major (longest first), chunk minor, so
// a long tile's chunks run side by side at the start and merge early, and the grid's tail is
// the short unsplit tiles; the blocks of chunks a short tile does not have return at once.
// (Chunk-major order ran 2048-token prompts slower: the long tiles' last chunks and their merges
// formed the tail.)
template <typename T, int D, bool kFast, bool kSplit, bool kInterleaved>
__global__ void __launch_bounds__(kThreads, kMinBlocks<D>)
    attention_flash_kernel(const AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const kbuf = reinterpret_cast<T*>(smem_raw);  // [2][kKeys][kRow]
  T* const vbuf = kbuf + 2 * kTileElems<D>;        // [2][kKeys][kRow]
  __shared__ int range[kVectors * 2 + 2];

  const int g = blockIdx.x, b = blockIdx.y;
  // Longest first; split: chunk index major (see above).
  int tile = static_cast<int>(gridDim.z - 1 - blockIdx.z), split = 0;
  if constexpr (kSplit) {
    const int splits = static_cast<int>(a.splits);
    split = static_cast<int>(blockIdx.z) % splits;
    tile = static_cast<int>(a.tiles) - 1 - static_cast<int>(blockIdx.z) / splits;
  }
  const int group = static_cast<int>(a.hq / a.hkv);
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int v0 = tile * kVectors, nv = min(kVectors, rows * group - v0);
  if (nv <= 0) return;
  // Packed encoder attention (Backend::attention_packed, no block table): keys are the sequence's
  // own rows, a row's position is its offset in the sequence, and key tiles start at multiples of
  // kKeys from the sequence's first row (the schedule the op counts).
  const bool packed = a.block_table == nullptr;
  const int len = packed ? rows : a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gid = lane / 4, tig = lane % 4;  // mma fragment coordinates
  // Fast: scores in base 2, so that the softmax's exponentials are single ex2 instructions.
  const float scale = static_cast<float>(a.scale) * (kFast ? 1.4426950408889634f : 1.0f);

  for (int v = tid; v < kVectors; v += kThreads) {
    int lo = 0, hi = 0;
    if (v < nv) {
      int row, head;
      vector_row_head(a, row_begin, g, v0 + v, row, head);
      key_range(a, packed ? row - row_begin : a.positions[row], len, lo, hi);
    }
    range[2 * v] = lo;
    range[2 * v + 1] = hi;
  }
  // The block's key range: the union of its rows' ranges (tile-aligned from the sequence's first
  // row when packed), by thread 0 into range[2 * kVectors ...].
  const auto block_key_range = [&] {
    if (tid == 0) {
      int lo = len, hi = 0;
      for (int v = 0; v < nv; ++v) {
        lo = min(lo, range[2 * v]);
        hi = max(hi, range[2 * v + 1]);
      }
      if (packed) lo = min(lo, hi) / kKeys * kKeys;
      range[2 * kVectors] = lo;
      range[2 * kVectors + 1] = max(lo, hi);
    }
  };
  // This block's chunk [chunk_lo, chunk_hi) of the key range, and the tile's chunk count.
  int chunk_lo = 0, chunk_hi = 0, chunks = 1;
  if constexpr (kSplit) {
    __syncthreads();
    // The union by a warp: blocks of a chunk-less split wait on it.
    if (warp == 0) warp_union_key_range<kVectors>(nv, len, packed, lane, range);
    __syncthreads();
    const int lo = range[2 * kVectors], hi = range[2 * kVectors + 1];
    const int n = (hi - lo + kKeys - 1) / kKeys, per = static_cast<int>(a.split_key_tiles);
    chunks = max(1, min(static_cast<int>(a.splits), (n + per - 1) / per));
    if (split >= chunks) return;  // block-uniform: a chunk this tile does not have
    chunk_lo = lo + split * n / chunks * kKeys;
    chunk_hi = min(hi, lo + (split + 1) * n / chunks * kKeys);
  }
  // The queries, scaled and rounded to the cache type, staged in the second value stage (free
  // until tile 1's copies are issued, after the fragments are in registers).
  T* const qs = vbuf + kTileElems<D>;
  // Four elements per 16-byte load, several loads in flight per thread (the prologue's loads
  // were the kernel's main scoreboard stall for blocks with few key tiles; q is 16-byte aligned,
  // as the host checks).
  constexpr int kQuads = D / 4, kOctets = D / 8;
  if (a.q16) {  // already scaled and rounded (AttentionArgs::q16): copied as they are
    const auto* q16 = static_cast<const uint16_t*>(a.q16);
#pragma unroll 4
    for (int i = tid; i < kVectors * kOctets; i += kThreads) {
      const int v = i / kOctets, e = (i % kOctets) * 8;
      uint4 val = make_uint4(0u, 0u, 0u, 0u);
      if (v < nv) {
        int row, head;
        vector_row_head(a, row_begin, g, v0 + v, row, head);
        val = *reinterpret_cast<const uint4*>(q16 + (static_cast<int64_t>(row) * a.hq + head) * D + e);
      }
      *reinterpret_cast<uint4*>(&qs[v * kRow<D> + e]) = val;
    }
  } else {
#pragma unroll 4
    for (int i = tid; i < kVectors * kQuads; i += kThreads) {
      const int v = i / kQuads, e = (i % kQuads) * 4;
      float4 val = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (v < nv) {
        int row, head;
        vector_row_head(a, row_begin, g, v0 + v, row, head);
        val =
            *reinterpret_cast<const float4*>(a.q + (static_cast<int64_t>(row) * a.hq + head) * D + e);
      }
      uint2 packed4;
      packed4.x = pack2<T>(val.x * scale, val.y * scale);
      packed4.y = pack2<T>(val.z * scale, val.w * scale);
      *reinterpret_cast<uint2*>(&qs[v * kRow<D> + e]) = packed4;
    }
  }
  __syncthreads();
  if constexpr (!kSplit) {  // the unsplit kernel overlaps this with the queries' loads
    block_key_range();
    __syncthreads();
  }
  const int key_hi = range[2 * kVectors + 1];
  if constexpr (!kSplit) {
    chunk_lo = range[2 * kVectors];
    chunk_hi = key_hi;
  }
  if (chunk_lo < chunk_hi) load_tile<T, D>(a, b, g, chunk_lo, key_hi, row_begin, kbuf, vbuf);
  cp_async_commit();

  const int r0 = warp * 16 + gid, r1 = r0 + 8;
  const int lo0 = range[2 * r0], hi0 = range[2 * r0 + 1];
  const int lo1 = range[2 * r1], hi1 = range[2 * r1 + 1];
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const int c = kk * 16 + tig * 2;
    qa[kk][0] = *reinterpret_cast<const uint32_t*>(&qs[r0 * kRow<D> + c]);
    qa[kk][1] = *reinterpret_cast<const uint32_t*>(&qs[r1 * kRow<D> + c]);
    qa[kk][2] = *reinterpret_cast<const uint32_t*>(&qs[r0 * kRow<D> + c + 8]);
    qa[kk][3] = *reinterpret_cast<const uint32_t*>(&qs[r1 * kRow<D> + c + 8]);
  }
  __syncthreads();  // every warp holds its queries: the second stage is free

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  // ldmatrix lane roles: matrix mi = lane / 8, row lr = lane % 8 of it.
  const int mi = lane / 8, lr = lane % 8;
  int full_lo, full_hi;  // keys every row of this warp sees
  warp_full_key_span(lo0, hi0, lo1, hi1, full_lo, full_hi);

  int stage = 0;
  for (int t0 = chunk_lo; t0 < chunk_hi; t0 += kKeys, stage ^= 1) {
    if constexpr (kInterleaved) {
      // One barrier a tile: past it, tile t has landed and every warp is done with tile t - 1,
      // whose stage then takes tile t + 1's copies (in flight while tile t is multiplied).
      cp_async_wait<0>();
      __syncthreads();
      if (t0 + kKeys < chunk_hi)
        load_tile<T, D>(a, b, g, t0 + kKeys, key_hi, row_begin, kbuf + (stage ^ 1) * kTileElems<D>,
                        vbuf + (stage ^ 1) * kTileElems<D>);
      cp_async_commit();
    } else {
      // Tile t + 1's copies go out before tile t is waited for.
      if (t0 + kKeys < chunk_hi)
        load_tile<T, D>(a, b, g, t0 + kKeys, key_hi, row_begin, kbuf + (stage ^ 1) * kTileElems<D>,
                        vbuf + (stage ^ 1) * kTileElems<D>);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();
    }
    const T* ks = kbuf + stage * kTileElems<D>;
    const T* vs = vbuf + stage * kTileElems<D>;

    float s[kKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kKeys / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    if constexpr (kInterleaved) {
      scores_interleaved<T, D>(s, qa, ks, lane);
      if (t0 >= full_lo && t0 + kKeys <= full_hi)  // warp-uniform
        softmax_tile_interleaved<false, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1,
                                           tig);
      else
        softmax_tile_interleaved<true, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1,
                                          tig);
      values_interleaved<T, D>(o, s, vs, lane);
      continue;  // the next iteration's barrier guards this stage's refill
    }
#pragma unroll
    for (int kk = 0; kk < D / 16; kk += 2)
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; ++nt) {
        // Matrices: (dims kk*16 + 0..7), (+8..15), ((kk+1)*16 + 0..7), (+8..15) of keys nt*8..+7.
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + (nt * 8 + lr) * kRow<D> + (kk + mi / 2) * 16 + (mi % 2) * 8);
        mma_16816(s[nt], qa[kk], bf[0], bf[1], T{});
        mma_16816(s[nt], qa[kk + 1], bf[2], bf[3], T{});
      }

    // Mask, then the online softmax of rows r0 and r1.
    if (!kFast)
      online_softmax_tile<kKeys, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
    else if (t0 >= full_lo && t0 + kKeys <= full_hi)  // warp-uniform
      softmax_tile_base2<false, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
    else
      softmax_tile_base2<true, D>(s, o, m0, m1, l0, l1, t0, key_hi, lo0, hi0, lo1, hi1, tig);
      // O += P . V: two 8-key score tiles are an A fragment; V's B fragments by ldmatrix.trans.
#pragma unroll
    for (int kt = 0; kt < kKeys / 16; ++kt) {
      uint32_t pa[4];
      pa[0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        // Matrices: keys kt*16 + 0..7 and + 8..15 of dims dt*8..+7, then of (dt+1)*8..+7.
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vs + (kt * 16 + (mi % 2) * 8 + lr) * kRow<D> + (dt + mi / 2) * 8);
        mma_16816(o[dt], pa, bf[0], bf[1], T{});
        mma_16816(o[dt + 1], pa, bf[2], bf[3], T{});
      }
    }
    __syncthreads();  // this stage is consumed before the next iteration refills it
  }
  cp_async_wait<0>();
  if constexpr (kInterleaved) {  // the lanes' partial row sums -> the quad's
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
  }

  if (kSplit && chunks > 1) {
    const float ml[4] = {m0, m1, l0, l1};
    return write_and_merge_split<D, kFast, kVectors, kThreads, 1>(a, b, g, tile, split, chunks, v0,
                                                                  nv, row_begin, &o[0][0], ml,
                                                                  reinterpret_cast<float*>(kbuf));
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = half == 0 ? r0 : r1;
    if (v >= nv) continue;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D;
    float* dst = a.out ? a.out + at : nullptr;  // null: the bf16 output alone
    __nv_bfloat16* dst_bf16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + at : nullptr;
    const float inv = half == 0 ? inv0 : inv1;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + tig * 2;
      const float2 y = make_float2(o[dt][2 * half] * inv, o[dt][2 * half + 1] * inv);
      if (dst) *reinterpret_cast<float2*>(dst + c) = y;
      if (dst_bf16)
        *reinterpret_cast<__nv_bfloat162*>(dst_bf16 + c) = __floats2bfloat162_rn(y.x, y.y);
    }
  }
}

template <typename T, int D, bool kFast, bool kSplit, bool kInterleaved>
void launch_dksi(const AttentionArgs& a, cudaStream_t s) {
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(attention_flash_kernel<T, D, kFast, kSplit, kInterleaved>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemBytes<T, D>)) == cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the flash attention's shared memory");
  const int64_t chunks = kSplit ? a.splits : 1;
  const dim3 grid(static_cast<unsigned>(a.hkv), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.tiles * chunks));
  attention_flash_kernel<T, D, kFast, kSplit, kInterleaved>
      <<<grid, kThreads, kSmemBytes<T, D>, s>>>(a);
}

// The interleaved tile runs the base-2 softmax only (kFast).
template <typename T, int D, bool kFast, bool kSplit>
void launch_dks(const AttentionArgs& a, cudaStream_t s) {
  if constexpr (kFast)
    if (a.interleaved) return launch_dksi<T, D, true, kSplit, true>(a, s);
  launch_dksi<T, D, kFast, kSplit, false>(a, s);
}

template <typename T, int D, bool kFast>
void launch_dk(const AttentionArgs& a, cudaStream_t s) {
  if (a.splits > 1) return launch_dks<T, D, kFast, true>(a, s);
  launch_dks<T, D, kFast, false>(a, s);
}

template <typename T, int D>
void launch_d(const AttentionArgs& a, cudaStream_t s) {
  if (a.fast_softmax) return launch_dk<T, D, true>(a, s);
  launch_dk<T, D, false>(a, s);
}

}  // namespace

int64_t attention_flash_blocks_per_sm(int64_t head_dim) {
  return head_dim == 64 ? kMinBlocks<64> : kMinBlocks<128>;
}

bool attention_flash_supports(ElemType type, int64_t head_dim) {
  return type != ElemType::F32 && (head_dim == 64 || head_dim == 128);
}

void launch_attention_flash(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  // (The interleaved tile and the split merge read q and write out in f32 only.)
  if ((a.q16 || !a.out) && (a.type != ElemType::BF16 || (a.fast_softmax && a.interleaved) ||
                            a.splits > 1 || (!a.out && !a.out_bf16)))
    throw std::runtime_error("flash attention: bf16 q or output without their kernel");
  dispatch_type_and_head_dim(
      a, [&](auto t, auto d) { launch_d<typename decltype(t)::type, decltype(d)::value>(a, s); });
}

}  // namespace infera::cuda
