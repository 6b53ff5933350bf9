// The TMA prefill attention's schedule (attention_tma_schedule.h), on the CPU: the persistent
// grid's snake walk must give every work item to exactly one block (a skipped item leaves its
// outputs unwritten, a doubled one races), balance a causal prompt's items, and the kernel must
// be chosen for the shapes it was measured faster on (lead24_h200) and not for the others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "backend/cuda/attention_tma_schedule.h"

namespace infera::cuda {
namespace {

// Each block's items as the kernel walks them: rounds k = 0, 1, ... until the first item past
// the launch's.
std::vector<std::vector<int>> walks(int items, int grid) {
  std::vector<std::vector<int>> by_block(static_cast<size_t>(grid));
  for (int b = 0; b < grid; ++b)
    for (int k = 0, item; (item = tma_schedule::snake_item(k, grid, b)) < items; ++k)
      by_block[static_cast<size_t>(b)].push_back(item);
  return by_block;
}

TEST(TmaSchedule, SnakeWalkGivesEveryItemToExactlyOneBlock) {
  for (const auto [items, grid] : {std::pair{1, 1},
                                   {5, 3},
                                   {64, 132},
                                   {131, 132},
                                   {132, 132},
                                   {133, 132},
                                   {256, 132},
                                   {512, 132},
                                   {1000, 7},
                                   {24, 5}}) {
    SCOPED_TRACE(std::to_string(items) + " items on " + std::to_string(grid) + " blocks");
    std::vector<int> taken(static_cast<size_t>(items), 0);
    for (const auto& walk : walks(items, grid))
      for (int item : walk) {
        ASSERT_GE(item, 0);
        ASSERT_LT(item, items);
        ++taken[static_cast<size_t>(item)];
      }
    for (int i = 0; i < items; ++i) EXPECT_EQ(taken[static_cast<size_t>(i)], 1) << "item " << i;
  }
}

// 1x2048 on Qwen3-0.6B's heads (8 kv heads, group 2): 32 query tiles of 128 vectors, longest
// first, the tile of item i walking 32 - i / 8 key tiles; 256 items on an H100's 132 SMs.
TEST(TmaSchedule, SnakeBalancesACausalPromptWhereStridingDidNot) {
  const int items = 256, grid = 132, heads = 8, tiles = 32;
  const auto key_tiles = [&](int item) { return tiles - item / heads; };
  int total = 0;
  for (int i = 0; i < items; ++i) total += key_tiles(i);
  const double mean = double(total) / grid;
  int snake_max = 0;
  for (const auto& walk : walks(items, grid)) {
    int load = 0;
    for (int item : walk) load += key_tiles(item);
    snake_max = std::max(snake_max, load);
  }
  int stride_max = 0;  // blocks b, b + grid, ...: the first blocks take the longest of each round
  for (int b = 0; b < grid; ++b) {
    int load = 0;
    for (int item = b; item < items; item += grid) load += key_tiles(item);
    stride_max = std::max(stride_max, load);
  }
  EXPECT_LE(snake_max, mean + 1.0) << "mean " << mean;
  EXPECT_EQ(stride_max, 48);  // the imbalance the snake removed (lead24_h200/run2)
}

TEST(TmaSchedule, TakesTheShapesItWasMeasuredFasterOn) {
  const int64_t hkv = 8, group = 2, vectors = 128, min_rows = 1024, sms = 132;
  const auto wanted = [&](int64_t seqs, int64_t rows) {
    return tma_schedule::wanted(rows, tma_schedule::work_items(hkv, seqs, rows, group, vectors),
                                min_rows, sms);
  };
  EXPECT_EQ(tma_schedule::work_items(hkv, 1, 512, group, vectors), 64);
  EXPECT_EQ(tma_schedule::work_items(hkv, 8, 512, group, vectors), 512);
  EXPECT_EQ(tma_schedule::work_items(hkv, 1, 2048, group, vectors), 256);
  // Faster on it (x1.01-1.12): long prompts, and 8x512's 512 items.
  EXPECT_TRUE(wanted(1, 1024));
  EXPECT_TRUE(wanted(1, 2048));
  EXPECT_TRUE(wanted(2, 2048));
  EXPECT_TRUE(wanted(4, 1024));
  EXPECT_TRUE(wanted(8, 512));
  // Level or slower on it: few items (1x512: 64, 2x512: 128) or short prompts.
  EXPECT_FALSE(wanted(1, 512));
  EXPECT_FALSE(wanted(2, 512));
  EXPECT_FALSE(wanted(4, 256));
  EXPECT_FALSE(wanted(16, 128));
  EXPECT_FALSE(wanted(64, 1));  // decode rows
}

}  // namespace
}  // namespace infera::cuda
