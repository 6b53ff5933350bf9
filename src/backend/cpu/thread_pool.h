// One pool of worker threads per backend. parallel_for splits [0, n) into one contiguous chunk per
// thread (the caller runs the first chunk itself), which suits the row-partitioned kernels here:
// equal work per row. parallel_items hands out items one at a time instead (the decode GEMVs:
// equal work, but not always equally fast threads on a shared VM). Workers spin briefly before
// sleeping because decode issues hundreds of short parallel sections per token.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "core/function_ref.h"

namespace infera::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  // threads <= 0: hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each at least `grain` long
  // (except the last). Returns when all chunks are done. Exceptions from fn are rethrown here.
  // fn is only referenced (nothing is copied or allocated per section).
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t begin, int64_t end)> fn);

  // Calls fn(item) once for every item of [0, items), each thread (the caller too) taking the
  // next untaken item until none is left: a thread that runs slower (descheduled by the VM, a
  // busier memory path) ends up with fewer items instead of keeping the others waiting at the
  // end of the section. Which thread runs an item changes from call to call, so fn's result must
  // not depend on it. Exceptions from fn are rethrown here (the first one).
  void parallel_items(int64_t items, FunctionRef<void(int64_t item)> fn);

  // Idle-time prefetch (decode_prefetch.h says what for). A plan lists, for each thread index, byte
  // ranges that thread is about to read. Once published, a thread with nothing to do (a worker
  // between sections, the caller waiting for the workers) prefetches its ranges a 4 KiB step at a
  // time, up to `budget` bytes, and returns to its work as soon as there is some: memory keeps
  // streaming while the work in between (norms, attention, waiting for the slower thread) runs.
  // Plans never change once added and live as long as the pool, so a thread may read a published
  // plan without a lock. Prefetches change no result.
  struct PrefetchRange {
    const char* begin;
    int64_t bytes;
  };
  using PrefetchPlan = std::vector<std::vector<PrefetchRange>>;  // [thread index] -> ranges
  const PrefetchPlan* add_prefetch_plan(PrefetchPlan plan);
  // plan nullptr or budget 0: none. Called from the thread that calls parallel_for.
  void publish_prefetch(const PrefetchPlan* plan, int64_t budget);
  // Bytes prefetched so far, by thread index (tests, profiling).
  int64_t prefetched_bytes(int index) const;

 private:
  struct PrefetchCursor {
    uint64_t serial = 0;
    size_t range = 0;
    int64_t offset = 0, done = 0;
  };
  // One step of thread `index`'s published ranges; false when it has none left.
  bool prefetch_step(int index, PrefetchCursor& cursor);
  void worker_loop(int index);
  void run_chunk(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;

  // The current job, valid while pending_ > 0.
  const FunctionRef<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_chunks_ = 0;
  std::exception_ptr error_;
  std::mutex error_mutex_;

  std::deque<PrefetchPlan> prefetch_plans_;  // only the caller adds; elements never move
  std::atomic<const PrefetchPlan*> prefetch_plan_{nullptr};
  std::atomic<int64_t> prefetch_budget_{0};
  std::atomic<uint64_t> prefetch_serial_{0};  // +1 per publication: cursors start over
  PrefetchCursor caller_cursor_;
  std::vector<std::atomic<int64_t>> prefetched_;  // by thread index
};

}  // namespace infera::cpu
