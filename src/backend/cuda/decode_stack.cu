// Backend::decoder_stack for one decode row as one kernel: all layers of a Qwen3-style decoder in
// a single launch of one block per SM, phases separated by grid barriers.
//
// Why: at batch 1 the per-op chain is ~229 dependent kernels of ~3-5 us each (session 7's
// cudab1 profile), each a single wave that ramps up and drains while HBM idles; fusing pieces of
// it (residual_mlp, output_mlp) moved work onto the critical path and did not pay. Here nothing
// waits for a launch: every warp loads its rows of the NEXT phase's weights into registers before
// it waits at the barrier in front of that phase (weights never depend on activations), so the
// weight stream runs across the barriers, the norms and the attention.
//
// Per layer (W = the grid's warps; gw = this warp's index in the grid):
//   A. every block: xn = rmsnorm(x) * attn_norm into shared memory (redundantly: 4 KB); warp gw
//      computes q/k/v rows gw, gw + W (already in its registers) into qkv.       | barrier
//   B. block (kv head g, split s) of hkv * splits: q-norm + RoPE of the group's q heads; the block
//      whose key range holds the new position also k-norms + rotates k and writes k and v to the
//      cache; each warp walks its keys (online softmax in f32), the block merges its warps, writes
//      its split's partials, and the split that finishes last merges them into attn. | barrier
//   C. every block: attn into shared memory; warp gw: x[gw] += attn . Wo[gw].       | barrier
//   D. every block: xn = rmsnorm(x) * mlp_norm; warp gw: h[j] = silu(xn . Wg[j]) * (xn . Wu[j]) for
//      j = gw, gw + W.                                                               | barrier
//   E. every block: h into shared memory; warp gw: x[gw] += h . Wd[gw].             | barrier
// The keys a warp reads in B (all but the new one were written by earlier steps) are loaded with
// the layer's q/k/v weights. Arithmetic as the one-op kernels (f32, bf16 weights and cache); the
// summation orders differ, so results match the composition to rounding, not bit for bit.
// On by default (CudaOptions::decode_stack); docs/notes/2026-12-03/session-12-lead.md has what it
// measured.
#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "backend/cuda/decode_stack.h"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mbarrier.cuh"

namespace infera::cuda {
namespace {

using bf16 = __nv_bfloat16;

// kThreads compute; the S variant adds one producer warp (kWarps) that only issues the ring's
// copies, so the block's own synchronization is a named barrier of the kThreads (sync_compute).
constexpr int kThreads = 512, kWarps = kThreads / 32;
// Register budget per lane, in 16-byte chunks of 8 bf16 (chunk c = lane + 32 i of a row):
constexpr int kChunksD = 4;    // a row of k = hidden <= 1024
constexpr int kChunksA = 8;    // a row of k = hq * head_dim <= 2048 (o projection)
constexpr int kChunksF = 12;   // a row of k = f <= 3072 (down projection)
constexpr int kQkvRows = 2;    // q/k/v rows per warp
constexpr int kGluRows = 2;    // gate/up pairs per warp
constexpr int kMaxGroup = 4;   // q heads per kv head (the kernel's G: 2 or 4)
constexpr int kKeyPre = 2;     // keys a warp loads with the layer's q/k/v weights
constexpr int kKeyBatch = 4;   // keys a warp loads at once past those

// The shared-memory weight ring (the kernel's S variant). Each block owns contiguous rows of every
// matrix: the grid's share of q/k/v rows, of o and down rows (the hidden size) and of gate/up rows
// (the intermediate size), so a layer is 7 stages per block: its q, k, v, o, gate, up and down
// rows, each one contiguous range of the weight file. A producer warp of its own (one lane)
// copies them in that order (bulk copies, TMA) into a ring of shared memory as far ahead as the
// ring has room, whatever the compute warps are doing: weights never depend on activations, so
// HBM streams the next phases' rows through the attention, the norms and the barriers, where the
// registers path can only load one phase ahead. The compute warps free a phase's stages at the barrier arrival
// after it (RingShared::consumed). A copy's issue can stall its thread for as long as the copy
// engine is busy, which is why the producer is not one of the compute threads (session 18: as
// thread 32 issuing at each arrival it held its block's departure up to ~3 us).
// A stage that does not fit before the ring's end leaves that tail empty and continues at its
// start at a row boundary, so every row is contiguous; addresses are "virtual" byte counts since
// the launch's start, physical = virtual mod ring bytes.
constexpr int kRingBars = 16;       // stages issued and not yet freed, at most (a barrier each)
constexpr int kStagesPerLayer = 7;  // q, k, v, o, gate, up, down

__device__ __forceinline__ void sync_compute() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}
// block_sum (device_util.cuh) over the compute threads: the same summation order.
__device__ __forceinline__ float compute_sum(float v, float* part) {
  return warps_sum(v, part, kWarps, [] { sync_compute(); });
}
__device__ __forceinline__ int load_acquire_shared(const int* p) {
  int v;
  asm volatile("ld.acquire.cta.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(smem_u32(p)) : "memory");
  return v;
}
__device__ __forceinline__ void store_release_shared(int* p, int v) {
  asm volatile("st.release.cta.shared::cta.u32 [%0], %1;" ::"r"(smem_u32(p)), "r"(v) : "memory");
}

struct RingShared {
  uint64_t bars[kRingBars];  // stage s completes phase s / kRingBars of bars[s % kRingBars]
  int consumed;              // stages every compute warp is done with (set at barrier arrivals)
  uint32_t off[kRingBars];   // the stage's first row (physical offset)
  int rows1[kRingBars];      // its rows before the wrap; the rest from offset 0
  uint32_t vend[kRingBars];  // its virtual end
};

// One stage: `rows` rows of `row_bytes` from `src` (nothing when rows is 0).
struct RingStage {
  const bf16* src;
  int rows;
  uint32_t row_bytes;
};

// The producer lane's state.
struct RingProducer {
  int next = 0;          // the first stage not fully issued
  int freed = 0;         // stages every warp is done with
  uint32_t freed_v = 0;  // the virtual end of those
  uint32_t alloc_v = 0;  // stage `next`'s virtual start
  uint32_t done = 0;     // its bytes issued
};

// Issues stages in order while the ring has room (virtual end <= the freed end + ring bytes) and
// fewer than kRingBars stages are outstanding; a stage may be issued in pieces over several calls
// (its barrier's phase ends at the arrival after the last piece).
template <class StageAt>
__device__ void ring_produce(RingProducer& p, RingShared& rs, unsigned char* ring,
                             uint32_t ring_bytes, int total, const StageAt& stage_at) {
  // The block's reads of the freed rows (ordered before this thread by sync_compute and the
  // release / acquire of RingShared::consumed) come before the async proxy's writes over them.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  const uint32_t limit = p.freed_v + ring_bytes;
  while (p.next < total && p.next < p.freed + kRingBars) {
    const RingStage st = stage_at(p.next);
    const int slot = p.next % kRingBars;
    uint64_t* bar = &rs.bars[slot];
    const uint32_t bytes = static_cast<uint32_t>(st.rows) * st.row_bytes;
    const uint32_t phys = p.alloc_v % ring_bytes;
    const int rows1 =
        bytes == 0 ? 0 : min(st.rows, static_cast<int>((ring_bytes - phys) / st.row_bytes));
    const uint32_t first = static_cast<uint32_t>(rows1) * st.row_bytes;
    const uint32_t second_v = rows1 < st.rows ? p.alloc_v + (ring_bytes - phys) : p.alloc_v + first;
    const uint32_t vend = second_v + (bytes - first);
    if (p.done == 0) {
      rs.off[slot] = phys;
      rs.rows1[slot] = rows1;
      rs.vend[slot] = vend;
    }
    // Data bytes [s0, s1) of the stage at virtual v0 on: the part below the limit.
    auto issue = [&](uint32_t s0, uint32_t s1, uint32_t v0) {
      if (p.done < s0 || p.done >= s1) return;
      const uint32_t v = v0 + (p.done - s0);
      if (v >= limit) return;
      const uint32_t n = min(s1 - p.done, limit - v);
      mbar_add_tx(bar, n);
      bulk_copy_g2s(ring + v % ring_bytes, reinterpret_cast<const unsigned char*>(st.src) + p.done,
                    n, bar);
      p.done += n;
    };
    issue(0, first, p.alloc_v);
    issue(first, bytes, second_v);
    if (p.done < bytes) return;
    mbar_arrive(bar);
    p.alloc_v = vend;
    p.done = 0;
    ++p.next;
  }
}

// Row i of stage s in the ring, once its barrier completed.
__device__ __forceinline__ const bf16* ring_row(const RingShared& rs, const unsigned char* ring,
                                                int s, int i, uint32_t row_bytes) {
  const int slot = s % kRingBars, rows1 = rs.rows1[slot];
  return reinterpret_cast<const bf16*>(
      ring + (i < rows1 ? rs.off[slot] + static_cast<uint32_t>(i) * row_bytes
                        : static_cast<uint32_t>(i - rows1) * row_bytes));
}

__device__ __forceinline__ void ring_wait(RingShared& rs, int s) {
  mbar_wait(&rs.bars[s % kRingBars], static_cast<uint32_t>(s / kRingBars) & 1u);
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

struct GridBarrier {
  unsigned* counter;
  uint64_t* trace;      // DecodeStackArgs::trace
  unsigned target = 0;  // thread 0's count of arrivals to wait for
  unsigned index = 0;   // barriers passed
  __device__ __forceinline__ void mark(unsigned k, int which) {
    if (trace) trace[(static_cast<uint64_t>(k) * gridDim.x + blockIdx.x) * 2 + which] = global_ns();
  }
  __device__ __forceinline__ void arrive() {
    sync_compute();
    if (threadIdx.x == 0) {
      mark(index, 0);
      target += gridDim.x;
      __threadfence();
      atomicAdd(counter, 1u);
    }
  }
  __device__ __forceinline__ void wait() {
    if (threadIdx.x == 0) {
      while (load_acquire(counter) < target) {
      }
      mark(index++, 1);
    }
    sync_compute();
  }
};

// A weight chunk, read once (no L1 allocation). Volatile: the compiler keeps the loads of the
// next phase's weights after the current phase's arithmetic, so the two sets of registers are
// not live at once (it would hoist them: they alias nothing).
__device__ __forceinline__ uint4 load_weight(const uint4* p) {
  uint4 u;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
               : "l"(p));
  return u;
}

// Chunks lane + 32 i (i < C) of a bf16 row of kc chunks (zeros past it or for an invalid row).
template <int C>
__device__ __forceinline__ void load_row(uint4 (&u)[C], const bf16* row, int kc, bool valid) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = lane + 32 * i;
    u[i] = valid && c < kc ? load_weight(reinterpret_cast<const uint4*>(row) + c)
                            : make_uint4(0, 0, 0, 0);
  }
}

// The row's dot product with v (shared memory, f32), summed over the warp (every lane gets it).
template <int C>
__device__ __forceinline__ float dot_row(const uint4 (&u)[C], const float* v, int kc) {
  const int lane = threadIdx.x % 32;
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < C; ++i) {
    const int c = lane + 32 * i;
    if (c < kc) {
      float w[8];
      unpack16(u[i], w, bf16{});
      const float4 a = reinterpret_cast<const float4*>(v)[2 * c];
      const float4 b = reinterpret_cast<const float4*>(v)[2 * c + 1];
      acc = fmaf(w[0], a.x, acc);
      acc = fmaf(w[1], a.y, acc);
      acc = fmaf(w[2], a.z, acc);
      acc = fmaf(w[3], a.w, acc);
      acc = fmaf(w[4], b.x, acc);
      acc = fmaf(w[5], b.y, acc);
      acc = fmaf(w[6], b.z, acc);
      acc = fmaf(w[7], b.w, acc);
    }
  }
  return warp_sum(acc);
}

// Requests bytes [p, p + n) of weights into L2 (one prefetch.global.L2 per 128-byte line, spread
// over the warp's lanes; p 128-byte aligned). Nothing waits for it: the register loads that read
// the rows later find them there.
__device__ __forceinline__ void prefetch_l2_warp(const void* p, int64_t n) {
  const char* c = static_cast<const char*>(p);
  for (int64_t o = static_cast<int64_t>(threadIdx.x % 32) * 128; o < n; o += 32 * 128)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(c + o));
}

// n floats (n % 4 == 0) written by other blocks into shared memory s; the caller synchronizes.
__device__ __forceinline__ void load_vector(const float* g, int n, float* s) {
  for (int i = threadIdx.x; i < n / 4; i += kThreads)
    reinterpret_cast<float4*>(s)[i] = __ldcg(reinterpret_cast<const float4*>(g) + i);
}

// s = rmsnorm(x) * w (x [d] in global memory, d % 4 == 0), rmsnorm's formulas; synchronizes.
__device__ __forceinline__ void load_normed(const float* x, const bf16* w, int d, float eps,
                                            float* s, float* part) {
  float sq = 0.0f;
  for (int i = threadIdx.x; i < d / 4; i += kThreads) {
    const float4 v = __ldcg(reinterpret_cast<const float4*>(x) + i);
    reinterpret_cast<float4*>(s)[i] = v;
    sq += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  const float inv = 1.0f / sqrtf(compute_sum(sq, part) / static_cast<float>(d) + eps);
  for (int i = threadIdx.x; i < d; i += kThreads) s[i] = __bfloat162float(w[i]) * (s[i] * inv);
  sync_compute();
}

// A head's elements per lane: lane holds [lane * E, lane * E + E) (lanes >= D hold none at
// D = 16), E bf16 values loaded as one word.
template <int D>
struct HeadLanes {
  static constexpr int E = D >= 32 ? D / 32 : 1;
  using Raw = std::conditional_t<E == 4, uint2, std::conditional_t<E == 2, unsigned, unsigned short>>;
  static __device__ __forceinline__ bool active(int lane) { return D >= 32 || lane < D; }
  static __device__ __forceinline__ Raw load(const bf16* p) {
    return __ldg(reinterpret_cast<const Raw*>(p));
  }
  static __device__ __forceinline__ void unpack(Raw r, float (&f)[E]) {
    if constexpr (E == 4) {
      f[0] = __uint_as_float(r.x << 16);
      f[1] = __uint_as_float(r.x & 0xffff0000u);
      f[2] = __uint_as_float(r.y << 16);
      f[3] = __uint_as_float(r.y & 0xffff0000u);
    } else if constexpr (E == 2) {
      f[0] = __uint_as_float(r << 16);
      f[1] = __uint_as_float(r & 0xffff0000u);
    } else {
      f[0] = __uint_as_float(static_cast<unsigned>(r) << 16);
    }
  }
};

// The lane's norm weights (bf16 w) of its elements, zeros on inactive lanes.
template <int D>
__device__ __forceinline__ void load_norm_lane(const bf16* w, float (&out)[HeadLanes<D>::E]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int c = 0; c < HeadLanes<D>::E; ++c)
    out[c] = HeadLanes<D>::active(lane) ? __bfloat162float(w[lane * HeadLanes<D>::E + c]) : 0.0f;
}

// RMSNorm of one head (the lane's E values v, zeros on inactive lanes) with the lane's norm
// weights w, then rotate-half RoPE with the lane's table values (cs, sn: the position's cos and
// sin at element e % (D / 2)); as qk_norm_rope_kv_kernel (fused.cu).
template <int D>
__device__ __forceinline__ void norm_rope(float (&v)[HeadLanes<D>::E],
                                          const float (&w)[HeadLanes<D>::E],
                                          const float (&cs)[HeadLanes<D>::E],
                                          const float (&sn)[HeadLanes<D>::E], float eps) {
  constexpr int E = HeadLanes<D>::E, kHalf = D / 2, kPartner = kHalf / E;
  const int lane = threadIdx.x % 32;
  const bool on = HeadLanes<D>::active(lane);
  float ss = 0.0f;
#pragma unroll
  for (int c = 0; c < E; ++c) ss += v[c] * v[c];
  ss = warp_sum(ss);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
#pragma unroll
  for (int c = 0; c < E; ++c) {
    const int e = lane * E + c;
    const float n = w[c] * (v[c] * inv);
    const float p = __shfl_xor_sync(0xffffffffu, n, kPartner);  // element e +- D / 2
    if (on) v[c] = e < kHalf ? n * cs[c] - p * sn[c] : n * cs[c] + p * sn[c];
  }
}

// Threads of a block: the compute threads, and with the ring its producer warp.
template <bool S>
constexpr int kBlockThreads = S ? kThreads + 32 : kThreads;

// D: head_dim; G: the largest GQA group it handles (2 or 4: fewer registers and less shared
// memory for 2); S: every weight row streams through the shared-memory ring (see kRingBars;
// DecodeStackArgs::ring_bytes) instead of into registers one barrier ahead of its phase.
template <int D, int G, bool S>
__global__ void __launch_bounds__(kBlockThreads<S>, 1)
    decode_stack_kernel(const DecodeStackArgs a) {
  using HL = HeadLanes<D>;
  constexpr int E = HL::E;
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  __shared__ RingShared ring_meta;  // S
  __shared__ float part[kWarps];
  __shared__ int last_split;
  const int d = static_cast<int>(a.d), f = static_cast<int>(a.f), hq = static_cast<int>(a.hq),
            hkv = static_cast<int>(a.hkv), group = hq / hkv, splits = static_cast<int>(a.splits);
  const int qw = hq * D, kvw = hkv * D, rows_qkv = qw + 2 * kvw;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gw = blockIdx.x * kWarps + warp, nw = gridDim.x * kWarps;
  const float eps = static_cast<float>(a.eps), scale = static_cast<float>(a.scale);
  // Shared memory: S: the weight ring first. Then the phase's vector (xn, attn or h), or in B
  // the warps' softmax states; then the group's rotated queries and the new key and value.
  const int states = kWarps * G * (D + 2);
  const int vec_floats = max(max(max(d, qw), f), states);
  const int nb = static_cast<int>(gridDim.x), b = static_cast<int>(blockIdx.x);
  const uint32_t ring_bytes = S ? static_cast<uint32_t>(a.ring_bytes) : 0u;
  unsigned char* ring = smem_bytes;
  float* smem = reinterpret_cast<float*>(smem_bytes + ring_bytes);
  float* svec = smem;
  float* sq = smem + vec_floats;  // [G][D]
  float* snk = sq + G * D;
  float* snv = snk + D;
  // S: this block's rows [lo, hi) of a matrix of n rows (balanced over the grid), and of the
  // q/k/v rows as one matrix (the stages cut it at q | k | v).
  auto own = [&](int n) {
    return make_int2(static_cast<int>(static_cast<int64_t>(b) * n / nb),
                     static_cast<int>(static_cast<int64_t>(b + 1) * n / nb));
  };
  const int2 own_qkv = own(rows_qkv), own_d = own(d), own_f = own(f);
  // Part k (0 q, 1 k, 2 v) of the q/k/v rows: the block's rows of it [x, y) in the q/k/v
  // numbering, and z the part's first row there.
  auto qkv_cut = [&](int k) {
    const int from = k == 0 ? 0 : k == 1 ? qw : qw + kvw;
    const int to = k == 0 ? qw : k == 1 ? qw + kvw : rows_qkv;
    const int lo = max(own_qkv.x, from), hi = min(own_qkv.y, to);
    return make_int3(lo, max(lo, hi), from);
  };
  // S: row i of stage s (rows of `width` elements) dotted with svec, summed over the warp.
  auto ring_dot = [&](int s, int i, int width) {
    return warp_dot_smem(ring_row(ring_meta, ring, s, i, static_cast<uint32_t>(width) * 2), svec,
                         width / 8);
  };

  // The step's row: its position, cache slot and the keys it attends to.
  const int pos = a.positions[0], slot = a.slots[0];
  const int len = min(pos + 1, a.seq_lens[0]);
  const int bs = static_cast<int>(a.block_size);
  // This block's attention work item: kv head g, split sp of the keys [lo, hi).
  const bool has_item = static_cast<int>(blockIdx.x) < hkv * splits;
  const int g = blockIdx.x % hkv, sp = blockIdx.x / hkv;
  const int per = (len + splits - 1) / splits;
  const int lo = has_item ? min(len, sp * per) : 0, hi = has_item ? min(len, lo + per) : 0;
  auto key_at = [&](int t) -> int64_t {  // element offset of key t of head g in the pools
    const int blk = t / bs;
    const int64_t block = a.block_table[blk];
    return ((g * a.num_blocks + block) * a.block_size + (t - blk * bs)) * D;
  };
  const bool lane_on = HL::active(lane);
  // The lane's RoPE values at the step's position (the same in every layer).
  float rope_cos[E], rope_sin[E];
#pragma unroll
  for (int c = 0; c < E; ++c) {
    const int64_t j = static_cast<int64_t>(pos) * (D / 2) + (lane * E + c) % (D / 2);
    rope_cos[c] = lane_on ? a.cos[j] : 0.0f;
    rope_sin[c] = lane_on ? a.sin[j] : 0.0f;
  }
  // The pool offsets of the keys this warp preloads (the same in every layer: one block table).
  int64_t pre_at[kKeyPre];
#pragma unroll
  for (int j = 0; j < kKeyPre; ++j) {
    const int t = lo + warp + kWarps * j;
    pre_at[j] = t < hi && t != pos ? key_at(t) + lane * E : -1;
  }

  auto qkv_row = [&](const DecodeStackLayer& L, int r) {
    return r < qw         ? static_cast<const bf16*>(L.wq) + static_cast<int64_t>(r) * d
           : r < qw + kvw ? static_cast<const bf16*>(L.wk) + static_cast<int64_t>(r - qw) * d
                          : static_cast<const bf16*>(L.wv) + static_cast<int64_t>(r - qw - kvw) * d;
  };
  GridBarrier barrier{a.sync, a.trace};
  const unsigned ends = 5 * static_cast<unsigned>(a.num_layers) - 1;  // the start / end slot
  if (tid == 0) barrier.mark(ends, 0);
  uint4 wqkv[kQkvRows][kChunksD];
  typename HL::Raw kpre[kKeyPre] = {}, vpre[kKeyPre] = {};
  // The layer's q/k/v rows of this warp (registers path) and the first keys it will read, into
  // registers.
  auto load_layer_start = [&](const DecodeStackLayer& L) {
    if constexpr (!S) {
#pragma unroll
      for (int i = 0; i < kQkvRows; ++i) {
        const int r = gw + i * nw;
        load_row(wqkv[i], qkv_row(L, r), d / 8, r < rows_qkv);
      }
    }
#pragma unroll
    for (int j = 0; j < kKeyPre; ++j)
      if (pre_at[j] >= 0 && lane_on) {
        kpre[j] = HL::load(static_cast<const bf16*>(L.keys) + pre_at[j]);
        vpre[j] = HL::load(static_cast<const bf16*>(L.values) + pre_at[j]);
      }
  };
  // The layer table in shared memory: the phases read their pointers there, not from global
  // memory between a barrier's arrival and its wait.
  DecodeStackLayer* layers = reinterpret_cast<DecodeStackLayer*>(snv + D);
  {
    const auto* src = reinterpret_cast<const uint64_t*>(a.layers);
    auto* dst = reinterpret_cast<uint64_t*>(layers);
    const int words = static_cast<int>(a.num_layers) * static_cast<int>(sizeof(DecodeStackLayer) / 8);
    for (int i = tid; i < words; i += static_cast<int>(blockDim.x)) dst[i] = src[i];
    if (S && tid == 0) {
      ring_meta.consumed = 0;
      for (uint64_t& bar : ring_meta.bars) mbar_init(&bar, 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
  }
  // S: stage s's rows (s = layer * kStagesPerLayer + k).
  auto stage_at = [&](int s) -> RingStage {
    const DecodeStackLayer& L = layers[s / kStagesPerLayer];
    const int k = s % kStagesPerLayer;
    const auto rd = static_cast<uint32_t>(d) * 2;
    if (k < 3) {
      const int3 c = qkv_cut(k);
      const void* m = k == 0 ? L.wq : k == 1 ? L.wk : L.wv;
      return {static_cast<const bf16*>(m) + static_cast<int64_t>(c.x - c.z) * d, c.y - c.x, rd};
    }
    if (k == 3)
      return {static_cast<const bf16*>(L.wo) + static_cast<int64_t>(own_d.x) * qw,
              own_d.y - own_d.x, static_cast<uint32_t>(qw) * 2};
    if (k < 6)
      return {static_cast<const bf16*>(k == 4 ? L.wg : L.wu) + static_cast<int64_t>(own_f.x) * d,
              own_f.y - own_f.x, rd};
    return {static_cast<const bf16*>(L.wd) + static_cast<int64_t>(own_d.x) * f, own_d.y - own_d.x,
            static_cast<uint32_t>(f) * 2};
  };
  const int total_stages = kStagesPerLayer * static_cast<int>(a.num_layers);
  if constexpr (S) {
    if (warp == kWarps) {
      // The producer warp (one lane): issue what fits, then whenever the compute warps free
      // stages, free them in the ring and issue more, until every stage is issued. Its copies
      // may stall it (the copy engine's queue), never the compute warps.
      if (lane == 0) {
        RingProducer p;
        ring_produce(p, ring_meta, ring, ring_bytes, total_stages, stage_at);
        while (p.next < total_stages) {
          const int c = load_acquire_shared(&ring_meta.consumed);
          if (c == p.freed) continue;
          p.freed = c;
          p.freed_v = ring_meta.vend[(c - 1) % kRingBars];
          ring_produce(p, ring_meta, ring, ring_bytes, total_stages, stage_at);
        }
      }
      return;  // the compute threads synchronize by sync_compute, which counts only them
    }
  }
  // S, at a barrier's arrival (the compute threads are past every read of the stages before
  // `consumed`): tell the producer.
  auto ring_advance = [&](int consumed) {
    if constexpr (S) {
      if (tid == 32) store_release_shared(&ring_meta.consumed, consumed);
    }
  };
  load_layer_start(layers[0]);

  for (int l = 0; l < static_cast<int>(a.num_layers); ++l) {
    // Pointers read where used (L1 hits), not held in registers across the layer.
    const DecodeStackLayer& L = layers[l];
    if (!S && a.l2_prefetch) {
      // This warp's rows of the layer's o, gate/up and down weights, in the order the phases
      // read them, then its q/k/v rows of the next layer: HBM streams them while the layer's
      // chain of norms, attention and barriers runs (it would otherwise idle there).
      if (gw < d) prefetch_l2_warp(static_cast<const bf16*>(L.wo) + static_cast<int64_t>(gw) * qw, qw * 2);
#pragma unroll
      for (int i = 0; i < kGluRows; ++i) {
        const int j = gw + i * nw;
        if (j < f) {
          prefetch_l2_warp(static_cast<const bf16*>(L.wg) + static_cast<int64_t>(j) * d, d * 2);
          prefetch_l2_warp(static_cast<const bf16*>(L.wu) + static_cast<int64_t>(j) * d, d * 2);
        }
      }
      if (gw < d) prefetch_l2_warp(static_cast<const bf16*>(L.wd) + static_cast<int64_t>(gw) * f, f * 2);
      if (l + 1 < static_cast<int>(a.num_layers))
#pragma unroll
        for (int i = 0; i < kQkvRows; ++i) {
          const int r = gw + i * nw;
          if (r < rows_qkv) prefetch_l2_warp(qkv_row(layers[l + 1], r), d * 2);
        }
    }
    // --- A: norm + q/k/v -------------------------------------------------------------------
    load_normed(a.x, static_cast<const bf16*>(L.attn_norm), d, eps, svec, part);
    const int stage0 = l * kStagesPerLayer;
    if constexpr (S) {
      for (int k = 0; k < 3; ++k) {
        const int3 c = qkv_cut(k);
        if (c.y > c.x) ring_wait(ring_meta, stage0 + k);
        for (int r = c.x + warp; r < c.y; r += kWarps) {
          const float v = ring_dot(stage0 + k, r - c.x, d);
          if (lane == 0) a.qkv[r] = v;
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < kQkvRows; ++i) {
        const int r = gw + i * nw;
        if (r < rows_qkv) {
          const float v = dot_row(wqkv[i], svec, d / 8);
          if (lane == 0) a.qkv[r] = v;
        }
      }
    }
    // The q/k norm weights of the heads this warp normalizes in B, while the barrier completes.
    barrier.arrive();
    ring_advance(stage0 + 3);
    float qk_w[E];
    load_norm_lane<D>(static_cast<const bf16*>(warp < group ? L.q_norm : L.k_norm), qk_w);
    barrier.wait();

    // --- B: attention ----------------------------------------------------------------------
    if (has_item) {
      if (warp < group) {  // q head g * group + warp: norm, rotate, scale
        const int h = g * group + warp;
        float v[E];
#pragma unroll
        for (int c = 0; c < E; ++c) v[c] = lane_on ? __ldcg(a.qkv + h * D + lane * E + c) : 0.0f;
        norm_rope<D>(v, qk_w, rope_cos, rope_sin, eps);
        if (lane_on)
#pragma unroll
          for (int c = 0; c < E; ++c) sq[warp * D + lane * E + c] = v[c] * scale;
      }
      if (pos >= lo && pos < hi && (warp == group || warp == group + 1)) {
        // The new key (normed, rotated) and value: to the cache, and as the cache holds them
        // (bf16) to shared memory for this block's own reads.
        const bool is_key = warp == group;
        const int src = (is_key ? qw : qw + kvw) + g * D;
        float v[E];
#pragma unroll
        for (int c = 0; c < E; ++c) v[c] = lane_on ? __ldcg(a.qkv + src + lane * E + c) : 0.0f;
        if (is_key) norm_rope<D>(v, qk_w, rope_cos, rope_sin, eps);
        const int64_t at = ((g * a.num_blocks + slot / bs) * a.block_size + slot % bs) * D;
        bf16* pool = static_cast<bf16*>(is_key ? L.keys : L.values);
        float* sn = is_key ? snk : snv;
        if (lane_on)
#pragma unroll
          for (int c = 0; c < E; ++c) {
            const bf16 b = __float2bfloat16_rn(v[c]);
            pool[at + lane * E + c] = b;
            sn[lane * E + c] = __bfloat162float(b);
          }
      }
      sync_compute();
      float qv[G][E], m[G], lsum[G], acc[G][E];
#pragma unroll
      for (int i = 0; i < G; ++i) {
#pragma unroll
        for (int c = 0; c < E; ++c) {
          qv[i][c] = i < group && lane_on ? sq[i * D + lane * E + c] : 0.0f;
          acc[i][c] = 0.0f;
        }
        m[i] = -INFINITY;
        lsum[i] = 0.0f;
      }
      auto consume = [&](const float (&kf)[E], const float (&vf)[E]) {
#pragma unroll
        for (int i = 0; i < G; ++i) {
          if (i < group) {
            float s = 0.0f;
#pragma unroll
            for (int c = 0; c < E; ++c) s = fmaf(qv[i][c], kf[c], s);
            s = warp_sum(s);
            const float mn = fmaxf(m[i], s);
            const float corr = expf(m[i] - mn), p = expf(s - mn);
            lsum[i] = lsum[i] * corr + p;
#pragma unroll
            for (int c = 0; c < E; ++c) acc[i][c] = fmaf(acc[i][c], corr, p * vf[c]);
            m[i] = mn;
          }
        }
      };
      auto take = [&](int t, typename HL::Raw kr, typename HL::Raw vr) {
        float kf[E], vf[E];
        if (t == pos) {
#pragma unroll
          for (int c = 0; c < E; ++c) {
            kf[c] = lane_on ? snk[lane * E + c] : 0.0f;
            vf[c] = lane_on ? snv[lane * E + c] : 0.0f;
          }
        } else if (lane_on) {
          HL::unpack(kr, kf);
          HL::unpack(vr, vf);
        } else {
#pragma unroll
          for (int c = 0; c < E; ++c) kf[c] = vf[c] = 0.0f;
        }
        consume(kf, vf);
      };
#pragma unroll
      for (int j = 0; j < kKeyPre; ++j) {
        const int t = lo + warp + kWarps * j;
        if (t < hi) take(t, kpre[j], vpre[j]);
      }
      // Longer spans: the rest a batch of keys at a time.
      for (int t0 = lo + warp + kWarps * kKeyPre; t0 < hi; t0 += kWarps * kKeyBatch) {
        typename HL::Raw kraw[kKeyBatch] = {}, vraw[kKeyBatch] = {};
#pragma unroll
        for (int j = 0; j < kKeyBatch; ++j) {
          const int t = t0 + kWarps * j;
          if (t < hi && t != pos && lane_on) {
            const int64_t at = key_at(t) + lane * E;
            kraw[j] = HL::load(static_cast<const bf16*>(L.keys) + at);
            vraw[j] = HL::load(static_cast<const bf16*>(L.values) + at);
          }
        }
#pragma unroll
        for (int j = 0; j < kKeyBatch; ++j) {
          const int t = t0 + kWarps * j;
          if (t < hi) take(t, kraw[j], vraw[j]);
        }
      }
      // The warps' states into shared memory (svec is free in B), merged per (head, element).
      float* st = svec;  // [kWarps][G][2 + D]
#pragma unroll
      for (int i = 0; i < G; ++i) {
        if (i < group) {
          float* s = st + (warp * G + i) * (D + 2);
          if (lane == 0) {
            s[0] = m[i];
            s[1] = lsum[i];
          }
          if (lane_on)
#pragma unroll
            for (int c = 0; c < E; ++c) s[2 + lane * E + c] = acc[i][c];
        }
      }
      sync_compute();
      if (tid < group * D) {
        const int i = tid / D, e = tid % D, h = g * group + i;
        float mx = -INFINITY;
        for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, st[(w * G + i) * (D + 2)]);
        float ls = 0.0f, o = 0.0f;
        if (mx != -INFINITY)
          for (int w = 0; w < kWarps; ++w) {
            const float* s = st + (w * G + i) * (D + 2);
            const float fw = s[0] == -INFINITY ? 0.0f : expf(s[0] - mx);
            ls += fw * s[1];
            o += fw * s[2 + e];
          }
        const int64_t vec = static_cast<int64_t>(sp) * hq + h;
        if (e == 0) {
          a.partial_ml[2 * vec] = mx;
          a.partial_ml[2 * vec + 1] = ls;
        }
        a.partial_out[vec * D + e] = o;
      }
      // The split that finishes last merges all of them (merge_splits_if_last's scheme, with one
      // fence a block as the grid barrier has: the block's writes are ordered before thread 0's
      // by sync_compute).
      sync_compute();
      if (tid == 0) {
        __threadfence();
        last_split = atomicAdd(&a.sync[2 + g], 1u) == static_cast<unsigned>(splits - 1);
        if (last_split) {
          a.sync[2 + g] = 0;
          __threadfence();
        }
      }
      sync_compute();
      if (last_split) {
        // Every split's (max, sum) in one round of loads, a warp per head for the weights
        // e^(m_s - M) and the denominator, then each output over the splits with its loads
        // issued together (a rolled loop would wait for one L2 round trip per split).
        const int pairs = splits * group;
        float* sm = st;                  // [group][splits] maxima, then weights
        float* sl = st + pairs;          // [group][splits] sums
        float* den = st + 2 * pairs;     // [group]
        for (int i = tid; i < pairs; i += kThreads) {
          const int s = i / group, hi2 = i % group;
          const float2 ml = __ldcg(reinterpret_cast<const float2*>(a.partial_ml) +
                                   static_cast<int64_t>(s) * hq + g * group + hi2);
          sm[hi2 * splits + s] = ml.x;
          sl[hi2 * splits + s] = ml.y;
        }
        sync_compute();
        if (warp < group) {
          float mx = -INFINITY;
          for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, sm[warp * splits + s]);
          mx = warp_max(mx);
          float ls = 0.0f;
          for (int s = lane; s < splits; s += 32) {
            const float ms = sm[warp * splits + s];
            const float fs = ms == -INFINITY ? 0.0f : expf(ms - mx);
            sm[warp * splits + s] = fs;
            ls += fs * sl[warp * splits + s];
          }
          ls = warp_sum(ls);
          if (lane == 0) den[warp] = ls;
        }
        sync_compute();
        if (tid < group * D) {
          const int i = tid / D, e = tid % D, h = g * group + i;
          float o = 0.0f;
#pragma unroll 16
          for (int s = 0; s < splits; ++s)
            o = fmaf(sm[i * splits + s], __ldcg(a.partial_out + (static_cast<int64_t>(s) * hq + h) * D + e), o);
          a.attn[h * D + e] = den[i] > 0.0f ? o / den[i] : 0.0f;
        }
      }
    }
    // The o projection's rows: after the attention, whose registers they would crowd (S: in
    // shared memory since the layer's start).
    barrier.arrive();
    uint4 wo[kChunksA];
    if constexpr (!S)
      load_row(wo, static_cast<const bf16*>(L.wo) + static_cast<int64_t>(gw) * qw, qw / 8, gw < d);
    barrier.wait();

    // --- C: o projection + residual --------------------------------------------------------
    // (The residual's old value is requested with the vector, not after the dot product.) S:
    // warp w takes the block's rows w, w + 16, ... of its own.
    const int r_c = S ? own_d.x + warp : gw, r_end = S ? own_d.y : d;
    float x_old = lane == 0 && r_c < r_end ? __ldcg(a.x + r_c) : 0.0f;
    load_vector(a.attn, qw, svec);
    sync_compute();
    if constexpr (S) {
      if (own_d.y > own_d.x) ring_wait(ring_meta, stage0 + 3);
      for (int r = r_c; r < r_end; r += kWarps) {
        const float o = ring_dot(stage0 + 3, r - own_d.x, qw);
        if (lane == 0) a.x[r] = (r == r_c ? x_old : __ldcg(a.x + r)) + o;
      }
    } else if (gw < d) {
      const float o = dot_row(wo, svec, qw / 8);
      if (lane == 0) a.x[gw] = x_old + o;
    }
    barrier.arrive();
    ring_advance(stage0 + 4);
    uint4 wg[kGluRows][kChunksD], wu[kGluRows][kChunksD];
    if constexpr (!S) {
#pragma unroll
      for (int i = 0; i < kGluRows; ++i) {
        const int j = gw + i * nw;
        load_row(wg[i], static_cast<const bf16*>(L.wg) + static_cast<int64_t>(j) * d, d / 8, j < f);
        load_row(wu[i], static_cast<const bf16*>(L.wu) + static_cast<int64_t>(j) * d, d / 8, j < f);
      }
    }
    barrier.wait();

    // --- D: norm + gate/up + SwiGLU --------------------------------------------------------
    load_normed(a.x, static_cast<const bf16*>(L.mlp_norm), d, eps, svec, part);
    if constexpr (S) {
      if (own_f.y > own_f.x) {
        ring_wait(ring_meta, stage0 + 4);
        ring_wait(ring_meta, stage0 + 5);
      }
      for (int j = own_f.x + warp; j < own_f.y; j += kWarps) {
        const float gv = ring_dot(stage0 + 4, j - own_f.x, d);
        const float uv = ring_dot(stage0 + 5, j - own_f.x, d);
        if (lane == 0) a.h[j] = gv / (1.0f + expf(-gv)) * uv;  // as swiglu_kernel
      }
    } else {
#pragma unroll
      for (int i = 0; i < kGluRows; ++i) {
        const int j = gw + i * nw;
        if (j < f) {
          const float gv = dot_row(wg[i], svec, d / 8), uv = dot_row(wu[i], svec, d / 8);
          if (lane == 0) a.h[j] = gv / (1.0f + expf(-gv)) * uv;  // as swiglu_kernel
        }
      }
    }
    barrier.arrive();
    ring_advance(stage0 + 6);
    uint4 wd[kChunksF];
    if constexpr (!S)
      load_row(wd, static_cast<const bf16*>(L.wd) + static_cast<int64_t>(gw) * f, f / 8, gw < d);
    barrier.wait();

    // --- E: down projection + residual -----------------------------------------------------
    x_old = lane == 0 && r_c < r_end ? __ldcg(a.x + r_c) : 0.0f;
    load_vector(a.h, f, svec);
    sync_compute();
    if constexpr (S) {
      if (own_d.y > own_d.x) ring_wait(ring_meta, stage0 + 6);
      for (int r = r_c; r < r_end; r += kWarps) {
        const float o = ring_dot(stage0 + 6, r - own_d.x, f);
        if (lane == 0) a.x[r] = (r == r_c ? x_old : __ldcg(a.x + r)) + o;
      }
    } else if (gw < d) {
      const float o = dot_row(wd, svec, f / 8);
      if (lane == 0) a.x[gw] = x_old + o;
    }
    if (l + 1 < static_cast<int>(a.num_layers)) {
      barrier.arrive();
      ring_advance(stage0 + kStagesPerLayer);
      load_layer_start(layers[l + 1]);
      barrier.wait();
    }
  }

  // Every block has passed every barrier once it arrives here: the last one resets the counters
  // for the next launch (graph replays reuse them).
  sync_compute();
  if (tid == 0) {
    barrier.mark(ends, 1);
    __threadfence();
    if (atomicAdd(&a.sync[1], 1u) == gridDim.x - 1) {
      a.sync[0] = 0;
      a.sync[1] = 0;
    }
  }
}

// Raises (never lowers: a smaller shape must not break a larger one's launches) the kernel's
// dynamic shared memory limit to `bytes`.
template <int D, int G, bool S>
void allow_smem(int bytes) {
  static int allowed = 0;
  if (bytes <= allowed) return;
  const cudaError_t err = cudaFuncSetAttribute(
      decode_stack_kernel<D, G, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(err));
  allowed = bytes;
}

template <int D, int G, bool S>
int64_t max_blocks_for(int64_t smem) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
    return 0;
  allow_smem<D, G, S>(static_cast<int>(smem));
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, decode_stack_kernel<D, G, S>,
                                                    kBlockThreads<S>, static_cast<size_t>(smem)) !=
      cudaSuccess)
    return 0;
  return static_cast<int64_t>(per_sm) * sms;
}

template <int D, int G>
void launch_typed(const DecodeStackArgs& a, cudaStream_t s) {
  const auto bytes = static_cast<size_t>(decode_stack_smem_bytes(a));
  const auto grid = static_cast<unsigned>(a.blocks);
  if (a.ring_bytes)
    decode_stack_kernel<D, G, true><<<grid, kBlockThreads<true>, bytes, s>>>(a);
  else
    decode_stack_kernel<D, G, false><<<grid, kBlockThreads<false>, bytes, s>>>(a);
}

template <int D, int G>
int64_t max_blocks_either(bool ring, int64_t smem) {
  return ring ? max_blocks_for<D, G, true>(smem) : max_blocks_for<D, G, false>(smem);
}

// The instantiation's G for a's shapes (launch_decode_stack's choice).
int64_t kernel_group(const DecodeStackArgs& a) {
  return a.head_dim == 128 && a.hq / a.hkv <= 2 ? 2 : 4;
}

}  // namespace

DecodeStackLimits decode_stack_limits() {
  return {kThreads, 32 * 8 * kChunksD, 32 * 8 * kChunksA, 32 * 8 * kChunksF, kMaxGroup};
}

int64_t decode_stack_ring_min_bytes(const DecodeStackArgs& a) {
  // The producer issues only at barrier arrivals, so a phase's stages (q/k/v; o; gate/up; down)
  // must all be in the ring at once when the phase starts (else its waits would wait for an
  // issue that comes after the phase). Their span is their bytes plus at most one skipped tail
  // (less than a row): the ring wraps at most once within its own size.
  const int64_t qw = a.hq * a.head_dim, rows_qkv = qw + 2 * a.hkv * a.head_dim;
  auto most = [&](int64_t n) { return (n + a.blocks - 1) / a.blocks; };  // rows of a block, at most
  const int64_t phase = std::max(std::max(most(rows_qkv) * a.d, most(a.d) * qw),
                                 std::max(2 * most(a.f) * a.d, most(a.d) * a.f)) * 2;
  return phase + std::max(std::max(a.d, qw), a.f) * 2;
}

int64_t decode_stack_smem_bytes(const DecodeStackArgs& a) {
  // The ring (S) ahead of the rest (see the kernel).
  const int64_t g = kernel_group(a);
  const int64_t states = int64_t{kWarps} * g * (a.head_dim + 2);
  const int64_t vec = std::max(std::max(std::max(a.d, a.hq * a.head_dim), a.f), states);
  // ... then sq, snk, snv, then the layer table (8-byte aligned: head_dim is even).
  return a.ring_bytes + (vec + (g + 2) * a.head_dim) * 4 +
         a.num_layers * static_cast<int64_t>(sizeof(DecodeStackLayer));
}

int64_t decode_stack_max_blocks(const DecodeStackArgs& a, int64_t smem) {
  const bool g2 = kernel_group(a) == 2, w = a.ring_bytes != 0;
  switch (a.head_dim) {
    case 16:
      return max_blocks_either<16, 4>(w, smem);
    case 32:
      return max_blocks_either<32, 4>(w, smem);
    case 64:
      return max_blocks_either<64, 4>(w, smem);
    case 128:
      return g2 ? max_blocks_either<128, 2>(w, smem) : max_blocks_either<128, 4>(w, smem);
    default:
      return 0;
  }
}

void launch_decode_stack(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const DecodeStackArgs*>(p);
  switch (a.head_dim) {
    case 16:
      return launch_typed<16, 4>(a, s);
    case 32:
      return launch_typed<32, 4>(a, s);
    case 64:
      return launch_typed<64, 4>(a, s);
    case 128:
      return kernel_group(a) == 2 ? launch_typed<128, 2>(a, s) : launch_typed<128, 4>(a, s);
    default:
      throw std::runtime_error("decode_stack: unsupported head_dim");
  }
}

}  // namespace infera::cuda
