// ThreadPool::parallel_items (the decode GEMVs' slices taken in turn): every item exactly once
// whatever the thread and item counts, nothing when there are no items, the first exception
// rethrown on the caller with the other items still done, and the pool usable afterwards. The
// idle-time prefetch: a thread with nothing to do prefetches its own published ranges, up to the
// budget, once per publication, and nothing when none is published.
#include "backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace infera {
namespace {

TEST(ThreadPool, ParallelItemsRunsEveryItemOnce) {
  for (const int threads : {1, 2, 3, 5})
    for (const int64_t items :
         {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{7}, int64_t{64}, int64_t{1000}}) {
      cpu::ThreadPool pool(threads);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(items));
      for (int rep = 0; rep < 3; ++rep)
        pool.parallel_items(items, [&](int64_t i) {
          ASSERT_TRUE(i >= 0 && i < items) << i;
          runs[static_cast<size_t>(i)].fetch_add(1);
        });
      for (int64_t i = 0; i < items; ++i)
        EXPECT_EQ(runs[static_cast<size_t>(i)].load(), 3)
            << "item " << i << " of " << items << ", " << threads << " threads";
    }
}

TEST(ThreadPool, ParallelItemsRethrowsAndStaysUsable) {
  cpu::ThreadPool pool(2);
  std::atomic<int> done{0};
  EXPECT_THROW(pool.parallel_items(50,
                                   [&](int64_t i) {
                                     if (i == 17) throw std::runtime_error("item 17");
                                     done.fetch_add(1);
                                   }),
               std::runtime_error);
  EXPECT_EQ(done.load(), 49);  // the thread that threw stops; the other takes what is left
  std::atomic<int64_t> sum{0};
  pool.parallel_items(10, [&](int64_t i) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 45);
}

// The caller's chunk is empty and the worker's sleeps, so the caller waits (prefetching) long
// enough to use its whole budget; the worker prefetches after its chunk, before the next section.
TEST(ThreadPool, IdleThreadsPrefetchTheirPublishedRangesUpToTheBudget) {
  cpu::ThreadPool pool(2);
  std::vector<char> buffer(1 << 20);
  const int64_t kib = 1024;
  cpu::ThreadPool::PrefetchPlan plan(2);
  plan[0] = {{buffer.data(), 24 * kib}, {buffer.data() + 100 * kib, 40 * kib}};  // 64 KiB
  plan[1] = {{buffer.data() + 512 * kib, 8 * kib}};
  const auto* published = pool.add_prefetch_plan(plan);
  const auto section = [&] {
    pool.parallel_for(2, 1, [&](int64_t begin, int64_t) {
      if (begin == 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
  };
  const auto wait_for_worker = [&](int64_t bytes) {
    for (int i = 0; i < 2000 && pool.prefetched_bytes(1) < bytes; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };

  section();  // nothing published: nothing prefetched
  EXPECT_EQ(pool.prefetched_bytes(0), 0);
  EXPECT_EQ(pool.prefetched_bytes(1), 0);

  pool.publish_prefetch(published, 48 * kib);  // the caller's 64 KiB cut to the budget
  section();
  EXPECT_EQ(pool.prefetched_bytes(0), 48 * kib);
  wait_for_worker(8 * kib);
  EXPECT_EQ(pool.prefetched_bytes(1), 8 * kib);  // all of its ranges, below the budget
  section();                                     // the same publication: done already
  EXPECT_EQ(pool.prefetched_bytes(0), 48 * kib);

  pool.publish_prefetch(published, 1 << 20);  // published again: from the start, all of it
  section();
  EXPECT_EQ(pool.prefetched_bytes(0), 48 * kib + 64 * kib);
  wait_for_worker(16 * kib);
  EXPECT_EQ(pool.prefetched_bytes(1), 16 * kib);

  pool.publish_prefetch(published, 0);  // a zero budget is none
  section();
  pool.publish_prefetch(nullptr, 1 << 20);
  section();
  EXPECT_EQ(pool.prefetched_bytes(0), 112 * kib);
  EXPECT_EQ(pool.prefetched_bytes(1), 16 * kib);
}

}  // namespace
}  // namespace infera
