// Paged prefill attention with TMA copies by a producer warpgroup (CudaOptions::flash_tma;
// head_dim 128, f16/bf16 caches, sm_90a): FlashAttention-3's structure on the wgmma kernel's
// pieces.
//
// Why: the wgmma kernel (attention_flash_wgmma_kernel.cuh) reaches ~235 TFLOP/s at a 2048-token
// causal prompt on an H100 and is issue-bound (session 10's ncu: ~720 instructions a 64-key tile,
// most of them the per-thread cp.async copies with their paged addresses and the softmax), and
// each warpgroup runs S, softmax and P V in turn with every thread waiting at one barrier a tile.
// Here:
//   - one warp of a producer warpgroup copies each 128-key tile's K and V with TMA (a box of one
//     paged block and 64 dims a lane, completing on an mbarrier), so the consumers issue no copy
//     instructions and meet no block-wide barrier in the loop;
//   - two consumer warpgroups own 64 query vectors each (128 a block, a (row, q head) pair each as
//     the wgmma kernel's) and walk 128-key tiles: S = Q K^T as m64n128k16, P V as m64n128k16;
//   - S of tile i and P V of tile i - 1 are in flight together, the softmax of tile i under P V
//     (FlashAttention-3's intra-warpgroup overlap), 2 or 3 K/V stages, a K stage handed back as
//     soon as S of its tile is done.
// The shared-memory layouts are the wgmma kernel's ([D / 64 column blocks][rows][128 bytes] with
// the 128-byte swizzle, which TMA writes itself), so its descriptors, query staging and softmax
// step apply unchanged; the key tiles start at a multiple of 128 keys (TMA copies whole blocks;
// keys outside a row's range are masked as there).
#include <cuda.h>

#include <cstring>
#include <stdexcept>

#include "backend/cuda/attention_flash_wgmma.h"
#include "backend/cuda/attention_flash_wgmma_tile.cuh"
#include "backend/cuda/mbarrier.cuh"
#include "backend/cuda/tensor_map.h"

namespace infera::cuda {
namespace tma_attention {

using namespace flash_wgmma;  // kWgVectors, kQBytes, stage_queries_swizzled, rescale_o, flash::*

constexpr int kN = 128;                     // keys a tile
constexpr int kVec = 2 * kWgVectors;        // query vectors a block: consumer warpgroups 0 and 1
constexpr int kConsumers = 256;             // their threads; warpgroup 2 is the producer's
constexpr int kThreads = kConsumers + 128;  // (ptxas counts registers by whole warpgroups)
// Registers a thread after setmaxnreg: the producer warpgroup gives its share to the consumers
// (S, O and P are 160 a thread), 24 x 128 + 240 x 256 <= 64 K.
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
template <int D>
constexpr int kKvBytes = kN* D * 2;  // one K or V stage

// Stages: 2 (160 KB) or 3 (224 KB, what an SM's 227 KB allow) of K and of V each.
template <int D, int kStages>
struct Layout {
  static constexpr int kK = 2 * kQBytes<D>;  // after the two warpgroups' queries
  static constexpr int kV = kK + kStages * kKvBytes<D>;
  static constexpr int kSmem = kV + kStages * kKvBytes<D> + 1024;  // + alignment slack
};

__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
}

// kPingPong (CudaOptions::flash_tma_pingpong): the two consumer warpgroups take turns at issuing
// their products (FlashAttention-3's ping-pong: named barriers 2 and 3), so that one's softmax
// runs while the other's products keep the tensor cores busy, instead of both issuing together
// and then both computing their softmax.
template <typename T, int D, int kStages, bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1)
    attention_tma_wgmma_kernel(const AttentionArgs a, const __grid_constant__ CUtensorMap kmap,
                               const __grid_constant__ CUtensorMap vmap) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(D == 128, "the S and P V shapes below are head_dim 128's");
  using L = Layout<D, kStages>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* const base = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  unsigned char* const qs = base;
  unsigned char* const kbuf = base + L::kK;
  unsigned char* const vbuf = base + L::kV;
  __shared__ int range[kVec * 2];  // each vector's key range [lo, hi)
  // K and V stages are handed back apart: a K stage once S of its tile is done, a V stage once
  // P V is (an iteration later), so the next K copies start that much earlier.
  __shared__ __align__(8) uint64_t kfull[kStages], vfull[kStages], kempty[kStages], vempty[kStages],
      vfixed;

  const int g = blockIdx.x, b = blockIdx.y;
  const int tile = static_cast<int>(gridDim.z - 1 - blockIdx.z);  // longest first
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int group = static_cast<int>(a.hq / a.hkv);
  const int v0 = tile * kVec, nv = min(kVec, rows * group - v0);
  if (nv <= 0) return;
  const int len = a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&kfull[s], 1);
      mbar_init(&vfull[s], 1);
      mbar_init(&kempty[s], kConsumers / 32);  // one arrival a consumer warp
      mbar_init(&vempty[s], kConsumers / 32);
    }
    mbar_init(&vfixed, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the barriers, initialized; the block's only barrier of all its threads
  // The block's keys: the union of its vectors' key ranges, which is [lo of its first vector,
  // hi of its last] (a chunk's rows have consecutive positions, and key_range's lo and hi never
  // decrease with the position), from two positions, so that the producer's first copies need
  // not wait for the consumers' per-vector ranges. Tile-aligned: the copies take whole blocks.
  int key_lo, key_hi;
  {
    int row, head, lo_last;
    vector_row_head(a, row_begin, g, v0, row, head);
    key_range(a, a.positions[row], len, key_lo, key_hi);
    vector_row_head(a, row_begin, g, v0 + nv - 1, row, head);
    key_range(a, a.positions[row], len, lo_last, key_hi);
    key_hi = max(key_lo, key_hi);
    key_lo = key_lo / kN * kN;
  }
  const int ntiles = key_hi > key_lo ? (key_hi - key_lo + kN - 1) / kN : 0;
  const int bs = static_cast<int>(a.block_size);
  // The rows of key_hi's block past key_hi hold whatever the cache had there (another sequence's
  // values; inf after an overflow): P is 0 for them, but 0 x inf is NaN, so the producer zeroes
  // those V rows of the last tile before the consumers read it (vfixed).
  const bool fix_last = ntiles > 0 && key_hi % bs != 0;

  if (warp >= kConsumers / 32) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (warp > kConsumers / 32) return;
    // Producer: lane j copies block j / (D / 64), dims 64 (j % (D / 64)).. of each K and V tile.
    const int blocks = kN / bs, copies = blocks * (D / 64);
    const int blk = lane / (D / 64), cb = lane % (D / 64);
    const int64_t head_row = static_cast<int64_t>(g) * a.num_blocks;
    const int* const table = a.block_table + static_cast<int64_t>(b) * a.max_blocks;
    const int dst = cb * kN * 128 + blk * bs * 128;
    // The pool row of this lane's block of tile i; a block past key_hi: a box wholly outside the
    // pool, which arrives as zeros.
    const auto pool_row = [&](int i) {
      const int t = key_lo + i * kN + blk * bs;
      return lane < copies && t < key_hi ? static_cast<int>((head_row + table[t / bs]) * bs) : -bs;
    };
    // In the consumers' order of need: K of tile j, then V of tile j - 1.
    for (int j = 0; j <= ntiles; ++j) {
      if (j < ntiles) {
        const int s = j % kStages, row = pool_row(j);
        if (j >= kStages) mbar_wait(&kempty[s], ((j / kStages) - 1) & 1);
        if (lane == 0) mbar_expect_tx(&kfull[s], kKvBytes<D>);
        __syncwarp();
        if (lane < copies)
          tma_load_2d(kbuf + s * kKvBytes<D> + dst, &kmap, &kfull[s], cb * 64, row);
      }
      if (j >= 1) {
        const int i = j - 1, s = i % kStages, row = pool_row(i);
        if (i >= kStages) mbar_wait(&vempty[s], ((i / kStages) - 1) & 1);
        if (lane == 0) mbar_expect_tx(&vfull[s], kKvBytes<D>);
        __syncwarp();
        if (lane < copies)
          tma_load_2d(vbuf + s * kKvBytes<D> + dst, &vmap, &vfull[s], cb * 64, row);
      }
    }
    if (fix_last) {  // the last tile's V rows past key_hi, zeroed once they have landed
      const int i = ntiles - 1, s = i % kStages, t0 = key_lo + i * kN;
      mbar_wait(&vfull[s], (i / kStages) & 1);
      const int r0 = key_hi - t0, r1 = (r0 + bs - 1) / bs * bs;  // whole 128-byte rows
      unsigned char* const vs = vbuf + s * kKvBytes<D>;
      for (int e = lane; e < (r1 - r0) * (D / 64) * 8; e += 32) {
        const int r = r0 + e / ((D / 64) * 8), c = e % ((D / 64) * 8);
        *reinterpret_cast<uint4*>(vs + (c / 8) * kN * 128 + r * 128 + (c % 8) * 16) =
            make_uint4(0u, 0u, 0u, 0u);
      }
      wgmma::fence_proxy_async();  // the zeros, to the tensor cores' proxy
      __syncwarp();
      if (lane == 0) mbar_arrive(&vfixed);
    }
    return;
  }

  // Consumers: warpgroup wg owns vectors 64 wg..+63.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int wg = warp / 4, wq = warp % 4, gid = lane / 4, tig = lane % 4;
  const float scale = static_cast<float>(a.scale) * 1.4426950408889634f;  // base 2
  vector_key_ranges<kVec, kConsumers>(a, row_begin, g, v0, nv, len, false, range);
  stage_queries_swizzled<T, D, kVec, kConsumers>(a, row_begin, g, v0, nv, scale, qs);
  wgmma::fence_proxy_async();
  consumers_sync();

  const int r0 = wg * kWgVectors + wq * 16 + gid, r1 = r0 + 8;
  const int lo0 = range[2 * r0], hi0 = range[2 * r0 + 1];
  const int lo1 = range[2 * r1], hi1 = range[2 * r1 + 1];
  int full_lo, full_hi;
  warp_full_key_span(lo0, hi0, lo1, hi1, full_lo, full_hi);

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this lane's share
  float s[kN / 8][4];
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
  uint32_t pa[kN / 16][4];  // P of the previous tile as wgmma's A fragments, 16 keys each

  const uint64_t q_desc = wgmma::desc_sw128(smem_u32(qs + wg * kQBytes<D>), 16, 1024);
  const uint64_t k_desc = wgmma::desc_sw128(smem_u32(kbuf), 16, 1024);
  const uint64_t v_desc = wgmma::desc_sw128(smem_u32(vbuf), kN * 128, 1024);
  const auto s_product = [&](int st) {  // S = Q K^T of the tile in stage st (async)
    const uint64_t dk0 = wgmma::desc_add(k_desc, st * kKvBytes<D>);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // dims 16 kk..+15: column block kk / 4, 32 B a step
      const uint32_t qstep = (kk / 4) * kWgVectors * 128 + (kk % 4) * 32;
      const uint32_t kstep = (kk / 4) * kN * 128 + (kk % 4) * 32;
      wgmma::ss_m64n128k16(s, wgmma::desc_add(q_desc, qstep), wgmma::desc_add(dk0, kstep),
                           kk > 0 ? 1 : 0, T{});
    }
    wgmma::commit();
  };
  const auto pv_product = [&](int st) {  // O += P V of the tile in stage st (async)
    const uint64_t dv0 = wgmma::desc_add(v_desc, st * kKvBytes<D>);
#pragma unroll
    for (int kt = 0; kt < kN / 16; ++kt)  // keys 16 kt..+15: two 8-row groups, 2048 bytes
      wgmma::rs_m64n128k16(o, pa[kt], wgmma::desc_add(dv0, kt * 2048), T{});
    wgmma::commit();
  };
  const auto softmax = [&](int t0, float& alpha0, float& alpha1) {
    if (t0 >= full_lo && t0 + kN <= full_hi)  // warp-uniform
      softmax_scores<false, kN / 8>(s, m0, m1, l0, l1, alpha0, alpha1, t0, key_hi, lo0, hi0, lo1,
                                    hi1, tig);
    else
      softmax_scores<true, kN / 8>(s, m0, m1, l0, l1, alpha0, alpha1, t0, key_hi, lo0, hi0, lo1,
                                   hi1, tig);
  };
  const auto pack_p = [&] {
#pragma unroll
    for (int kt = 0; kt < kN / 16; ++kt) {
      pa[kt][0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[kt][1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[kt][2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[kt][3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
    }
  };

  // Ping-pong: before its products a warpgroup waits for its turn (barrier 2 + wg, which the other
  // arrives at once it has issued its own), after them it passes the turn. Both walk the same
  // ntiles + 1 issue points; warpgroup 1 gives warpgroup 0 the first turn and keeps its last
  // pass, so every arrival has its wait.
  const auto take_turn = [&] {
    if constexpr (kPingPong) asm volatile("bar.sync %0, %1;\n" ::"r"(2 + wg), "n"(kConsumers));
  };
  const auto pass_turn = [&] {
    if constexpr (kPingPong) asm volatile("bar.arrive %0, %1;\n" ::"r"(3 - wg), "n"(kConsumers));
  };
  if (ntiles > 0) {
    if (kPingPong && wg == 1) pass_turn();
    mbar_wait(&kfull[0], 0);
    take_turn();
    wgmma::fence();
    s_product(0);
    pass_turn();
    wgmma::wait<0>();
    wgmma::fence_operand(s);
    if (lane == 0) mbar_arrive(&kempty[0]);
    float alpha0, alpha1;
    softmax(key_lo, alpha0, alpha1);  // o is 0: nothing to rescale
    pack_p();
    // Iteration i: S of tile i and P V of tile i - 1 in flight together; tile i's softmax under
    // P V; then tile i - 1's stage goes back to the producer. No wgmma sits under a branch
    // (ptxas serializes them all otherwise).
    for (int i = 1; i < ntiles; ++i) {
      const int st = i % kStages, sp = (i - 1) % kStages;
      mbar_wait(&kfull[st], (i / kStages) & 1);
      mbar_wait(&vfull[sp], ((i - 1) / kStages) & 1);  // (tile i - 1 < the last: never fixed)
      take_turn();
      wgmma::fence_operand(o);
      wgmma::fence();
      s_product(st);
      pv_product(sp);
      pass_turn();
      wgmma::wait<1>();  // S done; P V may still run
      wgmma::fence_operand(s);
      if (lane == 0) mbar_arrive(&kempty[st]);
      softmax(key_lo + i * kN, alpha0, alpha1);
      wgmma::wait<0>();
      wgmma::fence_operand(o);
      wgmma::fence_operand(s);  // (pa, P V's operand, is repacked only past the wait)
      if (lane == 0) mbar_arrive(&vempty[sp]);
      rescale_o<D>(o, alpha0, alpha1);
      pack_p();
    }
    const int sl = (ntiles - 1) % kStages;
    if (fix_last)
      mbar_wait(&vfixed, 0);
    else
      mbar_wait(&vfull[sl], ((ntiles - 1) / kStages) & 1);
    take_turn();
    wgmma::fence_operand(o);
    wgmma::fence();
    pv_product(sl);
    if (wg == 0) pass_turn();
    wgmma::wait<0>();
    wgmma::fence_operand(o);
  }

#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {  // the lanes' partial row sums -> the quad's
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = half == 0 ? r0 : r1;
    if (v >= nv) continue;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D;
    float* const dst = a.out ? a.out + at : nullptr;
    __nv_bfloat16* const dst_bf16 =
        a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + at : nullptr;
    const float l = half == 0 ? l0 : l1;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key: zeros, not NaN
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + tig * 2, j = 2 * half;
      const float2 y = make_float2(o[dt][j] * inv, o[dt][j + 1] * inv);
      if (dst) *reinterpret_cast<float2*>(dst + c) = y;
      if (dst_bf16)
        *reinterpret_cast<__nv_bfloat162*>(dst_bf16 + c) = __floats2bfloat162_rn(y.x, y.y);
    }
  }
#else
  __trap();
#endif
}

template <typename T, int D, int kStages, bool kPingPong>
void launch(const TmaAttentionArgs& t, cudaStream_t stream) {
  constexpr auto kernel = attention_tma_wgmma_kernel<T, D, kStages, kPingPong>;
  constexpr int kSmem = Layout<D, kStages>::kSmem;
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem) ==
           cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the TMA attention's shared memory");
  const AttentionArgs& a = t.a;
  const dim3 grid(static_cast<unsigned>(a.hkv), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.tiles));
  kernel<<<grid, kThreads, kSmem, stream>>>(a, t.keys, t.values);
}

}  // namespace tma_attention

bool attention_tma_wgmma_supports(ElemType type, int64_t head_dim, int64_t hkv, int64_t block_size,
                                  int64_t num_blocks, int sm_major, int sm_minor) {
  // sm_90a machine code only; head_dim 128; blocks of 8..128 keys, a power of two (a tile is whole
  // blocks, a box of 8 rows or more keeps the swizzle's 1024-byte atoms); every pool row's index
  // within int32 (TMA coordinates).
  return sm_major == 9 && sm_minor == 0 && (type == ElemType::BF16 || type == ElemType::F16) &&
         head_dim == 128 && block_size >= 8 && block_size <= tma_attention::kN &&
         (block_size & (block_size - 1)) == 0 && num_blocks > 0 && hkv > 0 &&
         hkv * num_blocks * block_size <= int64_t{0x7fffffff} && encode_tiled_fn() != nullptr;
}

bool encode_kv_pool_map(CUtensorMap* map, ElemType type, const void* pool, int64_t hkv,
                        int64_t num_blocks, int64_t block_size, int64_t head_dim) {
  return encode_2d_map(
      map,
      type == ElemType::BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      pool, hkv * num_blocks * block_size, head_dim, head_dim, 64, static_cast<int>(block_size));
}

int64_t attention_tma_wgmma_vectors() { return tma_attention::kVec; }

void launch_attention_tma_wgmma(const void* p, cudaStream_t stream) {
  // The record's bytes sit at an 8-byte boundary; the tensor maps want their 64-byte alignment.
  TmaAttentionArgs t;
  std::memcpy(static_cast<void*>(&t), p, sizeof t);
  const bool three = t.a.stages == 3;  // CudaOptions::flash_tma_stages
  const bool ping = (t.a.tune & kTmaPingPong) != 0;
  using tma_attention::launch;
  if (t.a.type == ElemType::BF16) {
    if (ping)
      return three ? launch<__nv_bfloat16, 128, 3, true>(t, stream)
                   : launch<__nv_bfloat16, 128, 2, true>(t, stream);
    return three ? launch<__nv_bfloat16, 128, 3, false>(t, stream)
                 : launch<__nv_bfloat16, 128, 2, false>(t, stream);
  }
  if (ping)
    return three ? launch<__half, 128, 3, true>(t, stream)
                 : launch<__half, 128, 2, true>(t, stream);
  three ? launch<__half, 128, 3, false>(t, stream) : launch<__half, 128, 2, false>(t, stream);
}

}  // namespace infera::cuda
