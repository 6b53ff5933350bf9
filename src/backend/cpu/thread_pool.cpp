#include "backend/cpu/thread_pool.h"

#include <algorithm>

namespace infera::cpu {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  prefetched_ = std::vector<std::atomic<int64_t>>(static_cast<size_t>(threads));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(int index) {
  if (index < job_chunks_) {
    const int64_t per = (job_n_ + job_chunks_ - 1) / job_chunks_;
    const int64_t begin = per * index;
    const int64_t end = std::min(job_n_, begin + per);
    if (begin < end) {
      try {
        (*job_)(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }
}

const ThreadPool::PrefetchPlan* ThreadPool::add_prefetch_plan(PrefetchPlan plan) {
  return &prefetch_plans_.emplace_back(std::move(plan));
}

void ThreadPool::publish_prefetch(const PrefetchPlan* plan, int64_t budget) {
  prefetch_budget_.store(plan ? budget : 0, std::memory_order_relaxed);
  prefetch_plan_.store(budget > 0 ? plan : nullptr, std::memory_order_release);
  prefetch_serial_.fetch_add(1, std::memory_order_acq_rel);
}

int64_t ThreadPool::prefetched_bytes(int index) const {
  return prefetched_.at(static_cast<size_t>(index)).load(std::memory_order_relaxed);
}

bool ThreadPool::prefetch_step(int index, PrefetchCursor& c) {
  constexpr int64_t kStep = 4096, kLine = 64;
  const uint64_t serial = prefetch_serial_.load(std::memory_order_acquire);
  if (serial != c.serial) c = {serial, 0, 0, 0};
  const PrefetchPlan* plan = prefetch_plan_.load(std::memory_order_acquire);
  const int64_t budget = prefetch_budget_.load(std::memory_order_relaxed);
  if (!plan || static_cast<size_t>(index) >= plan->size() || c.done >= budget) return false;
  const std::vector<PrefetchRange>& ranges = (*plan)[static_cast<size_t>(index)];
  while (c.range < ranges.size() && c.offset >= ranges[c.range].bytes) {
    ++c.range;
    c.offset = 0;
  }
  if (c.range >= ranges.size()) return false;
  const char* p = ranges[c.range].begin + c.offset;
  const int64_t n = std::min({kStep, ranges[c.range].bytes - c.offset, budget - c.done});
  for (int64_t i = 0; i < n; i += kLine) __builtin_prefetch(p + i, 0, 3);
  c.offset += n;
  c.done += n;
  prefetched_[static_cast<size_t>(index)].fetch_add(n, std::memory_order_relaxed);
  return true;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  PrefetchCursor cursor;
  for (;;) {
    // Spin a little: the next parallel section usually follows within microseconds. Idle spins
    // prefetch what this thread reads next, if anything is published.
    for (int spin = 0; spin < 20000 && generation_.load(std::memory_order_acquire) == seen;)
      if (!prefetch_step(index, cursor)) {
        std::this_thread::yield();
        ++spin;
      }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_.load() != seen; });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    run_chunk(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int chunks = static_cast<int>(std::min<int64_t>(size(), (n + grain - 1) / grain));
  if (chunks <= 1 || workers_.empty()) {
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_chunks_ = chunks;
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
  wake_.notify_all();
  run_chunk(0);
  while (pending_.load(std::memory_order_acquire) != 0)
    if (!prefetch_step(0, caller_cursor_)) std::this_thread::yield();
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::parallel_items(int64_t items, FunctionRef<void(int64_t)> fn) {
  if (items <= 0) return;
  std::atomic<int64_t> next{0};
  parallel_for(std::min<int64_t>(size(), items), 1, [&](int64_t, int64_t) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < items;
         i = next.fetch_add(1, std::memory_order_relaxed))
      fn(i);
  });
}

}  // namespace infera::cpu
