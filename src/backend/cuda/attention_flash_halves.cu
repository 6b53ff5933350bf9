// The flash kernel (attention_flash.cu) with each key tile's two 32-key halves on different warps
// (CudaOptions::flash_key_halves): a block of 8 warps owns 64 query vectors; warp w takes rows
// (w % 4) * 16..+15 and keys 32 * (w / 4)..+31 of every 64-key tile, with its own running max,
// sum and output, and the two warps of a row range merge through shared memory at the end.
// Why: ncu on the H200 (bench/reference/cudafa/run1) showed the 64-vector kernel latency-bound
// (issue slots 31 % busy, 2.6 warps a scheduler, 7.2 cycles between a warp's instructions) and
// a 2048-token prompt's attention as long as its longest query tile's serial walk over 32 key
// tiles; a 128-vector tile (attention_flash_wide.cu) halved the instructions but not that walk.
// Splitting each tile's keys between warps halves the walk (per warp: 16 x 32 scores a tile), and
// a block's 8 warps (2 blocks, 16 warps an SM, at most 128 registers: the queries are read by
// ldmatrix from shared memory) hide more latency than 4. A warp skips a half none of its rows
// sees (the causal diagonal's upper half, keys before a window). The rest is the wide kernel's:
// the first tile's copies before the query stage, one barrier a tile, base-2 softmax without the
// mask on halves every row of the warp sees whole. No key split across blocks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backend/cuda/attention_common.cuh"
#include "backend/cuda/attention_flash_tile.cuh"
#include "backend/cuda/device_util.cuh"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda {
namespace {

using namespace flash;  // attention_flash_tile.cuh

constexpr int kVecH = static_cast<int>(kMmaVectorsPerTile);  // 64
constexpr int kThreadsH = 256, kRowWarps = 4, kHalf = kKeys / 2;
template <typename T, int D>
constexpr size_t kSmemHalves = (4 * kTileElems<D> + kVecH * kRow<D>)*sizeof(T);  // K, V x2; Q

template <typename T, int D>
__global__ void __launch_bounds__(kThreadsH, 2)
    attention_flash_halves_kernel(const AttentionArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* const kbuf = reinterpret_cast<T*>(smem_raw);  // [2][kKeys][kRow]
  T* const vbuf = kbuf + 2 * kTileElems<D>;        // [2][kKeys][kRow]
  T* const qs = vbuf + 2 * kTileElems<D>;          // [kVecH][kRow]: scaled queries
  __shared__ int range[kVecH * 2 + 2];

  const int g = blockIdx.x, b = blockIdx.y;
  const int tile = static_cast<int>(gridDim.z - 1 - blockIdx.z);  // longest first
  const int group = static_cast<int>(a.hq / a.hkv);
  const int row_begin = a.query_start[b], rows = a.query_start[b + 1] - row_begin;
  const int v0 = tile * kVecH, nv = min(kVecH, rows * group - v0);
  if (nv <= 0) return;
  const bool packed = a.block_table == nullptr;  // encoder attention: keys are the rows
  const int len = packed ? rows : a.seq_lens[b];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int gid = lane / 4, tig = lane % 4;                // mma fragment coordinates
  const int rw = warp % kRowWarps, kh = warp / kRowWarps;  // row range, key half
  const float scale = static_cast<float>(a.scale) * 1.4426950408889634f;  // base 2

  block_key_ranges<kVecH, kThreadsH>(a, row_begin, g, v0, nv, len, packed, range);
  const int key_lo = range[2 * kVecH], key_hi = range[2 * kVecH + 1];
  // The first key/value tile's copies go out before the queries are staged.
  if (key_lo < key_hi) load_tile<T, D, kThreadsH>(a, b, g, key_lo, key_hi, row_begin, kbuf, vbuf);
  cp_async_commit();
  stage_queries<T, D, kVecH, kThreadsH>(a, row_begin, g, v0, nv, scale, qs);  // published below

  const int r0 = rw * 16 + gid, r1 = r0 + 8;
  const int lo0 = range[2 * r0], hi0 = range[2 * r0 + 1];
  const int lo1 = range[2 * r1], hi1 = range[2 * r1 + 1];
  // Over the warp's rows: keys [full_lo, full_hi) every row sees (empty when a row is past nv:
  // its range is [0, 0)); keys outside [any_lo, any_hi) no row sees.
  int full_lo = max(lo0, lo1), full_hi = min(hi0, hi1);
  int any_lo = min(lo0, lo1), any_hi = max(hi0, hi1);
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    full_lo = max(full_lo, __shfl_xor_sync(0xffffffffu, full_lo, off));
    full_hi = min(full_hi, __shfl_xor_sync(0xffffffffu, full_hi, off));
    any_lo = min(any_lo, __shfl_xor_sync(0xffffffffu, any_lo, off));
    any_hi = max(any_hi, __shfl_xor_sync(0xffffffffu, any_hi, off));
  }

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;  // l: this lane's share
  // ldmatrix lane roles (matrix mi = lane / 8, row lr = lane % 8): the wide kernel's, with the
  // keys and values offset to the warp's half.
  const int mi = lane / 8, lr = lane % 8;
  const T* const qbase = qs + (rw * 16 + (mi % 2) * 8 + lr) * kRow<D> + (mi / 2) * 8;
  const int k_off = (kh * kHalf + (mi / 2) * 8 + lr) * kRow<D> + (mi % 2) * 8;
  const int v_off = (kh * kHalf + (mi % 2) * 8 + lr) * kRow<D> + (mi / 2) * 8;

  int stage = 0;
  for (int t0 = key_lo; t0 < key_hi; t0 += kKeys, stage ^= 1) {
    // One barrier a tile: past it, tile t has landed (and the queries are staged) and every warp
    // is done with tile t - 1, whose stage then takes tile t + 1's copies.
    cp_async_wait<0>();
    __syncthreads();
    if (t0 + kKeys < key_hi)
      load_tile<T, D, kThreadsH>(a, b, g, t0 + kKeys, key_hi, row_begin,
                                 kbuf + (stage ^ 1) * kTileElems<D>,
                                 vbuf + (stage ^ 1) * kTileElems<D>);
    cp_async_commit();
    const int th = t0 + kh * kHalf;                      // the warp's first key
    if (th >= any_hi || th + kHalf <= any_lo) continue;  // warp-uniform: no row sees the half
    const T* ks = kbuf + stage * kTileElems<D> + k_off;
    const T* vs = vbuf + stage * kTileElems<D> + v_off;

    float s[kHalf / 8][4];
#pragma unroll
    for (int nt = 0; nt < kHalf / 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t qa[4];
      ldmatrix_x4(qa, qbase + kk * 16);
#pragma unroll
      for (int np = 0; np < kHalf / 16; ++np) {
        uint32_t bf[4];
        ldmatrix_x4(bf, ks + np * 16 * kRow<D> + kk * 16);
        mma_free(s[2 * np], qa, bf[0], bf[1], T{});
        mma_free(s[2 * np + 1], qa, bf[2], bf[3], T{});
      }
    }
    if (th >= full_lo && th + kHalf <= full_hi)  // warp-uniform
      softmax_tile_interleaved<false, D, kHalf / 8>(s, o, m0, m1, l0, l1, th, key_hi, lo0, hi0, lo1,
                                                    hi1, tig);
    else
      softmax_tile_interleaved<true, D, kHalf / 8>(s, o, m0, m1, l0, l1, th, key_hi, lo0, hi0, lo1,
                                                   hi1, tig);
    uint32_t pa[kHalf / 16][4];
#pragma unroll
    for (int kt = 0; kt < kHalf / 16; ++kt) {
      pa[kt][0] = pack2<T>(s[2 * kt][0], s[2 * kt][1]);
      pa[kt][1] = pack2<T>(s[2 * kt][2], s[2 * kt][3]);
      pa[kt][2] = pack2<T>(s[2 * kt + 1][0], s[2 * kt + 1][1]);
      pa[kt][3] = pack2<T>(s[2 * kt + 1][2], s[2 * kt + 1][3]);
    }
#pragma unroll
    for (int kt = 0; kt < kHalf / 16; ++kt)
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, vs + kt * 16 * kRow<D> + dp * 16);
        mma_free(o[2 * dp], pa[kt], bf[0], bf[1], T{});
        mma_free(o[2 * dp + 1], pa[kt], bf[2], bf[3], T{});
      }
    // No barrier here: the next iteration's guards this stage's refill.
  }
  cp_async_wait<0>();
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {  // the lanes' partial row sums -> the quad's
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }

  // The second half's warps hand (m, l, o) to their row range's first-half warp through the key
  // and value stages (free once every warp is past its last tile), lane-contiguous.
  float* const xo = reinterpret_cast<float*>(kbuf);   // [kRowWarps][D / 8][4][32]
  float* const xml = reinterpret_cast<float*>(vbuf);  // [kRowWarps][4][32]
  static_assert(kRowWarps * D * 4 * sizeof(float) <= 2 * kTileElems<D> * sizeof(T));
  __syncthreads();
  if (kh == 1) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
#pragma unroll
      for (int j = 0; j < 4; ++j) xo[((rw * (D / 8) + dt) * 4 + j) * 32 + lane] = o[dt][j];
    xml[(rw * 4 + 0) * 32 + lane] = m0;
    xml[(rw * 4 + 1) * 32 + lane] = m1;
    xml[(rw * 4 + 2) * 32 + lane] = l0;
    xml[(rw * 4 + 3) * 32 + lane] = l1;
  }
  __syncthreads();
  if (kh == 1) return;
  const float mb0 = xml[(rw * 4 + 0) * 32 + lane], mb1 = xml[(rw * 4 + 1) * 32 + lane];
  const float lb0 = xml[(rw * 4 + 2) * 32 + lane], lb1 = xml[(rw * 4 + 3) * 32 + lane];
  const float mx0 = fmaxf(m0, mb0), mx1 = fmaxf(m1, mb1);
  // A row none of whose keys either half saw keeps max -inf: both factors 0 (not NaN).
  const float fa0 = mx0 == -INFINITY ? 0.0f : ex2(m0 - mx0);
  const float fb0 = mx0 == -INFINITY ? 0.0f : ex2(mb0 - mx0);
  const float fa1 = mx1 == -INFINITY ? 0.0f : ex2(m1 - mx1);
  const float fb1 = mx1 == -INFINITY ? 0.0f : ex2(mb1 - mx1);
  const float sum0 = l0 * fa0 + lb0 * fb0, sum1 = l1 * fa1 + lb1 * fb1;
  const float inv0 = sum0 > 0.0f ? 1.0f / sum0 : 0.0f, inv1 = sum1 > 0.0f ? 1.0f / sum1 : 0.0f;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int v = half == 0 ? r0 : r1;
    if (v >= nv) continue;
    int row, head;
    vector_row_head(a, row_begin, g, v0 + v, row, head);
    const int64_t at = (static_cast<int64_t>(row) * a.hq + head) * D;
    float* dst = a.out + at;
    __nv_bfloat16* dst_bf16 = a.out_bf16 ? static_cast<__nv_bfloat16*>(a.out_bf16) + at : nullptr;
    const float fa = (half == 0 ? fa0 : fa1) * (half == 0 ? inv0 : inv1);
    const float fb = (half == 0 ? fb0 : fb1) * (half == 0 ? inv0 : inv1);
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int c = dt * 8 + tig * 2, j = 2 * half;
      const float ob0 = xo[((rw * (D / 8) + dt) * 4 + j) * 32 + lane];
      const float ob1 = xo[((rw * (D / 8) + dt) * 4 + j + 1) * 32 + lane];
      const float2 y = make_float2(o[dt][j] * fa + ob0 * fb, o[dt][j + 1] * fa + ob1 * fb);
      *reinterpret_cast<float2*>(dst + c) = y;
      if (dst_bf16)
        *reinterpret_cast<__nv_bfloat162*>(dst_bf16 + c) = __floats2bfloat162_rn(y.x, y.y);
    }
  }
}

template <typename T, int D>
void launch_halves(const AttentionArgs& a, cudaStream_t s) {
  static const bool attr_set = [] {
    return cudaFuncSetAttribute(attention_flash_halves_kernel<T, D>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSmemHalves<T, D>)) == cudaSuccess;
  }();
  if (!attr_set) throw std::runtime_error("cannot raise the flash attention's shared memory");
  const dim3 grid(static_cast<unsigned>(a.hkv), static_cast<unsigned>(a.num_seqs),
                  static_cast<unsigned>(a.tiles));
  attention_flash_halves_kernel<T, D><<<grid, kThreadsH, kSmemHalves<T, D>, s>>>(a);
}

}  // namespace

void launch_attention_flash_halves(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  dispatch_type_and_head_dim(a, [&](auto t, auto d) {
    launch_halves<typename decltype(t)::type, decltype(d)::value>(a, s);
  });
}

}  // namespace infera::cuda
