// One pool of worker threads per backend. parallel_for splits [0, n) into one contiguous chunk per
// thread (the caller runs the first chunk itself), which suits the row-partitioned kernels here:
// equal work per row. parallel_items hands out items one at a time instead (the decode GEMVs:
// equal work, but not always equally fast threads on a shared VM). Workers spin briefly before
// sleeping because decode issues hundreds of short parallel sections per token.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
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

 private:
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
};

}  // namespace infera::cpu
