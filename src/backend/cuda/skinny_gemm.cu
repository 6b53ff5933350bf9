// Decode-batch GEMM on bf16 tensor cores: out[n, m] = x[n, k] . w[m, k]^T for the batches past
// the GEMV (9..256 rows), where cuBLAS spent ~6 us per projection whatever its size (0.75 TB/s)
// and launches without programmatic dependent launch. Here every CTA owns a 64-row tile of one
// weight and a 64-row tile of x over a slice of k: the tile's n-tiles run next to each other, so
// the weights leave HBM once and x (small) comes from L2. Where the weights alone give too few
// tiles to fill the GPU, k is split across CTAs; each writes its partial tile to a workspace and
// the last one to finish a tile adds them up in split order (deterministic) and runs the
// epilogue. Like gemv_multi it takes up to three weights sharing x in one launch (q/k/v), or
// gate/up with silu(gate) * up in the epilogue (and that result as bf16 for the down projection).
// cp.async 3-stage pipeline, ldmatrix fragments, mma.sync m16n8k16, f32 accumulation.
#include <algorithm>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda {
namespace {

constexpr int kBM = 64;  // weight rows per CTA
// x rows per CTA: BN = 64 or 128 (SkinnyGemmArgs::bn), with 2 x BN / 32 warps as 2 (m) x BN / 32
// (n), 32 x 32 outputs each.
constexpr int kBK = 64;  // k per pipeline stage
constexpr int kStages = 3;
constexpr int kStride = kBK + 8;  // smem row pitch in bf16: 144 bytes, so the 8 rows of an
                                  // ldmatrix hit 8 different 16-byte bank groups
template <int BN>
constexpr int kThreadsFor = 2 * BN;
// Accumulators per thread per weight: 2 m16 tiles x 4 n8 tiles x 4.
constexpr int kAccPerWeight = 32;

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes global -> shared; src_bytes 0 fills zeros (rows past n or m, columns past k).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

template <typename T>
__device__ __forceinline__ T pick(const T (&v)[kGemvMaxSegments], int i) {
  static_assert(kGemvMaxSegments == 3);
  return i == 0 ? v[0] : i == 1 ? v[1] : v[2];
}

struct TileCoords {
  int seg;
  int64_t m0;  // first weight row of the tile in its segment
};
__device__ __forceinline__ TileCoords tile_coords(const SkinnyGemmArgs& a, int64_t mtile, int G) {
  const int64_t t0 = (a.m[0] + kBM - 1) / kBM, t1 = (a.m[1] + kBM - 1) / kBM;
  if (G == 2 || a.segments == 1 || mtile < t0) return {0, mtile * kBM};
  if (a.segments == 2 || mtile < t0 + t1) return {1, (mtile - t0) * kBM};
  return {2, (mtile - t0 - t1) * kBM};
}

// Grid: (m tiles x splits x n tiles) flattened, n tiles fastest so the CTAs sharing a weight
// tile run together and all but the first find it in L2.
template <int G, int BN>
__global__ void __launch_bounds__(kThreadsFor<BN>, 2) skinny_gemm_kernel(const SkinnyGemmArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto* smem = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  constexpr int kThreads = kThreadsFor<BN>, kBN = BN;
  constexpr int kStageElems = (G * kBM + kBN) * kStride;  // G weight tiles, then the x tile

  // 32-bit index math (the host keeps the grid below 2^31).
  const int ntiles = static_cast<int>((a.n + kBN - 1) / kBN), splits = static_cast<int>(a.splits);
  const int bid = static_cast<int>(blockIdx.x);
  const int ntile = bid % ntiles;
  const int split = (bid / ntiles) % splits;
  const int mtile = bid / (ntiles * splits);
  const TileCoords tc = tile_coords(a, mtile, G);
  const int64_t m = pick(a.m, tc.seg), k = a.k, n0 = static_cast<int64_t>(ntile) * kBN;
  const __nv_bfloat16* w[G];
#pragma unroll
  for (int g = 0; g < G; ++g)
    w[g] = static_cast<const __nv_bfloat16*>(G == 1 ? pick(a.w, tc.seg) : a.w[g]);
  const auto* x = static_cast<const __nv_bfloat16*>(a.x);

  const int64_t chunks = (k + kBK - 1) / kBK;
  const int64_t per_split = (chunks + splits - 1) / splits;
  const int64_t c_begin = split * per_split;
  const int64_t c_end = c_begin + per_split < chunks ? c_begin + per_split : chunks;
  const int64_t c_count = c_end - c_begin;  // >= 1: the host leaves no split empty

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm = warp & 1, wn = warp >> 1;

  // Each stage: G x 64 weight rows and BN x rows of 64 columns = 8 chunks of 16 bytes a row.
  auto load_weights = [&](int64_t c, int stage) {
    __nv_bfloat16* s = smem + stage * kStageElems;
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int i = 0; i < kBM * 8 / kThreads; ++i) {
        const int idx = tid + i * kThreads, r = idx / 8, cc = idx % 8;
        const int64_t row = tc.m0 + r, col = c * kBK + cc * 8;
        const bool ok = row < m && col < k;
        cp_async16(s + (g * kBM + r) * kStride + cc * 8, ok ? w[g] + row * k + col : w[g],
                   ok ? 16 : 0);
      }
  };
  auto load_x = [&](int64_t c, int stage) {
    __nv_bfloat16* s = smem + stage * kStageElems + G * kBM * kStride;
#pragma unroll
    for (int i = 0; i < kBN * 8 / kThreads; ++i) {
      const int idx = tid + i * kThreads, r = idx / 8, cc = idx % 8;
      const int64_t row = n0 + r, col = c * kBK + cc * 8;
      const bool ok = row < a.n && col < k;
      cp_async16(s + r * kStride + cc * 8, ok ? x + row * k + col : x, ok ? 16 : 0);
    }
  };

  // The weights are constant during a step: the first stages' weight loads start before the wait
  // for the kernel that writes x (PDL, see device_util.cuh). They join the first commit group.
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st)
    if (st < c_count) load_weights(c_begin + st, st);
  pdl_wait();
  pdl_trigger();
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < c_count) load_x(c_begin + st, st);
    cp_async_commit();
  }

  float acc[G][2][4][4];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[g][i][j][e] = 0.0f;

  for (int64_t c = 0; c < c_count; ++c) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // chunk c landed for every thread; the stage refilled below is free
    const int64_t next = c + kStages - 1;
    if (next < c_count) {
      load_weights(c_begin + next, static_cast<int>(next % kStages));
      load_x(c_begin + next, static_cast<int>(next % kStages));
    }
    cp_async_commit();
    const __nv_bfloat16* s = smem + (c % kStages) * kStageElems;
    const __nv_bfloat16* sx = s + G * kBM * kStride;
#pragma unroll
    for (int ks = 0; ks < kBK / 16; ++ks) {
      // B fragments (x rows as the n dimension): matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
      // (n 8-15, k 0-7), (n 8-15, k 8-15) of a 16-row pair of n8 tiles.
      uint32_t b[4][2];
#pragma unroll
      for (int nj = 0; nj < 2; ++nj) {
        uint32_t r[4];
        const int row = wn * 32 + nj * 16 + (lane / 16) * 8 + (lane % 8);
        ldmatrix_x4(r, sx + row * kStride + ks * 16 + ((lane / 8) & 1) * 8);
        b[2 * nj][0] = r[0];
        b[2 * nj][1] = r[1];
        b[2 * nj + 1][0] = r[2];
        b[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          // A fragment (weight rows as the m dimension): rows 0-7 / 8-15 by lane bit 3, k 0-7 /
          // 8-15 by lane bit 4.
          uint32_t af[4];
          const int row = g * kBM + wm * 32 + mi * 16 + ((lane / 8) & 1) * 8 + (lane % 8);
          ldmatrix_x4(af, s + row * kStride + ks * 16 + (lane / 16) * 8);
#pragma unroll
          for (int nj = 0; nj < 4; ++nj)
            mma_16816(acc[g][mi][nj], af, b[nj][0], b[nj][1], __nv_bfloat16{});
        }
    }
  }
  cp_async_wait<0>();

  if (splits > 1) {
    // This split's partial tile to the workspace, each thread's values contiguous (16-byte
    // stores); the last CTA of the tile to arrive adds all splits in split order (the same sum
    // whichever CTA is last) and runs the epilogue. Release/acquire through the tile's counter:
    // thread 0's acq_rel atomic after the barrier publishes the whole CTA's stores (and, for the
    // last CTA, sees every other split's), as CUTLASS's split-k semaphore does, instead of a
    // __threadfence (fence.sc) in every thread.
    constexpr int P = G * kAccPerWeight;  // floats per thread
    const int tile = mtile * ntiles + ntile;
    float4* part = reinterpret_cast<float4*>(a.partials) +
                   (static_cast<int64_t>(tile) * splits + split) * (P / 4) * kThreads +
                   tid * (P / 4);
    float* flat = &acc[0][0][0][0];
#pragma unroll
    for (int i = 0; i < P / 4; ++i)
      __stcg(part + i, make_float4(flat[4 * i], flat[4 * i + 1], flat[4 * i + 2], flat[4 * i + 3]));
    __syncthreads();
    __shared__ unsigned last;
    if (tid == 0) {
      unsigned done;
      asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;"
                   : "=r"(done)
                   : "l"(a.counters + tile)
                   : "memory");
      last = done == static_cast<unsigned>(splits - 1);
      if (last) a.counters[tile] = 0;  // zero again for the next launch (kernel boundary orders it)
    }
    __syncthreads();
    if (!last) return;
    // Every split read back, this CTA's own too (its stores are visible to itself), into the
    // accumulators: no second array of P floats live.
    const float4* base = reinterpret_cast<const float4*>(a.partials) +
                         static_cast<int64_t>(tile) * splits * (P / 4) * kThreads + tid * (P / 4);
#pragma unroll
    for (int i = 0; i < P; ++i) flat[i] = 0.0f;
    for (int sp = 0; sp < splits; ++sp) {
#pragma unroll
      for (int i = 0; i < P / 4; ++i) {
        const float4 v = __ldcg(base + static_cast<int64_t>(sp) * (P / 4) * kThreads + i);
        flat[4 * i] += v.x;
        flat[4 * i + 1] += v.y;
        flat[4 * i + 2] += v.z;
        flat[4 * i + 3] += v.w;
      }
    }
  }

  // C fragment: c0, c1 at (weight row lane / 4, x rows 2 (lane % 4) + 0/1), c2, c3 eight weight
  // rows further.
  float* out = G == 1 ? pick(a.out, tc.seg) : a.out[0];
  auto* out_bf16 = static_cast<__nv_bfloat16*>(a.out_bf16);
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int nj = 0; nj < 4; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t row = tc.m0 + wm * 32 + mi * 16 + lane / 4 + (e / 2) * 8;
        const int64_t col = n0 + wn * 32 + nj * 8 + 2 * (lane % 4) + (e % 2);
        if (row >= m || col >= a.n) continue;
        float v = acc[0][mi][nj][e];
        if constexpr (G == 2) {
          const float up = acc[G - 1][mi][nj][e];
          v = v / (1.0f + expf(-v)) * up;  // as swiglu_kernel
          if (out_bf16) out_bf16[col * m + row] = __float2bfloat16_rn(v);
        }
        out[col * m + row] = v;
      }
}

int64_t m_tiles(const SkinnyGemmArgs& a) {
  int64_t t = 0;
  for (int64_t s = 0; s < (a.swiglu ? 1 : a.segments); ++s) t += (a.m[s] + kBM - 1) / kBM;
  return t;
}

template <int G, int BN>
size_t smem_bytes() {
  return static_cast<size_t>(kStages) * (G * kBM + BN) * kStride * sizeof(__nv_bfloat16);
}

// Sets the kernel's shared-memory limit once and returns how many of its CTAs fit on an SM.
template <int G, int BN>
int resident_ctas() {
  static const int resident = [] {
    cudaFuncSetAttribute(skinny_gemm_kernel<G, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         static_cast<int>(smem_bytes<G, BN>()));
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &n, skinny_gemm_kernel<G, BN>, kThreadsFor<BN>, smem_bytes<G, BN>()) != cudaSuccess) {
      cudaGetLastError();
      n = 1;
    }
    return n > 0 ? n : 1;
  }();
  return resident;
}

int resident_for(const SkinnyGemmArgs& a) {
  if (a.bn == 128) return a.swiglu ? resident_ctas<2, 128>() : resident_ctas<1, 128>();
  return a.swiglu ? resident_ctas<2, 64>() : resident_ctas<1, 64>();
}

template <int G, int BN>
void launch_for(const SkinnyGemmArgs& a, cudaStream_t s) {
  const int64_t tiles = m_tiles(a) * ((a.n + BN - 1) / BN);
  const unsigned grid = static_cast<unsigned>(tiles * a.splits);
  resident_ctas<G, BN>();  // sets the shared-memory attribute
  launch_pdl(skinny_gemm_kernel<G, BN>, grid, kThreadsFor<BN>, smem_bytes<G, BN>(), s, a);
}

}  // namespace

bool skinny_gemm_supports(const SkinnyGemmArgs& a) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(a.x);
  for (int64_t s = 0; s < a.segments; ++s) bits |= reinterpret_cast<uintptr_t>(a.w[s]);
  return a.n > 0 && a.k > 0 && a.k % 8 == 0 && bits % 16 == 0 && a.segments >= 1 &&
         a.segments <= kGemvMaxSegments && (!a.swiglu || (a.segments == 2 && a.m[0] == a.m[1]));
}

SkinnyGemmLayout skinny_gemm_layout(SkinnyGemmArgs& a, int64_t sm_count, int64_t ctas_per_sm,
                                    int64_t wide_rows) {
  // 128-row x tiles past wide_rows rows: each weight tile meets twice the rows per x fetch.
  a.bn = a.n > wide_rows ? 128 : 64;
  const int64_t tiles = m_tiles(a) * ((a.n + a.bn - 1) / a.bn);
  const int64_t chunks = (a.k + kBK - 1) / kBK;
  // Enough CTAs for about ctas_per_sm per SM, each with at least two k chunks; then as few
  // splits as give the same chunks per split (no empty split).
  // A split grid stays within one wave of resident CTAs (the last CTA of a tile should not wait
  // for another wave). ctas_per_sm 0: no split.
  const int64_t resident = resident_for(a) * sm_count;
  const int64_t target = std::min<int64_t>(resident, std::max<int64_t>(0, ctas_per_sm) * sm_count);
  int64_t splits =
      std::clamp<int64_t>((target + tiles - 1) / tiles, 1, std::max<int64_t>(1, chunks / 2));
  while (splits > 1 && tiles * splits > resident) --splits;
  const int64_t per_split = (chunks + splits - 1) / splits;
  splits = (chunks + per_split - 1) / per_split;
  a.splits = splits;
  const int64_t G = a.swiglu ? 2 : 1;
  if (tiles * splits >= (int64_t{1} << 31))
    throw std::runtime_error("skinny GEMM grid beyond 2^31");
  return {tiles, splits > 1 ? tiles * splits * G * kAccPerWeight * 2 * a.bn : 0};
}

void launch_skinny_gemm(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const SkinnyGemmArgs*>(p);
  if (a.bn == 128) return a.swiglu ? launch_for<2, 128>(a, s) : launch_for<1, 128>(a, s);
  return a.swiglu ? launch_for<2, 64>(a, s) : launch_for<1, 64>(a, s);
}

}  // namespace infera::cuda
