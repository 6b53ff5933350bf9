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
//     soon as S of its tile is done;
//   - the producer copies the queries too (bf16 from the GEMM stack, boxes of 64 vectors), into
//     one of two buffers, so that an item's queries land while the consumers finish the last;
//   - a persistent grid (at most one block an SM) walks (kv head, sequence, query tile) work
//     items in a snake order, the producer running ahead into the next item's copies.
// The shared-memory layouts are the wgmma kernel's ([D / 64 column blocks][rows][128 bytes] with
// the 128-byte swizzle, which TMA writes itself), so its descriptors, query staging and softmax
// step apply unchanged; the key tiles start at a multiple of 128 keys (TMA copies whole blocks;
// keys outside a row's range are masked as there).
#include <cuda.h>

#include <cstring>
#include <stdexcept>

#include "backend/cuda/attention_flash_wgmma.h"
#include "backend/cuda/attention_flash_wgmma_tile.cuh"
#include "backend/cuda/attention_tma_schedule.h"
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
// (S, O and P are 160 a thread). 24 x 128 + 240 x 256 is the block's whole allocation at launch
// (168 x 384, launch bounds of 384 threads at one block an SM): a larger sum leaves setmaxnreg.inc
// waiting forever for registers no warp gives back (a 32-register producer hung every launch).
constexpr int kProducerRegs = 24, kConsumerRegs = 240;
static_assert(kProducerRegs * (kThreads - kConsumers) + kConsumerRegs * kConsumers <=
                  65536 / kThreads / 8 * 8 * kThreads,
              "setmaxnreg would wait for more registers than the block holds");
template <int D>
constexpr int kKvBytes = kN* D * 2;  // one K or V stage

// Stages: 2 (192 KB with two query buffers) or 3 (224 KB with one, what an SM's 227 KB allow) of
// K and of V each.
template <int D, int kStages>
struct Layout {
  // Queries of two items where that fits (the next item's land while this one runs), else one.
  static constexpr int kQBuffers = kStages == 2 ? 2 : 1;
  static constexpr int kK = kQBuffers * 2 * kQBytes<D>;  // after the queries of both warpgroups
  static constexpr int kV = kK + kStages * kKvBytes<D>;
  static constexpr int kSmem = kV + kStages * kKvBytes<D> + 1024;  // + alignment slack
};

__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(kConsumers) : "memory");
}

// One work item of the kernel: query tile `tile` (vectors v0..v0 + nv - 1) of sequence b, kv
// head g, and its keys [key_lo, key_hi) (key_lo tile-aligned) in ntiles 128-key tiles; fix: the
// last tile's V rows past key_hi are zeroed before use. The producer and the consumers derive it
// alike, so they walk the same items, tiles and barrier phases.
struct WorkItem {
  int g, b, row_begin, v0, nv, len, key_lo, key_hi, ntiles;
  bool fix;
};
// Item `item` of a launch: query tiles longest first (the non-persistent grid's block order),
// then sequences, then kv heads. False where the tile has no vectors (a shorter sequence's).
__device__ __forceinline__ bool work_item(const AttentionArgs& a, int item, WorkItem& w) {
  const int hkv = static_cast<int>(a.hkv), seqs = static_cast<int>(a.num_seqs);
  const int zr = item / (seqs * hkv), rem = item % (seqs * hkv);
  w.b = rem / hkv;
  w.g = rem % hkv;
  const int tile = static_cast<int>(a.tiles) - 1 - zr;
  w.row_begin = a.query_start[w.b];
  const int rows = a.query_start[w.b + 1] - w.row_begin;
  const int group = static_cast<int>(a.hq / a.hkv);
  w.v0 = tile * kVec;
  w.nv = min(kVec, rows * group - w.v0);
  if (w.nv <= 0) return false;
  w.len = a.seq_lens[w.b];
  // The item's keys: the union of its vectors' key ranges, which is [lo of its first vector, hi
  // of its last] (a chunk's rows have consecutive positions, and key_range's lo and hi never
  // decrease with the position), from two positions, so that the producer's first copies need
  // not wait for the consumers' per-vector ranges. Tile-aligned: the copies take whole blocks.
  int row, head, lo_last;
  vector_row_head(a, w.row_begin, w.g, w.v0, row, head);
  key_range(a, a.positions[row], w.len, w.key_lo, w.key_hi);
  vector_row_head(a, w.row_begin, w.g, w.v0 + w.nv - 1, row, head);
  key_range(a, a.positions[row], w.len, lo_last, w.key_hi);
  w.key_hi = max(w.key_lo, w.key_hi);
  w.key_lo = w.key_lo / kN * kN;
  w.ntiles = w.key_hi > w.key_lo ? (w.key_hi - w.key_lo + kN - 1) / kN : 0;
  // The rows of key_hi's block past key_hi hold whatever the cache had there (another
  // sequence's values; inf after an overflow): P is 0 for them, but 0 x inf is NaN.
  w.fix = w.ntiles > 0 && w.key_hi % static_cast<int>(a.block_size) != 0;
  return true;
}

// The item of round k of this block (attention_tma_schedule.h: a snake over rounds of gridDim.x).
__device__ __forceinline__ int snake_item(int k) {
  return tma_schedule::snake_item(k, static_cast<int>(gridDim.x), static_cast<int>(blockIdx.x));
}

// kPingPong (CudaOptions::flash_tma_pingpong): the two consumer warpgroups take turns at issuing
// their products (FlashAttention-3's ping-pong: named barriers 2 and 3), so that one's softmax
// runs while the other's products keep the tensor cores busy, instead of both issuing together
// and then both computing their softmax.
// The grid is 1D over the work items (work_item); a block walks the items of snake_item
// (CudaOptions::flash_tma_persistent: a grid of at most one block an SM, so that the producer
// copies an item's first K/V tiles (and queries) while the consumers finish the item before).
// Barrier phases run on across a block's items: its tiles are counted from its first item.
template <typename T, int D, int kStages, bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1)
    attention_tma_wgmma_kernel(const AttentionArgs a, const __grid_constant__ CUtensorMap kmap,
                               const __grid_constant__ CUtensorMap vmap,
                               const __grid_constant__ CUtensorMap qmap, int items) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(D == 128, "the S and P V shapes below are head_dim 128's");
  using L = Layout<D, kStages>;
  constexpr int kQBuffers = L::kQBuffers;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  unsigned char* const base = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  unsigned char* const qs = base;  // [kQBuffers][2 warpgroups] queries
  unsigned char* const kbuf = base + L::kK;
  unsigned char* const vbuf = base + L::kV;
  // Each vector's key range [lo, hi), by item parity where two query buffers fit (3 stages leave
  // no room: one, behind a barrier of the consumers).
  __shared__ int range[kQBuffers][kVec * 2];
  // K and V stages are handed back apart: a K stage once S of its tile is done, a V stage once
  // P V is (an iteration later), so the next K copies start that much earlier.
  __shared__ __align__(8) uint64_t kfull[kStages], vfull[kStages], kempty[kStages], vempty[kStages],
      vfixed[kStages], qfull[kQBuffers], qempty[kQBuffers];
  // kTmaQueries: the producer copies the queries too (a.q16, already scaled and rounded), boxes of
  // 64 vectors (64 / group rows x the kv head's group of q heads) x 64 dims, straight into the
  // swizzled layout stage_queries_swizzled writes, before the item's first K tile.
  const bool q_tma = (a.tune & kTmaQueries) != 0;
  const int group = static_cast<int>(a.hq / a.hkv);
  const int bs = static_cast<int>(a.block_size);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&kfull[s], 1);
      mbar_init(&vfull[s], 1);
      mbar_init(&kempty[s], kConsumers / 32);  // one arrival a consumer warp
      mbar_init(&vempty[s], kConsumers / 32);
      mbar_init(&vfixed[s], 1);
    }
    for (int q = 0; q < kQBuffers; ++q) {
      mbar_init(&qfull[q], 1);
      mbar_init(&qempty[q], kConsumers / 32);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();  // the barriers, initialized; the block's only barrier of all its threads

  if (warp >= kConsumers / 32) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (warp > kConsumers / 32) return;
    // Producer: lane j copies block j / (D / 64), dims 64 (j % (D / 64)).. of each K and V tile.
    const int blocks = kN / bs, copies = blocks * (D / 64);
    const int blk = lane / (D / 64), cb = lane % (D / 64);
    const int dst = cb * kN * 128 + blk * bs * 128;
    int jt = 0, qi = 0, nfix = 0;  // tiles, items and fixes so far
    for (int k = 0, item; (item = snake_item(k)) < items; ++k) {
      WorkItem w;
      if (!work_item(a, item, w)) continue;
      if (q_tma) {  // lane: warpgroup lane / (D / 64), column block lane % (D / 64)
        const int qb = qi % kQBuffers;
        if (qi >= kQBuffers) mbar_wait(&qempty[qb], ((qi / kQBuffers) - 1) & 1);
        if (lane == 0) mbar_expect_tx(&qfull[qb], 2 * kQBytes<D>);
        __syncwarp();
        if (lane < 2 * (D / 64)) {
          const int wq = lane / (D / 64), c = lane % (D / 64);
          tma_load_3d(qs + (qb * 2 + wq) * kQBytes<D> + c * kWgVectors * 128, &qmap, &qfull[qb],
                      c * 64, w.g * group, w.row_begin + (w.v0 + wq * kWgVectors) / group);
        }
      }
      const int64_t head_row = static_cast<int64_t>(w.g) * a.num_blocks;
      const int* const table = a.block_table + static_cast<int64_t>(w.b) * a.max_blocks;
      // The pool row of this lane's block of tile i; a block past key_hi: a box wholly outside
      // the pool, which arrives as zeros.
      const auto pool_row = [&](int i) {
        const int t = w.key_lo + i * kN + blk * bs;
        return lane < copies && t < w.key_hi ? static_cast<int>((head_row + table[t / bs]) * bs)
                                             : -bs;
      };
      // In the consumers' order of need: K of tile j, then V of tile j - 1.
      for (int j = 0; j <= w.ntiles; ++j) {
        if (j < w.ntiles) {
          const int t = jt + j, s = t % kStages, row = pool_row(j);
          if (t >= kStages) mbar_wait(&kempty[s], ((t / kStages) - 1) & 1);
          if (lane == 0) mbar_expect_tx(&kfull[s], kKvBytes<D>);
          __syncwarp();
          if (lane < copies)
            tma_load_2d(kbuf + s * kKvBytes<D> + dst, &kmap, &kfull[s], cb * 64, row);
        }
        if (j >= 1) {
          const int t = jt + j - 1, s = t % kStages, row = pool_row(j - 1);
          if (t >= kStages) mbar_wait(&vempty[s], ((t / kStages) - 1) & 1);
          if (lane == 0) mbar_expect_tx(&vfull[s], kKvBytes<D>);
          __syncwarp();
          if (lane < copies)
            tma_load_2d(vbuf + s * kKvBytes<D> + dst, &vmap, &vfull[s], cb * 64, row);
        }
      }
      if (w.fix) {  // the last tile's V rows past key_hi, zeroed once they have landed
        const int t = jt + w.ntiles - 1, s = t % kStages;
        const int t0 = w.key_lo + (w.ntiles - 1) * kN;
        mbar_wait(&vfull[s], (t / kStages) & 1);
        const int r0 = w.key_hi - t0, r1 = (r0 + bs - 1) / bs * bs;  // whole 128-byte rows
        unsigned char* const vs = vbuf + s * kKvBytes<D>;
        for (int e = lane; e < (r1 - r0) * (D / 64) * 8; e += 32) {
          const int r = r0 + e / ((D / 64) * 8), c = e % ((D / 64) * 8);
          *reinterpret_cast<uint4*>(vs + (c / 8) * kN * 128 + r * 128 + (c % 8) * 16) =
              make_uint4(0u, 0u, 0u, 0u);
        }
        wgmma::fence_proxy_async();  // the zeros, to the tensor cores' proxy
        __syncwarp();
        // kStages barriers in turn: the producer may zero later items' last tiles before the
        // consumers have waited for this one's, but never kStages fixes ahead (a fix needs its V
        // stage back, and each item holds a stage).
        if (lane == 0) mbar_arrive(&vfixed[nfix % kStages]);
        ++nfix;
      }
      jt += w.ntiles;
      ++qi;
    }
    return;
  }

  // Consumers: warpgroup wg owns vectors 64 wg..+63 of each item.
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int wg = warp / 4, wq = warp % 4, gid = lane / 4, tig = lane % 4;
  const float scale = static_cast<float>(a.scale) * 1.4426950408889634f;  // base 2
  const int r0 = wg * kWgVectors + wq * 16 + gid, r1 = r0 + 8;
  const uint64_t k_desc = wgmma::desc_sw128(smem_u32(kbuf), 16, 1024);
  const uint64_t v_desc = wgmma::desc_sw128(smem_u32(vbuf), kN * 128, 1024);
  // Ping-pong: before its products a warpgroup waits for its turn (barrier 2 + wg, which the other
  // arrives at once it has issued its own), after them it passes the turn. Both walk the same
  // ntiles + 1 issue points an item; warpgroup 1 gives warpgroup 0 the first turn and keeps its
  // last pass, so every arrival has its wait.
  const auto take_turn = [&] {
    if constexpr (kPingPong) asm volatile("bar.sync %0, %1;\n" ::"r"(2 + wg), "n"(kConsumers));
  };
  const auto pass_turn = [&] {
    if constexpr (kPingPong) asm volatile("bar.arrive %0, %1;\n" ::"r"(3 - wg), "n"(kConsumers));
  };
  int jt = 0, qi = 0, nfix = 0;
  for (int k = 0, item; (item = snake_item(k)) < items; ++k) {
    WorkItem w;
    if (!work_item(a, item, w)) continue;
    const int qb = qi % kQBuffers;
    int* const rg = range[qb];
    if (kQBuffers == 1) consumers_sync();  // both warpgroups are done with the previous item
    vector_key_ranges<kVec, kConsumers>(a, w.row_begin, w.g, w.v0, w.nv, w.len, false, rg);
    unsigned char* const qbuf = qs + qb * 2 * kQBytes<D>;
    if (!q_tma) {
      stage_queries_swizzled<T, D, kVec, kConsumers>(a, w.row_begin, w.g, w.v0, w.nv, scale, qbuf);
      wgmma::fence_proxy_async();
    }
    consumers_sync();
    const int lo0 = rg[2 * r0], hi0 = rg[2 * r0 + 1];
    const int lo1 = rg[2 * r1], hi1 = rg[2 * r1 + 1];
    int full_lo, full_hi;
    warp_full_key_span(lo0, hi0, lo1, hi1, full_lo, full_hi);
    const int key_lo = w.key_lo, key_hi = w.key_hi, ntiles = w.ntiles;

    float o[D / 8][4];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this lane's share
    float s[kN / 8][4];
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    uint32_t pa[kN / 16][4];  // P of the previous tile as wgmma's A fragments, 16 keys each

    const uint64_t q_desc = wgmma::desc_sw128(smem_u32(qbuf + wg * kQBytes<D>), 16, 1024);
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

    if (q_tma) mbar_wait(&qfull[qb], (qi / kQBuffers) & 1);
    if (ntiles > 0) {
      if (kPingPong && wg == 1) pass_turn();
      mbar_wait(&kfull[jt % kStages], (jt / kStages) & 1);
      take_turn();
      wgmma::fence();
      s_product(jt % kStages);
      pass_turn();
      wgmma::wait<0>();
      wgmma::fence_operand(s);
      if (lane == 0) mbar_arrive(&kempty[jt % kStages]);
      float alpha0, alpha1;
      softmax(key_lo, alpha0, alpha1);  // o is 0: nothing to rescale
      pack_p();
      // Iteration i: S of tile i and P V of tile i - 1 in flight together; tile i's softmax
      // under P V; then tile i - 1's stages go back to the producer. No wgmma sits under a
      // branch (ptxas serializes them all otherwise).
      for (int i = 1; i < ntiles; ++i) {
        const int t = jt + i, st = t % kStages, sp = (t - 1) % kStages;
        mbar_wait(&kfull[st], (t / kStages) & 1);
        mbar_wait(&vfull[sp], ((t - 1) / kStages) & 1);  // (tile i - 1 < the last: not fixed)
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
      const int tl = jt + ntiles - 1, sl = tl % kStages;
      if (w.fix)
        mbar_wait(&vfixed[nfix % kStages], (nfix / kStages) & 1);
      else
        mbar_wait(&vfull[sl], (tl / kStages) & 1);
      take_turn();
      wgmma::fence_operand(o);
      wgmma::fence();
      pv_product(sl);
      if (wg == 0) pass_turn();
      wgmma::wait<0>();
      wgmma::fence_operand(o);
      if (lane == 0) mbar_arrive(&vempty[sl]);  // (the next item's tiles reuse the stages)
    }
    if (q_tma && lane == 0) mbar_arrive(&qempty[qb]);  // every product of this item is done

#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {  // the lanes' partial row sums -> the quad's
      l0 += __shfl_xor_sync(0xffffffffu, l0, off);
      l1 += __shfl_xor_sync(0xffffffffu, l1, off);
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int v = half == 0 ? r0 : r1;
      if (v >= w.nv) continue;
      int row, head;
      vector_row_head(a, w.row_begin, w.g, w.v0 + v, row, head);
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
    jt += ntiles;
    nfix += w.fix ? 1 : 0;
    ++qi;
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
  const int items = static_cast<int>(a.hkv * a.num_seqs * a.tiles);
  kernel<<<static_cast<unsigned>(t.grid), kThreads, kSmem, stream>>>(a, t.keys, t.values, t.queries,
                                                                     items);
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

bool encode_query_map(CUtensorMap* map, const void* q16, int64_t tokens, int64_t hq, int64_t group,
                      int64_t head_dim) {
  if (group < 1 || group > 8 || (group & (group - 1)) != 0 || head_dim != 128 ||
      reinterpret_cast<uintptr_t>(q16) % 16 != 0)
    return false;
  return encode_3d_map(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, q16, head_dim, hq, tokens, head_dim,
                       hq * head_dim, 64, static_cast<int>(group),
                       static_cast<int>(tma_attention::kVec / 2 / group));
}

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
