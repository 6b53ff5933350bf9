// The KV cache manager and its block allocator: sequences that grow past many blocks, interleaved
// with others, freed and reallocated, with every invariant checked after every step; running out
// of blocks is a refusal that changes nothing, and misuse is an error, never corruption.
#include "engine/kv_cache.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "engine/block_allocator.h"
#include "engine/step.h"
#include "infera/error.h"

namespace infera {
namespace {

TEST(BlockAllocator, AllocatesEveryBlockOnceThenRefuses) {
  BlockAllocator a(5);
  std::set<int32_t> got;
  for (int i = 0; i < 5; ++i) got.insert(*a.allocate());
  EXPECT_EQ(got.size(), 5u);
  EXPECT_FALSE(a.allocate().has_value());
  a.check_invariants();
  a.release(3);
  EXPECT_EQ(*a.allocate(), 3);
}

TEST(BlockAllocator, ReferenceCountsKeepSharedBlocks) {
  BlockAllocator a(2);
  const int32_t b = *a.allocate();
  a.retain(b);
  EXPECT_EQ(a.ref_count(b), 2);
  a.release(b);
  EXPECT_EQ(a.num_free(), 1);  // still held once
  a.release(b);
  EXPECT_EQ(a.num_free(), 2);
  a.check_invariants();
}

TEST(BlockAllocator, MisuseThrowsAndLeavesTheStateIntact) {
  BlockAllocator a(3);
  EXPECT_THROW(a.release(0), Error);  // free already
  EXPECT_THROW(a.release(7), Error);
  EXPECT_THROW(a.retain(1), Error);
  EXPECT_THROW(a.retain(-1), Error);
  a.check_invariants();
  EXPECT_EQ(a.num_free(), 3);
  EXPECT_THROW(BlockAllocator(0), InvalidArgument);
}

class KvCacheTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> backend_ = make_cpu_backend(1);
  KvShape shape_{2, 2, 8};
};

TEST_F(KvCacheTest, PoolsHaveTheBlockLayout) {
  KvCache c(*backend_, shape_, {.block_size = 4, .num_blocks = 10, .dtype = DType::BF16});
  ASSERT_EQ(c.pool().layers.size(), 2u);
  EXPECT_EQ(c.pool().layers[0].keys.shape(), (Shape{2, 10, 4, 8}));  // [kv_heads, blocks, ...]
  EXPECT_EQ(c.pool().layers[1].values.dtype(), DType::BF16);
  EXPECT_EQ(c.bytes(), 2 * 2 * 10 * 2 * 4 * 8 * 2);
}

TEST_F(KvCacheTest, OutOfBlocksIsARefusalThatChangesNothing) {
  KvCache c(*backend_, shape_, {.block_size = 4, .num_blocks = 3});
  const SeqId a = c.add_sequence(), b = c.add_sequence();
  ASSERT_TRUE(c.reserve(a, 9));  // 3 blocks
  EXPECT_FALSE(c.reserve(b, 1));
  EXPECT_EQ(c.capacity(b), 0);
  EXPECT_FALSE(c.reserve(a, 13));  // would need a 4th
  EXPECT_EQ(c.capacity(a), 12);
  c.check_invariants();
  c.free_sequence(a);
  EXPECT_TRUE(c.reserve(b, 12));
  c.check_invariants();
  EXPECT_THROW(c.commit(b, 13), InvalidArgument);
  EXPECT_THROW(c.length(a), InvalidArgument);  // freed: unknown
}

TEST_F(KvCacheTest, RandomGrowFreeReallocateKeepsInvariants) {
  // 2,000 random steps over up to 12 live sequences: grow by 1..40 tokens, or free one, or add
  // one; every refusal must leave the state unchanged, every step the invariants hold, and a
  // batch built from the tables never maps two live tokens to one slot.
  KvCache c(*backend_, shape_, {.block_size = 16, .num_blocks = 64});
  std::mt19937 rng(7);
  std::map<SeqId, int64_t> live;  // expected lengths
  int refusals = 0, frees = 0;
  for (int step = 0; step < 2000; ++step) {
    const int action = int(rng() % 10);
    if ((action < 2 && live.size() < 12) || live.empty()) {
      live[c.add_sequence()] = 0;
    } else if (action < 4) {
      auto it = std::next(live.begin(), long(rng() % live.size()));
      c.free_sequence(it->first);
      live.erase(it);
      ++frees;
    } else {
      auto it = std::next(live.begin(), long(rng() % live.size()));
      const int64_t grow = 1 + int64_t(rng() % 40);
      const int64_t before = c.capacity(it->first), free_before = c.free_blocks();
      if (c.reserve(it->first, it->second + grow)) {
        c.commit(it->first, grow);
        it->second += grow;
      } else {
        ++refusals;
        EXPECT_EQ(c.capacity(it->first), before);
        EXPECT_EQ(c.free_blocks(), free_before);
      }
    }
    ASSERT_NO_THROW(c.check_invariants()) << "step " << step;
    std::set<int64_t> slots;
    int64_t tokens = 0;
    for (const auto& [seq, len] : live) {
      ASSERT_EQ(c.length(seq), len);
      const auto& table = c.block_table(seq);
      for (int64_t p = 0; p < len; ++p) slots.insert(table[size_t(p / 16)] * 16 + p % 16);
      tokens += len;
    }
    ASSERT_EQ(int64_t(slots.size()), tokens) << "two tokens share a slot at step " << step;
  }
  EXPECT_GT(refusals, 10);  // the pool really ran out, repeatedly
  EXPECT_GT(frees, 100);
}

TEST_F(KvCacheTest, BuildBatchMapsPositionsThroughBlockTables) {
  KvCache c(*backend_, shape_, {.block_size = 4, .num_blocks = 8});
  const SeqId a = c.add_sequence(), b = c.add_sequence();
  ASSERT_TRUE(c.reserve(b, 5));  // b first: its blocks are 0 and 1
  ASSERT_TRUE(c.reserve(a, 6));  // a: 2 and 3
  c.commit(a, 3);
  const std::vector<int32_t> ta = {7, 8}, tb = {1, 2, 3, 4, 5};
  const std::vector<SeqChunk> chunks = {{a, ta, OutputRows::Last}, {b, tb, OutputRows::All}};
  const BatchDesc d = build_batch(c, chunks);
  EXPECT_EQ(d.positions, (std::vector<int32_t>{3, 4, 0, 1, 2, 3, 4}));
  EXPECT_EQ(d.slots, (std::vector<int32_t>{2 * 4 + 3, 3 * 4 + 0, 0, 1, 2, 3, 4}));
  EXPECT_EQ(d.query_start, (std::vector<int32_t>{0, 2, 7}));
  EXPECT_EQ(d.seq_lens, (std::vector<int32_t>{5, 5}));
  EXPECT_EQ(d.block_table, (std::vector<int32_t>{2, 3, 0, 1}));
  EXPECT_EQ(d.output_rows, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_NO_THROW(d.validate(100, 1000, 8, 4));
  // Over the reservation, twice in one step, empty: errors.
  const std::vector<int32_t> big(6, 1);  // 3 + 6 > the 8 slots of 2 blocks
  EXPECT_THROW(build_batch(c, std::vector<SeqChunk>{{a, big}}), InvalidArgument);
  EXPECT_THROW(build_batch(c, std::vector<SeqChunk>{{a, ta}, {a, ta}}), InvalidArgument);
  EXPECT_THROW(build_batch(c, std::vector<SeqChunk>{{a, {}}}), InvalidArgument);
}

TEST_F(KvCacheTest, ValidateRejectsInconsistentBatches) {
  KvCache c(*backend_, shape_, {.block_size = 4, .num_blocks = 8});
  const SeqId a = c.add_sequence();
  ASSERT_TRUE(c.reserve(a, 8));
  const std::vector<int32_t> t = {1, 2, 3};
  const BatchDesc good = build_batch(c, std::vector<SeqChunk>{{a, t}});
  auto expect_rejected = [&](auto mutate, const char* what) {
    BatchDesc d = good;
    mutate(d);
    EXPECT_THROW(d.validate(100, 1000, 8, 4), InvalidArgument) << what;
  };
  expect_rejected([](BatchDesc& d) { d.tokens[1] = 100; }, "token outside the vocabulary");
  expect_rejected([](BatchDesc& d) { d.positions[2] = 3; }, "position past the sequence length");
  expect_rejected([](BatchDesc& d) { d.slots[0] = 5; }, "slot not where the table maps");
  expect_rejected([](BatchDesc& d) { d.block_table[0] = 8; }, "block outside the cache");
  expect_rejected([](BatchDesc& d) { d.query_start.back() = 2; }, "query_start not ending at T");
  expect_rejected([](BatchDesc& d) { d.output_rows = {3}; }, "output row out of range");
  expect_rejected([](BatchDesc& d) { d.seq_lens = {9}; }, "longer than its blocks");
  expect_rejected([](BatchDesc& d) { d.positions[0] = -1; }, "negative position");
  EXPECT_THROW(good.validate(100, 2, 8, 4), InvalidArgument);  // past the model's context
}

}  // namespace
}  // namespace infera
