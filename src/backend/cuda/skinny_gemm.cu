// Decode-batch GEMM on bf16 tensor cores: out[n, m] = x[n, k] . w[m, k]^T for the batches past
// the GEMV (9..256 rows), where cuBLAS spent ~6 us per projection whatever its size (0.75 TB/s)
// and launches without programmatic dependent launch. Every CTA owns a 64-row tile of one weight
// and a 64- (or 128-) row tile of x over a slice of k; the CTAs of a tile's k slices form one
// thread-block cluster (Hopper), so the split-k partial tiles are added through distributed shared
// memory: each CTA of the cluster sums its share of the tile over all ranks in rank order
// (deterministic) and writes it. No workspace, no atomics, no second kernel. Like gemv_multi it
// takes up to three weights sharing x in one launch (q/k/v), or gate/up with silu(gate) * up in
// the epilogue (and that result as bf16 for the down projection). cp.async multi-stage pipeline,
// ldmatrix fragments, mma.sync m16n8k16, f32 accumulation.
#include <cooperative_groups.h>

#include <algorithm>
#include <stdexcept>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/kernels.h"
#include "backend/cuda/mma_tile.cuh"

namespace infera::cuda {
namespace {

constexpr int kBM = 64;  // weight rows per CTA
// x rows per CTA: BN = 64 or 128 (SkinnyGemmArgs::bn), with 2 x BN / 32 warps as 2 (m) x BN / 32
// (n), 32 x 32 outputs each.
constexpr int kBK = 64;  // k per pipeline stage
// Stages in flight: a CTA streams only a few chunks, so its loads are latency-bound; 4 where the
// shared memory still leaves 2+ CTAs per SM.
template <int G, int BN>
constexpr int kStagesFor = (G == 1 && BN == 64) ? 4 : 3;
constexpr int kMaxSplits = 8;     // the portable cluster size
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
  constexpr int kThreads = kThreadsFor<BN>, kBN = BN, kStages = kStagesFor<G, BN>;
  constexpr int kStageElems = (G * kBM + kBN) * kStride;  // G weight tiles, then the x tile

  // Grid: (m tiles x n tiles x splits) flattened, splits fastest (a cluster is `splits`
  // consecutive CTAs), then n tiles, so the CTAs sharing a weight tile run together and all but
  // the first find it in L2. 32-bit index math (the host keeps the grid below 2^31).
  const int ntiles = static_cast<int>((a.n + kBN - 1) / kBN), splits = static_cast<int>(a.splits);
  const int bid = static_cast<int>(blockIdx.x);
  const int split = bid % splits;  // == the CTA's rank in its cluster
  const int ntile = (bid / splits) % ntiles;
  const int mtile = bid / (splits * ntiles);
  const TileCoords tc = tile_coords(a, mtile, G);
  const int64_t m = pick(a.m, tc.seg), k = a.k, n0 = static_cast<int64_t>(ntile) * kBN;
  const __nv_bfloat16* w[G];
#pragma unroll
  for (int g = 0; g < G; ++g)
    w[g] = static_cast<const __nv_bfloat16*>(G == 1 ? pick(a.w, tc.seg) : a.w[g]);
  const auto* x = static_cast<const __nv_bfloat16*>(a.x);

  // Split `split` takes chunks [split * chunks / splits, (split + 1) * chunks / splits): balanced,
  // none empty while chunks >= splits (the host's rule; an empty one would add zeros).
  const int chunks = static_cast<int>((k + kBK - 1) / kBK);
  const int c_begin = split * chunks / splits;
  const int c_count = (split + 1) * chunks / splits - c_begin;

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

  for (int c = 0; c < c_count; ++c) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // chunk c landed for every thread; the stage refilled below is free
    const int next = c + kStages - 1;
    if (next < c_count) {
      load_weights(c_begin + next, next % kStages);
      load_x(c_begin + next, next % kStages);
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

  // Output element j (0..31) of this thread's fragments, j = (mi * 4 + nj) * 4 + e: C fragment
  // c0, c1 at (weight row lane / 4, x rows 2 (lane % 4) + 0/1), c2, c3 eight weight rows further.
  float* out = G == 1 ? pick(a.out, tc.seg) : a.out[0];
  auto* out_bf16 = static_cast<__nv_bfloat16*>(a.out_bf16);
  auto store = [&](int j, float v, float up) {
    const int mi = j / 16, nj = (j / 4) % 4, e = j % 4;
    const int64_t row = tc.m0 + wm * 32 + mi * 16 + lane / 4 + (e / 2) * 8;
    const int64_t col = n0 + wn * 32 + nj * 8 + 2 * (lane % 4) + (e % 2);
    if (row >= m || col >= a.n) return;
    if constexpr (G == 2) {
      // As swiglu_kernel, or GeGLU as the encoder's kernels (gelu_erf).
      v = a.glu == kSkinnyGeglu ? gelu_erf(v) * up : v / (1.0f + expf(-v)) * up;
      if (out_bf16) out_bf16[col * m + row] = __float2bfloat16_rn(v);
    }
    out[col * m + row] = v;
  };
  const float* flat = &acc[0][0][0][0];
  if (splits == 1) {
#pragma unroll
    for (int j = 0; j < kAccPerWeight; ++j) store(j, flat[j], flat[(G - 1) * kAccPerWeight + j]);
    return;
  }
  // Split k: every rank's partial tile to its shared memory (the pipeline's stages are free
  // now), element-major so that a warp's stores and loads hit 32 banks; then rank r adds
  // elements [r, r + 1) x 32 / splits of every thread slot over all ranks, in rank order.
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  constexpr int P = G * kAccPerWeight;
  float* red = reinterpret_cast<float*>(smem_raw);
  __syncthreads();  // every warp is done with the stages
#pragma unroll
  for (int i = 0; i < P; ++i) red[i * kThreads + tid] = flat[i];
  cluster.sync();
  const int share = kAccPerWeight / splits, j0 = split * share;
  for (int q = 0; q < share; ++q) {
    const int j = j0 + q;
    // All ranks' loads issued before the adds (unrolled to kMaxSplits, guarded).
    float pv[kMaxSplits], pu[kMaxSplits];
#pragma unroll
    for (int r = 0; r < kMaxSplits; ++r) {
      if (r >= splits) break;
      const float* remote = cluster.map_shared_rank(red, r);
      pv[r] = remote[j * kThreads + tid];
      pu[r] = G == 2 ? remote[(kAccPerWeight + j) * kThreads + tid] : 0.0f;
    }
    float v = 0.0f, up = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxSplits; ++r) {
      if (r >= splits) break;
      v += pv[r];
      up += pu[r];
    }
    store(j, v, up);
  }
  cluster.sync();  // no CTA leaves while another still reads its shared memory
}

int64_t m_tiles(const SkinnyGemmArgs& a) {
  int64_t t = 0;
  for (int64_t s = 0; s < (a.glu ? 1 : a.segments); ++s) t += (a.m[s] + kBM - 1) / kBM;
  return t;
}

template <int G, int BN>
size_t smem_bytes() {
  const size_t stages =
      static_cast<size_t>(kStagesFor<G, BN>) * (G * kBM + BN) * kStride * sizeof(__nv_bfloat16);
  const size_t partials = static_cast<size_t>(G) * kAccPerWeight * kThreadsFor<BN> * sizeof(float);
  return std::max(stages, partials);
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

template <int G, int BN>
void launch_for(const SkinnyGemmArgs& a, cudaStream_t s) {
  const int64_t tiles = m_tiles(a) * ((a.n + BN - 1) / BN);
  resident_ctas<G, BN>();  // sets the shared-memory attribute
  cudaLaunchAttribute attr[2];
  int count = 0;
  if (a.splits > 1) {
    attr[count].id = cudaLaunchAttributeClusterDimension;
    attr[count].val.clusterDim.x = static_cast<unsigned>(a.splits);
    attr[count].val.clusterDim.y = 1;
    attr[count].val.clusterDim.z = 1;
    ++count;
  }
  if (programmatic_launch()) {  // as launch_pdl (device_util.cuh)
    attr[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(tiles * a.splits));
  cfg.blockDim = dim3(kThreadsFor<BN>);
  cfg.dynamicSmemBytes = smem_bytes<G, BN>();
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = count;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, skinny_gemm_kernel<G, BN>, a);
  if (err != cudaSuccess) throw std::runtime_error(cudaGetErrorString(err));
}

}  // namespace

bool skinny_gemm_supports(const SkinnyGemmArgs& a) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(a.x);
  for (int64_t s = 0; s < a.segments; ++s) bits |= reinterpret_cast<uintptr_t>(a.w[s]);
  return a.n > 0 && a.k > 0 && a.k % 8 == 0 && bits % 16 == 0 && a.segments >= 1 &&
         a.segments <= kGemvMaxSegments && (!a.glu || (a.segments == 2 && a.m[0] == a.m[1]));
}

int64_t skinny_gemm_layout(SkinnyGemmArgs& a, int64_t sm_count, int64_t ctas_per_sm,
                           int64_t wide_rows) {
  // 128-row x tiles past wide_rows rows: each weight tile meets twice the rows per x fetch.
  a.bn = a.n > wide_rows ? 128 : 64;
  const int64_t tiles = m_tiles(a) * ((a.n + a.bn - 1) / a.bn);
  const int64_t chunks = (a.k + kBK - 1) / kBK;
  // Split k in powers of two (a cluster of that many CTAs, <= 8, dividing the 32 outputs per
  // thread) until about ctas_per_sm CTAs per SM run (0: never), each split two chunks or more.
  const int64_t target = std::max<int64_t>(0, ctas_per_sm) * sm_count;
  int64_t splits = 1;
  while (splits * 2 <= kMaxSplits && tiles * splits < target && chunks >= 4 * splits) splits *= 2;
  a.splits = splits;
  if (tiles * splits >= (int64_t{1} << 31))
    throw std::runtime_error("skinny GEMM grid beyond 2^31");
  return tiles * splits;
}

void launch_skinny_gemm(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const SkinnyGemmArgs*>(p);
  if (a.bn == 128) return a.glu ? launch_for<2, 128>(a, s) : launch_for<1, 128>(a, s);
  return a.glu ? launch_for<2, 64>(a, s) : launch_for<1, 64>(a, s);
}

}  // namespace infera::cuda
