// ThreadPool::parallel_items (the decode GEMVs' slices taken in turn): every item exactly once
// whatever the thread and item counts, nothing when there are no items, the first exception
// rethrown on the caller with the other items still done, and the pool usable afterwards.
#include "backend/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
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

}  // namespace
}  // namespace infera
