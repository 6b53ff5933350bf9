// The tile schedule of the TMA GEMMs (tma_gemm.cuh: glu_gemm.cu, qkv_gemm.cu), in plain arithmetic
// shared by the kernels and the host, so that the CPU tests check it where no GPU is: a tile
// skipped or taken twice would show only as some shapes' outputs left unwritten or raced on a GPU.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define INFERA_GEMM_HD __host__ __device__
#else
#define INFERA_GEMM_HD
#endif

namespace infera::cuda::gemm_schedule {

constexpr int kTileRows = 128;  // output rows a tile: two consumer warpgroups of 64
// Row tiles a band: the tiles are walked band by band, every column tile of a band's rows before
// the next band, so that the tiles in flight at once (one wave: a block an SM) share a few x row
// tiles and weight tiles in L2 instead of each column tile re-reading all of x from HBM (64x512
// tokens of ModernBERT-large: x is 64 MB, more than the L2).
constexpr int kBandRows = 8;

struct Tile {
  int m0, n0;  // first output row and column
};

INFERA_GEMM_HD inline int row_tiles(int64_t m) {
  return static_cast<int>((m + kTileRows - 1) / kTileRows);
}
INFERA_GEMM_HD inline int col_tiles(int64_t n, int tile_cols) {
  return static_cast<int>((n + tile_cols - 1) / tile_cols);
}

// Tile t of an [m, n] output in tiles of kTileRows x tile_cols: band t / (kBandRows x column
// tiles), within it column tiles in turn, the band's row tiles (kBandRows, fewer in the last
// band) fastest.
INFERA_GEMM_HD inline Tile tile_at(int t, int64_t m, int64_t n, int tile_cols) {
  const int mt = row_tiles(m), nt = col_tiles(n, tile_cols);
  const int band = t / (kBandRows * nt), in_band = t % (kBandRows * nt);
  const int band_rows = mt - band * kBandRows < kBandRows ? mt - band * kBandRows : kBandRows;
  return {(band * kBandRows + in_band % band_rows) * kTileRows, (in_band / band_rows) * tile_cols};
}

// The GLU GEMM's output columns a tile: 128 (the wgmma N of 256 over gate and up rows) where that
// gives every SM a tile, else 64 (twice the tiles: a 93-row ModernBERT forward has 21 tiles of 128
// columns for 132 SMs). forced: 64 or 128 (CudaOptions::glu_gemm_tile_cols), anything else: that
// rule.
inline int glu_tile_cols(int64_t m, int64_t f, int64_t sms, int64_t forced) {
  if (forced == 64 || forced == 128) return static_cast<int>(forced);
  return int64_t{row_tiles(m)} * col_tiles(f, 128) >= sms ? 128 : 64;
}

// The residual GEMM's output columns a tile: 256 where the tiles still cover every SM twice
// (fewer, larger tiles read x and w less often), else 128 (a 2048-row Qwen3-0.6B o projection:
// 128 tiles of 128 for 132 SMs, 64 of 256). forced: 128 or 256, anything else: that rule.
inline int residual_tile_cols(int64_t m, int64_t n, int64_t sms, int64_t forced) {
  if (forced == 128 || forced == 256) return static_cast<int>(forced);
  return int64_t{row_tiles(m)} * col_tiles(n, 256) >= 2 * sms ? 256 : 128;
}

}  // namespace infera::cuda::gemm_schedule
