// The TMA GEMMs' tile schedule (tma_gemm_schedule.h), on the CPU: the persistent grid's tiles must
// cover the output exactly once whatever the partial tiles and bands (a skipped tile leaves outputs
// unwritten, a doubled one races), the tiles in flight together must share few x row tiles (the
// bands' point: the L2 holds them), and the tile widths must follow their rules.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/tma_gemm_schedule.h"

namespace infera::cuda {
namespace {

using gemm_schedule::col_tiles;
using gemm_schedule::kBandRows;
using gemm_schedule::kTileRows;
using gemm_schedule::row_tiles;
using gemm_schedule::tile_at;

struct Shape {
  int64_t m, f;
  int cols;
};

// 1 row; 93 (one partial row tile); 1100 (9 row tiles: one band and a band of 1); 4650 (37: a
// partial last band of 5); ModernBERT-large's 64x512 tokens at its 2624 columns (a partial column
// tile); Qwen3-0.6B's 2048 x 3072; an odd column count.
const Shape kShapes[] = {{1, 64, 64},       {93, 2624, 64},    {93, 2624, 128},
                         {1100, 3072, 128}, {4650, 2624, 128}, {32768, 2624, 128},
                         {2048, 3072, 128}, {300, 37, 64},     {129, 200, 64}};

TEST(TmaGemmSchedule, TilesCoverTheOutputExactlyOnce) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.f) + " cols " +
                 std::to_string(s.cols));
    const int mt = row_tiles(s.m), nt = col_tiles(s.f, s.cols), tiles = mt * nt;
    EXPECT_EQ(mt, (s.m + kTileRows - 1) / kTileRows);
    EXPECT_EQ(nt, (s.f + s.cols - 1) / s.cols);
    std::set<std::pair<int, int>> seen;
    for (int t = 0; t < tiles; ++t) {
      const gemm_schedule::Tile tile = tile_at(t, s.m, s.f, s.cols);
      ASSERT_EQ(tile.m0 % kTileRows, 0) << "tile " << t;
      ASSERT_EQ(tile.n0 % s.cols, 0) << "tile " << t;
      ASSERT_TRUE(tile.m0 >= 0 && tile.m0 < s.m) << "tile " << t << " row " << tile.m0;
      ASSERT_TRUE(tile.n0 >= 0 && tile.n0 < s.f) << "tile " << t << " column " << tile.n0;
      EXPECT_TRUE(seen.insert({tile.m0, tile.n0}).second) << "tile " << t << " taken twice";
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(tiles));
  }
}

// Where a band holds a wave of tiles (132, an H100's SMs, a tile each), any wave reads at most two
// bands' x rows: at 64x512 tokens 16 of the 256 row tiles (4 MB of x), where a column-by-column
// walk would read 132 (33 MB, most of the L2, again for each of the 21 column tiles).
TEST(TmaGemmSchedule, AWaveSharesFewRowTiles) {
  int checked = 0;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(std::to_string(s.m) + "x" + std::to_string(s.f));
    const int tiles = row_tiles(s.m) * col_tiles(s.f, s.cols);
    if (kBandRows * col_tiles(s.f, s.cols) < 132) continue;
    ++checked;
    for (int first = 0; first < tiles; first += 7) {
      std::set<int> rows;
      for (int t = first; t < tiles && t < first + 132; ++t)
        rows.insert(tile_at(t, s.m, s.f, s.cols).m0);
      EXPECT_LE(rows.size(), static_cast<size_t>(2 * kBandRows)) << "wave from tile " << first;
    }
  }
  EXPECT_GE(checked, 4);
}

TEST(TmaGemmSchedule, TileWidthFillsTheSms) {
  // 128 columns where the tiles cover every SM at least once, else 64.
  EXPECT_EQ(gemm_schedule::glu_tile_cols(2048, 3072, 132, 0), 128);  // 16 x 24 tiles
  EXPECT_EQ(gemm_schedule::glu_tile_cols(32768, 2624, 132, 0), 128);
  EXPECT_EQ(gemm_schedule::glu_tile_cols(93, 2624, 132, 0), 64);     // 21 tiles of 128
  EXPECT_EQ(gemm_schedule::glu_tile_cols(1024, 2112, 132, 0), 128);  // 8 x 17 = 136
  EXPECT_EQ(gemm_schedule::glu_tile_cols(1024, 2048, 132, 0), 64);   // 8 x 16 = 128
  // Forced widths hold; anything else is the rule's.
  EXPECT_EQ(gemm_schedule::glu_tile_cols(93, 2624, 132, 128), 128);
  EXPECT_EQ(gemm_schedule::glu_tile_cols(2048, 3072, 132, 64), 64);
  EXPECT_EQ(gemm_schedule::glu_tile_cols(2048, 3072, 132, 96), 128);
  // The residual GEMM: 256 where those tiles cover every SM twice, else 128.
  EXPECT_EQ(gemm_schedule::residual_tile_cols(2048, 1024, 132, 0), 128);   // 16 x 4 = 64 tiles
  EXPECT_EQ(gemm_schedule::residual_tile_cols(32768, 1024, 132, 0), 256);  // 256 x 4
  EXPECT_EQ(gemm_schedule::residual_tile_cols(8448, 1024, 132, 0), 256);   // 66 x 4 = 264
  EXPECT_EQ(gemm_schedule::residual_tile_cols(8320, 1024, 132, 0), 128);   // 65 x 4 = 260
  EXPECT_EQ(gemm_schedule::residual_tile_cols(2048, 1024, 132, 256), 256);
  EXPECT_EQ(gemm_schedule::residual_tile_cols(32768, 1024, 132, 64), 256);
}

}  // namespace
}  // namespace infera::cuda
