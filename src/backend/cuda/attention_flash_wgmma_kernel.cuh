// The wgmma prefill attention kernel (see attention_flash_wgmma.cu, which launches it for paged
// attention, and attention_packed_wgmma.cu, the encoders' packed attention).
#pragma once

#include "backend/cuda/attention_flash_wgmma.h"
#include "backend/cuda/attention_flash_wgmma_tile.cuh"

namespace infera::cuda::flash_wgmma {

// A block of 2 warpgroups. kSplit false: 128 query vectors, warpgroup w owns vectors 64w..+63 and
// walks every key tile. kSplit true (64-vector tiles: short prompts, and long ones whose longest
// tile's walk is the kernel's critical path): both warpgroups own the same 64 vectors, warpgroup
// w takes keys 32w..+31 of every 64-key tile (half the serial walk, as the key-halves kernel),
// and the two merge through shared memory at the end.
// kPipe (kSplit only; CudaOptions::flash_wgmma_pipeline): the loop of attention_pipelined_loop
// (below) instead of S, softmax, P V in turn. kQPrefetch: load_queries / store_queries_swizzled.
// kPacked: the encoders' packed attention (no block table: keys are the sequence's own rows of
// [T, hkv, D], a row's position its offset in the sequence); kRope (packed, not pipelined): q16
// and the keys as the q/k/v GEMM wrote them, rotated here (RopeQueries, RopeKeys) with the tables
// rope_cos / rope_sin.
template <typename T, int D, bool kSplit, bool kPipe, bool kQPrefetch, bool kPacked = false,
          bool kRope = false>
__global__ void __launch_bounds__(256, 2)
    attention_flash_wgmma_kernel(const AttentionArgs a, const float* __restrict__ rope_cos,
                                 const float* __restrict__ rope_sin) {
  static_assert(kSplit || !kPipe, "pipelined: the 64-vector split tiles only (registers)");
  static_assert(kPacked || !kRope, "RoPE inside: packed attention only");
  static_assert(!(kRope && kPipe), "RoPE inside: the plain loop only");
  constexpr int kThreads = 256, kWgs = kSplit ? 1 : 2, kVec = kWgs * kWgVectors;
  constexpr int kSpan = kSplit ? kKeys / 2 : kKeys;  // keys of a tile a warpgroup multiplies
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The swizzle is of absolute shared addresses: the tiles start on a 1024-byte boundary.
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  unsigned char* const base = smem_raw + ((1024 - (raw_addr & 1023)) & 1023);
  unsigned char* const qs = base;                        // [kWgs] Q
  unsigned char* const kbuf = qs + kWgs * kQBytes<D>;    // [2 stages] K
  unsigned char* const vbuf = kbuf + 2 * kTileBytes<D>;  // [2 stages] V
  __shared__ int range[kVec * 2 + 2];

  const int g = blockIdx.x, b = blockIdx.y;
  const int tile = static_cast<int>(gridDim.z - 1 - blockIdx.z);  // longest first
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int group = static_cast<int>(a.hq / a.hkv);
  const int v0 = tile * kVec, nv = min(kVec, rows * group - v0);
  if (nv <= 0) return;
  const int len = kPacked ? rows : a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wg = warp / 4, wq = warp % 4;  // warpgroup; the warp's 16 rows in its 64
  const int gid = lane / 4, tig = lane % 4;
  const int qwg = kSplit ? 0 : wg;                                        // the warpgroup's queries
  const int koff = kSplit ? wg * kSpan : 0;                               // its first key of a tile
  const float scale = static_cast<float>(a.scale) * 1.4426950408889634f;  // base 2
  using Copy = TileCopy<T, D, kThreads, kPacked>;
  Copy copy;
  int voff[Copy::kPer];  // kPipe: the offsets of the next V tile's keys (its K's, a tile ago)
  int key_lo = 0, key_hi = 0;
  const auto issue_first_tile = [&] {
    if (key_lo < key_hi) {
      copy.fetch_ids(a, key_lo, key_hi);
      if constexpr (kPipe) {  // K of the first tile alone (its V goes with the next tile's K)
        copy.offsets(key_lo, key_hi, voff);
        copy.issue(a.keys, voff, kbuf);
      } else {
        copy.issue_tile(a, key_lo, key_hi, kbuf, vbuf);
      }
    }
    cp_async_commit();
  };
  // Packed: the key range in closed form, the first tile's copies before anything else.
  if constexpr (kPacked) {
    packed_key_span(a, v0 / group, (v0 + nv - 1) / group, len, key_lo, key_hi);
    copy.init(a, b, g, row_begin);
    issue_first_tile();
  }
  RopeKeys<D, kThreads> rope_keys;  // kRope: the next key tile's cos and sin
  if constexpr (kRope) {
    if (key_lo < key_hi) rope_keys.load(rope_cos, rope_sin, key_lo, key_hi);
    RopeQueries<D, kVec, kThreads> rq;
    rq.load(a, rope_cos, rope_sin, row_begin, g, v0, nv);
    block_key_ranges<kVec, kThreads>(a, row_begin, g, v0, nv, len, true, range);
    rq.store(scale, qs);
  } else {
    // kQPrefetch: a thread's query loads in two halves of at most 8 float4 (32 registers: the
    // 128-vector tiles spill more with all 16 live), the first under the key ranges, the second
    // under the first tile's block ids.
    constexpr int kQL = kQueryLoads<D, kVec, kThreads>, kQH = kQL > 8 ? kQL / 2 : kQL;
    float4 qv[kQPrefetch ? kQH : 1];
    if constexpr (kQPrefetch) load_queries<D, kVec, kThreads, 0, kQH>(a, row_begin, g, v0, nv, qv);

    block_key_ranges<kVec, kThreads>(a, row_begin, g, v0, nv, len, kPacked, range);
    if constexpr (kQPrefetch) {  // (landed with the ranges' positions, issued after them)
      store_queries_swizzled<T, D, kThreads, 0, kQH>(qv, scale, a.q16 != nullptr, qs);
      if constexpr (kQH < kQL)
        load_queries<D, kVec, kThreads, kQH, kQL - kQH>(a, row_begin, g, v0, nv, qv);
    }
    if constexpr (!kPacked) {
      key_lo = range[2 * kVec];
      key_hi = range[2 * kVec + 1];
      copy.init(a, b, g, row_begin);
      issue_first_tile();
    }
    if (key_lo + kKeys < key_hi) copy.fetch_ids(a, key_lo + kKeys, key_hi);
    if constexpr (!kQPrefetch)
      stage_queries_swizzled<T, D, kVec, kThreads>(a, row_begin, g, v0, nv, scale, qs);  // below
    else if constexpr (kQH < kQL)
      store_queries_swizzled<T, D, kThreads, kQH, kQL - kQH>(qv, scale, a.q16 != nullptr, qs);
  }

  // This lane's rows (of the block's vectors) and their key ranges; over the warp, the keys every
  // row sees [full_lo, full_hi); over the warpgroup's rows, the keys some row sees [wg_lo, wg_hi).
  const int r0 = qwg * kWgVectors + wq * 16 + gid, r1 = r0 + 8;
  const int lo0 = range[2 * r0], hi0 = range[2 * r0 + 1];
  const int lo1 = range[2 * r1], hi1 = range[2 * r1 + 1];
  int full_lo, full_hi;
  warp_full_key_span(lo0, hi0, lo1, hi1, full_lo, full_hi);
  int wg_lo = len, wg_hi = 0;
  for (int v = qwg * kWgVectors; v < min(nv, (qwg + 1) * kWgVectors); ++v) {
    wg_lo = min(wg_lo, range[2 * v]);
    wg_hi = max(wg_hi, range[2 * v + 1]);
  }

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this lane's share

  const uint32_t q_addr = static_cast<uint32_t>(__cvta_generic_to_shared(qs + qwg * kQBytes<D>));
  const uint32_t k_addr =
      static_cast<uint32_t>(__cvta_generic_to_shared(kbuf)) + koff * 128;  // row koff
  const uint32_t v_addr = static_cast<uint32_t>(__cvta_generic_to_shared(vbuf)) + koff * 128;
  // Descriptors of stage 0's first 16 dims / keys; the steps are wgmma::desc_add.
  const uint64_t q_desc = wgmma::desc_sw128(q_addr, 16, 1024);
  const uint64_t k_desc = wgmma::desc_sw128(k_addr, 16, 1024);
  const uint64_t v_desc = wgmma::desc_sw128(v_addr, kKeys * 128, 1024);
  int stage = 0;
  if constexpr (kPipe) {
    // Iteration i: S of tile i and P V of tile i - 1 are in flight together, and tile i's
    // softmax (all but the accumulators' rescale) runs under P V (FlashAttention-3's
    // intra-warpgroup overlap; the plain loop waits on S, softmax, P V in turn). One copy group
    // an iteration: K of tile i + 1 and V of tile i, so past iteration i's barrier K of tile i
    // and V of tile i - 1 have landed; K and V of tile j in stage j % 2, whose previous occupant
    // (tile j - 2) was done with in iteration j - 1 (each warpgroup waits for all its products
    // before the next barrier). No wgmma sits under a branch (ptxas serializes them all
    // otherwise, C7520): iteration 0's P V multiplies P = 0 by a zeroed V stage, the last tile's
    // P V follows the loop, and a tile the warpgroup does not see runs the masked step, a no-op.
    uint32_t pa[kSpan / 16][4] = {};  // P as wgmma's A fragments, 16 keys each
    {
      constexpr int kPer = kTileBytes<D> / 16 / kThreads;  // V stage 1 zeroed (0 x garbage: NaN)
      uint4* const z = reinterpret_cast<uint4*>(vbuf + kTileBytes<D>) + threadIdx.x;
#pragma unroll
      for (int k = 0; k < kPer; ++k) z[k * kThreads] = make_uint4(0, 0, 0, 0);
    }
    for (int t0 = key_lo; t0 < key_hi; t0 += kKeys, stage ^= 1) {
      cp_async_wait<0>();
      wgmma::fence_proxy_async();
      __syncthreads();
      if (t0 + kKeys < key_hi) {
        int koffs[Copy::kPer];  // tile i + 1's (its block ids were fetched an iteration ago)
        copy.offsets(t0 + kKeys, key_hi, koffs);
        copy.issue(a.keys, koffs, kbuf + (stage ^ 1) * kTileBytes<D>);
        copy.issue(a.values, voff, vbuf + stage * kTileBytes<D>);
#pragma unroll
        for (int k = 0; k < Copy::kPer; ++k) voff[k] = koffs[k];
      } else {
        copy.issue(a.values, voff, vbuf + stage * kTileBytes<D>);
      }
      cp_async_commit();
      if (t0 + 2 * kKeys < key_hi) copy.fetch_ids(a, t0 + 2 * kKeys, key_hi);
      const int th = t0 + koff;  // the warpgroup's first key of tile i
      float s[kSpan / 8][4];
#pragma unroll
      for (int nt = 0; nt < kSpan / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      wgmma::fence_operand(o);
      wgmma::fence();
      const uint64_t dk0 = wgmma::desc_add(k_desc, stage * kTileBytes<D>);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        const uint32_t qstep = (kk / 4) * kWgVectors * 128 + (kk % 4) * 32;
        const uint32_t kstep = (kk / 4) * kKeys * 128 + (kk % 4) * 32;
        wgmma::ss_m64n32k16(s, wgmma::desc_add(q_desc, qstep), wgmma::desc_add(dk0, kstep),
                            kk > 0 ? 1 : 0, T{});
      }
      wgmma::commit();
      pv_product<D, kSpan>(o, pa, v_addr + (stage ^ 1) * kTileBytes<D>, T{});  // tile i - 1's
      wgmma::commit();
      wgmma::wait<1>();  // S done, P V may still run
      wgmma::fence_operand(s);
      float alpha0, alpha1;
      if (th >= full_lo && th + kSpan <= full_hi)  // warp-uniform
        softmax_scores<false, kSpan / 8>(s, m0, m1, l0, l1, alpha0, alpha1, th, key_hi, lo0, hi0,
                                         lo1, hi1, tig);
      else
        softmax_scores<true, kSpan / 8>(s, m0, m1, l0, l1, alpha0, alpha1, th, key_hi, lo0, hi0,
                                        lo1, hi1, tig);
      wgmma::wait<0>();
      // o, and s (whose packing must not move above the wait: pa is P V's operand till then).
      wgmma::fence_operand(o);
      wgmma::fence_operand(s);
      rescale_o<D>(o, alpha0, alpha1);
#pragma unroll
      for (int kt = 0; kt < kSpan / 16; ++kt) {
        pa[kt][0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
        pa[kt][1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
        pa[kt][2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
        pa[kt][3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
      }
    }
    // The last tile's P V (no tile: P = 0 times the zeroed stage 1).
    cp_async_wait<0>();
    wgmma::fence_proxy_async();
    __syncthreads();
    wgmma::fence_operand(o);
    wgmma::fence();
    pv_product<D, kSpan>(o, pa, v_addr + (stage ^ 1) * kTileBytes<D>, T{});
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(o);
  }
  for (int t0 = key_lo; !kPipe && t0 < key_hi; t0 += kKeys, stage ^= 1) {
    // One barrier a tile: past it tile t has landed (and the queries are staged), visible to the
    // tensor cores' proxy, and every warpgroup is done with tile t - 1, whose stage then takes
    // tile t + 1's copies (each warpgroup waits for its own products before the next barrier).
    cp_async_wait<0>();
    wgmma::fence_proxy_async();
    __syncthreads();
    // The next tile's copies first (their block ids were fetched a tile ago: no wait here), then
    // the ids of the tile after it, consumed next iteration.
    if (t0 + kKeys < key_hi)
      copy.issue_tile(a, t0 + kKeys, key_hi, kbuf + (stage ^ 1) * kTileBytes<D>,
                      vbuf + (stage ^ 1) * kTileBytes<D>);
    cp_async_commit();
    if (t0 + 2 * kKeys < key_hi) copy.fetch_ids(a, t0 + 2 * kKeys, key_hi);
    if constexpr (kRope) {  // tile t rotated in place (every thread), then the next tile's tables
      rope_keys.rotate(kbuf + stage * kTileBytes<D>, t0, key_hi);
      if (t0 + kKeys < key_hi) rope_keys.load(rope_cos, rope_sin, t0 + kKeys, key_hi);
      wgmma::fence_proxy_async();
      __syncthreads();
    }
    const int th = t0 + koff;                          // the warpgroup's first key
    if (th >= wg_hi || th + kSpan <= wg_lo) continue;  // warpgroup-uniform: no row sees them

    const uint64_t dk0 = wgmma::desc_add(k_desc, stage * kTileBytes<D>);
    const uint64_t dv0 = wgmma::desc_add(v_desc, stage * kTileBytes<D>);
    float s[kSpan / 8][4];
#pragma unroll
    for (int nt = 0; nt < kSpan / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {  // dims 16 kk..+15: column block kk / 4, 32 B a step
      const uint32_t qstep = (kk / 4) * kWgVectors * 128 + (kk % 4) * 32;
      const uint32_t kstep = (kk / 4) * kKeys * 128 + (kk % 4) * 32;
      const uint64_t dq = wgmma::desc_add(q_desc, qstep);
      const uint64_t dk = wgmma::desc_add(dk0, kstep);
      if constexpr (kSplit)
        wgmma::ss_m64n32k16(s, dq, dk, kk > 0 ? 1 : 0, T{});
      else
        wgmma::ss_m64n64k16(s, dq, dk, kk > 0 ? 1 : 0, T{});
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(s);

    if (th >= full_lo && th + kSpan <= full_hi)  // warp-uniform
      softmax_step<false, D, kSpan / 8>(s, o, m0, m1, l0, l1, th, key_hi, lo0, hi0, lo1, hi1, tig);
    else
      softmax_step<true, D, kSpan / 8>(s, o, m0, m1, l0, l1, th, key_hi, lo0, hi0, lo1, hi1, tig);
    uint32_t pa[kSpan / 16][4];  // P as wgmma's A fragments, 16 keys each
#pragma unroll
    for (int kt = 0; kt < kSpan / 16; ++kt) {
      pa[kt][0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[kt][1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[kt][2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[kt][3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
    }
    wgmma::fence_operand(o);
    wgmma::fence();
#pragma unroll
    for (int kt = 0; kt < kSpan / 16; ++kt) {  // keys 16 kt..+15: two 8-row groups, 2048 bytes
      const uint64_t dv = wgmma::desc_add(dv0, kt * 2048);
      if constexpr (D == 128)
        wgmma::rs_m64n128k16(o, pa[kt], dv, T{});
      else
        wgmma::rs_m64n64k16(o, pa[kt], dv, T{});
    }
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(o);
  }
  cp_async_wait<0>();
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {  // the lanes' partial row sums -> the quad's
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  float fa0 = 1.0f, fa1 = 1.0f, fb0 = 0.0f, fb1 = 0.0f;  // out = o fa + o' fb (o': the partner's)
  const float* xo = nullptr;
  if constexpr (kSplit) {
    // Warpgroup 1 hands (m, l, o) to warpgroup 0's thread of the same rows and columns through
    // the K/V stages (free once both are past their last tile), thread-contiguous.
    float* const x = reinterpret_cast<float*>(kbuf);  // [D / 2 + 4][128]
    static_assert((D / 2 + 4) * 128 * sizeof(float) <= 4 * kTileBytes<D>);
    const int t = tid % 128;
    __syncthreads();
    if (wg == 1) {
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
        for (int j = 0; j < 4; ++j) x[(dt * 4 + j) * 128 + t] = o[dt][j];
      x[(D / 2 + 0) * 128 + t] = m0;
      x[(D / 2 + 1) * 128 + t] = m1;
      x[(D / 2 + 2) * 128 + t] = l0;
      x[(D / 2 + 3) * 128 + t] = l1;
    }
    __syncthreads();
    if (wg == 1) return;
    const float mb0 = x[(D / 2 + 0) * 128 + t], mb1 = x[(D / 2 + 1) * 128 + t];
    const float lb0 = x[(D / 2 + 2) * 128 + t], lb1 = x[(D / 2 + 3) * 128 + t];
    const float mx0 = fmaxf(m0, mb0), mx1 = fmaxf(m1, mb1);
    // A row none of whose keys either half saw keeps max -inf: both factors 0 (not NaN).
    fa0 = mx0 == -INFINITY ? 0.0f : ex2(m0 - mx0);
    fb0 = mx0 == -INFINITY ? 0.0f : ex2(mb0 - mx0);
    fa1 = mx1 == -INFINITY ? 0.0f : ex2(m1 - mx1);
    fb1 = mx1 == -INFINITY ? 0.0f : ex2(mb1 - mx1);
    l0 = l0 * fa0 + lb0 * fb0;
    l1 = l1 * fa1 + lb1 * fb1;
    xo = x + t;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = half == 0 ? r0 : r1;
    if (v >= nv) continue;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D;
    float* dst = a.out ? a.out + at : nullptr;
    __nv_bfloat16* dst_bf16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + at : nullptr;
    const float l = half == 0 ? l0 : l1;
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key: zeros, not NaN
    const float fa = (half == 0 ? fa0 : fa1) * inv, fb = (half == 0 ? fb0 : fb1) * inv;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + tig * 2, j = 2 * half;
      float2 y = make_float2(o[dt][j] * fa, o[dt][j + 1] * fa);
      if (kSplit) {
        y.x += xo[(dt * 4 + j) * 128] * fb;
        y.y += xo[(dt * 4 + j + 1) * 128] * fb;
      }
      if (dst) *reinterpret_cast<float2*>(dst + c) = y;
      if (dst_bf16)
        *reinterpret_cast<__nv_bfloat162*>(dst_bf16 + c) = __floats2bfloat162_rn(y.x, y.y);
    }
  }
}

template <typename T, int D, bool kSplit, bool kPipe, bool kQPrefetch, bool kPacked = false,
          bool kRope = false>
void launch_wgmma_kernel(const AttentionArgs& a, cudaStream_t s, const float* rope_cos = nullptr,
                         const float* rope_sin = nullptr) {
  constexpr size_t kSmem = (kSplit ? 1 : 2) * kQBytes<D> + 4 * kTileBytes<D> + 1024;  // + align
  constexpr auto kernel =
      attention_flash_wgmma_kernel<T, D, kSplit, kPipe, kQPrefetch, kPacked, kRope>;
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmem)) == cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the wgmma attention's shared memory");
  const dim3 grid(static_cast<unsigned>(a.hkv), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.tiles));
  kernel<<<grid, 256, kSmem, s>>>(a, rope_cos, rope_sin);
}

}  // namespace infera::cuda::flash_wgmma
