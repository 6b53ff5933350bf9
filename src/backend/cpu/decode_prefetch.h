// Decode GEMVs stream every weight once per token, and between them the threads do other work:
// the caller quantizes activations, norms, RoPE and cache writes while the workers wait; both run
// the attention; whichever finishes its rows first waits for the other. Memory idles then. This
// predictor publishes, at the start of each decode GEMV, what the GEMV after it read last time
// (the first slice of its rows each thread will take, ThreadPool::publish_prefetch), so that the
// idle moments pull those bytes into the cache ahead of the GEMV that needs them. A decode step
// runs the same GEMVs in the same order as the step before, so the learned successor is right
// from the second step on; a wrong one only costs the prefetches. Nothing here changes a result.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>

#include "backend/cpu/thread_pool.h"

namespace infera::cpu {

// Bytes each thread prefetches for the next decode GEMV (0: off). INFERA_CPU_IDLE_PREFETCH_KIB
// (an integer in [0, 8192] KiB, read once; anything else throws InvalidArgument naming it) or
// kDefaultIdlePrefetchBytes.
constexpr int64_t kDefaultIdlePrefetchBytes = int64_t{512} << 10;
int64_t decode_idle_prefetch_bytes();
void set_decode_idle_prefetch_bytes(int64_t bytes);  // tests, benchmarks; same range

// Rows [first_row, first_row + rows) of a weight whose row r starts near base + r * row_bytes
// (row groups and bf16 pairs keep a row's bytes where its row index says, give or take a group),
// which the GEMV reads as `streams` equal parts of each thread's slice in lockstep.
struct GemvWeight {
  const void* base;
  int64_t first_row, rows;
  double row_bytes;
  int streams = 1;
};

class DecodePrefetch {
 public:
  explicit DecodePrefetch(ThreadPool& pool);
  // Before a decode GEMV over `weights` whose rows are cut into `slices` slices (thread t takes
  // slice t first): learns that this GEMV followed the previous one and publishes the plan of the
  // one that followed it last time. Allocates only the first time it sees a GEMV (or a weight of
  // another shape at a freed one's address: its plan is made again).
  void before_gemv(std::span<const GemvWeight> weights, int64_t slices);

 private:
  struct Entry {
    const ThreadPool::PrefetchPlan* own = nullptr;   // this GEMV's first slices, per thread
    const ThreadPool::PrefetchPlan* next = nullptr;  // the plan of the GEMV that came after it
    int64_t rows = 0, slices = 0;                    // what `own` was made for
    double row_bytes = 0;
  };
  ThreadPool& pool_;
  std::unordered_map<const void*, Entry> entries_;  // by the first weight's bytes
  Entry* last_ = nullptr;
};

}  // namespace infera::cpu
