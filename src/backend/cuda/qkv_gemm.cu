// The q/k/v GEMM with the head epilogue (CudaOptions::qkv_gemm; sm_90a, head_dim 128): the
// decoder stack's q/k/v product and qk_norm_rope_kv_write in one launch of the TMA GEMM
// (tma_gemm.cuh).
//
// Why: the cuBLAS GEMM wrote q, k and v as bf16 [n, (hq + 2 hkv) 128] and the qk-norm kernel read
// them back to norm, rotate and scatter them: at a 2048-token Qwen3-0.6B prompt ~15 us a layer of
// elementwise work (session 22's ncu) and 33 MB moved, besides a launch.
//
// A tile is 128 rows by 128 columns, i.e. one head of q, k or v for 128 tokens, so each row's head
// is in the registers of one quad of lanes (32 values a lane), and a value's RoPE partner (+64)
// is the same lane's accumulator 8 column groups on. The epilogue is qk_norm_rope_kv_bf16_kernel's
// per-head arithmetic (fused.cu) on the f32 sums instead of their bf16 roundings: the sum of
// squares (a quad's shuffles), the norm weight, the rotation, and q times the attention's scale
// as bf16 queries, k into the key pool, v into the value pool, at the row's slot.
#include <cuda.h>
#include <cuda_bf16.h>

#include <climits>
#include <cstring>

#include "backend/cuda/device_util.cuh"
#include "backend/cuda/qkv_gemm.h"
#include "backend/cuda/tensor_map.h"
#include "backend/cuda/tma_gemm.cuh"

namespace infera::cuda {
namespace qkv_gemm {

constexpr int kD = 128;  // head_dim: a tile's columns

template <typename W>
struct HeadEpilogue {
  static constexpr int kN = kD, kSegments = 1;
  using bf16 = __nv_bfloat16;
  const W* q_norm;
  const W* k_norm;
  const int32_t* positions;
  const int32_t* slots;
  const float* cos;  // [positions, 64]
  const float* sin;
  bf16* key_pool;  // [hkv, num_blocks, block_size, 128]
  bf16* value_pool;
  bf16* q16;  // [m, hq, 128]
  int m, hq, hkv, block_size, num_blocks;
  float eps, q_scale;

  __device__ bf16* pool_row(bf16* pool, int head, int slot) const {
    const int block = slot / block_size, offset = slot % block_size;
    return pool + ((static_cast<int64_t>(head) * num_blocks + block) * block_size + offset) * kD;
  }

  // This lane's RoPE table entries of a position: columns 8 j + c0 and the next, j < 8.
  __device__ void rope_row(int pos, int c0, float2 (&cs)[kD / 16], float2 (&sn)[kD / 16]) const {
#pragma unroll
    for (int j = 0; j < kD / 16; ++j) {
      cs[j] = *reinterpret_cast<const float2*>(cos + pos * (kD / 2) + 8 * j + c0);
      sn[j] = *reinterpret_cast<const float2*>(sin + pos * (kD / 2) + 8 * j + c0);
    }
  }

  // The loads come before the stores they would otherwise wait behind: a store to the output may
  // alias any later load for all the compiler knows, so it keeps their order, and a walk that
  // loads a table entry between stores takes a memory latency each time. Here: the slots,
  // positions and norm weights first, the second row's table entries before the first row's
  // stores.
  __device__ void operator()(const gemm_schedule::Tile& tile, const float (&acc)[kN / 2], int row0,
                             int lane) const {
    const int head = tile.n0 / kD;  // of q's hq, k's hkv and v's hkv heads in turn
    const int kind = head < hq ? 0 : head < hq + hkv ? 1 : 2;
    const int h = head - (kind == 0 ? 0 : kind == 1 ? hq : hq + hkv);
    const int c0 = 2 * (lane % 4);  // this lane's columns: 8 j + c0 and the next, j < 16
    bool live[2];
    int slot[2], pos[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + 8 * half;
      live[half] = row < m;
      slot[half] = live[half] && kind > 0 ? slots[row] : 0;
      pos[half] = live[half] && kind < 2 ? positions[row] : 0;
    }
    if (kind == 2) {  // (tile-uniform) v: straight to the cache
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (!live[half]) continue;
        bf16* const dst = pool_row(value_pool, h, slot[half]);
#pragma unroll
        for (int j = 0; j < kD / 8; ++j)
          *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j + c0) =
              __floats2bfloat162_rn(acc[4 * j + 2 * half], acc[4 * j + 2 * half + 1]);
      }
      return;
    }
    const W* const w = kind == 0 ? q_norm : k_norm;
    float wlo[kD / 16][2], whi[kD / 16][2];  // the norm weights of the low half's columns, the high
#pragma unroll
    for (int j = 0; j < kD / 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        wlo[j][e] = to_f32(w[8 * j + c0 + e]);
        whi[j][e] = to_f32(w[8 * j + c0 + e + kD / 2]);
      }
    // Each row's head's sum of squares: this lane's 32 values, then the quad's (every lane
    // shuffles, rows past m too: their zero-filled sums are never stored).
    float inv[2];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float ss = 0.0f;
#pragma unroll
      for (int j = 0; j < kD / 8; ++j) {
        const float a0 = acc[4 * j + 2 * half], a1 = acc[4 * j + 2 * half + 1];
        ss += a0 * a0;
        ss += a1 * a1;
      }
      ss += __shfl_xor_sync(0xffffffffu, ss, 1);
      ss += __shfl_xor_sync(0xffffffffu, ss, 2);
      inv[half] = 1.0f / sqrtf(ss / static_cast<float>(kD) + eps);
    }
    const float scale = kind == 0 ? q_scale : 1.0f;
    float2 cs[kD / 16], sn[kD / 16];
    rope_row(pos[0], c0, cs, sn);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      __nv_bfloat162 lo_out[kD / 16], hi_out[kD / 16];
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {  // the low half's groups; partners 8 groups on
        float r0[2], r1[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float lo = wlo[j][e] * (acc[4 * j + 2 * half + e] * inv[half]);
          const float hi = whi[j][e] * (acc[4 * (j + kD / 16) + 2 * half + e] * inv[half]);
          const float cv = e ? cs[j].y : cs[j].x, sv = e ? sn[j].y : sn[j].x;
          r0[e] = lo * cv - hi * sv;
          r1[e] = hi * cv + lo * sv;
        }
        lo_out[j] = __floats2bfloat162_rn(r0[0] * scale, r0[1] * scale);
        hi_out[j] = __floats2bfloat162_rn(r1[0] * scale, r1[1] * scale);
      }
      if (half == 0) rope_row(pos[1], c0, cs, sn);
      if (!live[half]) continue;
      const int row = row0 + 8 * half;
      bf16* const dst = kind == 0 ? q16 + (static_cast<int64_t>(row) * hq + h) * kD
                                  : pool_row(key_pool, h, slot[half]);
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {
        *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j + c0) = lo_out[j];
        *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j + c0 + kD / 2) = hi_out[j];
      }
    }
  }
};

template <typename W>
void launch(const QkvGemmArgs& a, const tma_gemm::Tiling& tg, const CUtensorMap& xmap,
            const CUtensorMap& wmap, int grid, cudaStream_t stream) {
  const QkNormRopeKvArgs& q = a.qa;
  const HeadEpilogue<W> epi{static_cast<const W*>(q.q_norm),
                            static_cast<const W*>(q.k_norm),
                            q.positions,
                            q.slots,
                            q.cos,
                            q.sin,
                            static_cast<__nv_bfloat16*>(q.key_pool),
                            static_cast<__nv_bfloat16*>(q.value_pool),
                            static_cast<__nv_bfloat16*>(q.q16_out),
                            static_cast<int>(q.n),
                            static_cast<int>(q.hq),
                            static_cast<int>(q.hkv),
                            static_cast<int>(q.block_size),
                            static_cast<int>(q.num_blocks),
                            static_cast<float>(q.eps),
                            static_cast<float>(q.q16_scale)};
  if (a.schedule.pingpong)
    return tma_gemm::launch<HeadEpilogue<W>, true>(epi, tg, xmap, wmap, wmap, grid, stream);
  tma_gemm::launch<HeadEpilogue<W>, false>(epi, tg, xmap, wmap, wmap, grid, stream);
}

}  // namespace qkv_gemm

const char* qkv_gemm_unsupported(const QkvGemmArgs& a, int cc_major, int cc_minor) {
  const QkNormRopeKvArgs& q = a.qa;
  if (q.head_dim != qkv_gemm::kD) return "head_dim must be 128 (a tile is one head)";
  if (q.cache_type != ElemType::BF16) return "the cache must be bf16";
  if (!q.q16_out || q.k) return "only the bf16 queries and the cache are written";
  if (q.hq < 1 || q.hkv < 1 || q.block_size < 1 || q.num_blocks < 1) return "an empty shape";
  if (q.num_blocks * q.block_size > INT_MAX) return "a pool too large for int slots";
  if (!q.positions || !q.slots || !q.cos || !q.sin || !q.q_norm || !q.k_norm || !q.key_pool ||
      !q.value_pool)
    return "a missing operand";
  return tma_gemm::operands_unsupported(cc_major, cc_minor, q.n, a.k,
                                        (q.hq + 2 * q.hkv) * qkv_gemm::kD, a.k, a.x, a.w, nullptr);
}

void launch_qkv_gemm(const void* args, cudaStream_t stream) {
  QkvGemmArgs a;
  std::memcpy(static_cast<void*>(&a), args, sizeof a);
  const QkNormRopeKvArgs& q = a.qa;
  const int64_t rows = (q.hq + 2 * q.hkv) * qkv_gemm::kD;
  const CUtensorMap xmap = tma_gemm::x_map("qkv_gemm", a.x, q.n, a.k, a.k);
  const CUtensorMap wmap = tma_gemm::w_map("qkv_gemm", a.w, rows, a.k, qkv_gemm::kD);
  const tma_gemm::Tiling tg = tma_gemm::tiling(q.n, rows, qkv_gemm::kD, a.k);
  const int grid = tma_gemm::grid_for(tg, a.schedule.sm_count);
  switch (q.norm_type) {
    case ElemType::F32:
      return qkv_gemm::launch<float>(a, tg, xmap, wmap, grid, stream);
    case ElemType::F16:
      return qkv_gemm::launch<__half>(a, tg, xmap, wmap, grid, stream);
    case ElemType::BF16:
      return qkv_gemm::launch<__nv_bfloat16>(a, tg, xmap, wmap, grid, stream);
  }
}

}  // namespace infera::cuda
