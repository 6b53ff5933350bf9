#include "backend/cpu/decode_prefetch.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

#include "infera/error.h"

namespace infera::cpu {

namespace {
constexpr int64_t kMaxIdlePrefetchBytes = int64_t{8} << 20;  // past any L2

int64_t checked_bytes(int64_t bytes, const char* what) {
  if (bytes < 0 || bytes > kMaxIdlePrefetchBytes)
    throw InvalidArgument(std::string(what) + " must be in [0, " +
                          std::to_string(kMaxIdlePrefetchBytes >> 10) + "] KiB");
  return bytes;
}

std::atomic<int64_t>& idle_prefetch_setting() {
  static std::atomic<int64_t> bytes{[] {
    const char* env = std::getenv("INFERA_CPU_IDLE_PREFETCH_KIB");
    if (!env || !*env) return kDefaultIdlePrefetchBytes;
    char* end = nullptr;
    const long long kib = std::strtoll(env, &end, 10);
    if (*end != '\0' || kib < 0 || kib > (kMaxIdlePrefetchBytes >> 10))
      throw InvalidArgument("INFERA_CPU_IDLE_PREFETCH_KIB=" + std::string(env) +
                            ": expected an integer number of KiB in [0, " +
                            std::to_string(kMaxIdlePrefetchBytes >> 10) + "]");
    return static_cast<int64_t>(kib) << 10;
  }()};
  return bytes;
}
}  // namespace

int64_t decode_idle_prefetch_bytes() { return idle_prefetch_setting().load(); }

void set_decode_idle_prefetch_bytes(int64_t bytes) {
  idle_prefetch_setting().store(checked_bytes(bytes, "the idle prefetch"));
}

DecodePrefetch::DecodePrefetch(ThreadPool& pool) : pool_(pool) {
  entries_.reserve(1024);  // a model's decode GEMVs, so that learning them does not rehash
}

void DecodePrefetch::before_gemv(std::span<const GemvWeight> weights, int64_t slices) {
  const int64_t budget = decode_idle_prefetch_bytes();
  if (weights.empty() || slices <= 0 || pool_.size() < 2) {
    pool_.publish_prefetch(nullptr, 0);
    last_ = nullptr;
    return;
  }
  Entry& e = entries_[weights[0].base];
  if (!e.own || e.rows != weights[0].rows || e.row_bytes != weights[0].row_bytes ||
      e.slices != slices) {
    e.rows = weights[0].rows;
    e.row_bytes = weights[0].row_bytes;
    e.slices = slices;
    // Thread t's first slice of every weight in the order the GEMV reads them, then its second
    // (slice t + threads, in case it takes that one first). Within a slice the GEMV advances its
    // streams together, so the plan takes kPiece bytes of each stream in turn: the prefix it
    // prefetches is the one the GEMV reads first.
    constexpr int64_t kPiece = 8192;
    ThreadPool::PrefetchPlan plan(static_cast<size_t>(pool_.size()));
    for (int64_t t = 0; t < pool_.size(); ++t) {
      std::vector<ThreadPool::PrefetchRange>& ranges = plan[static_cast<size_t>(t)];
      int64_t total = 0;
      const auto at = [](const GemvWeight& w, int64_t row) {
        return static_cast<const char*>(w.base) +
               static_cast<int64_t>(static_cast<double>(row) * w.row_bytes);
      };
      for (int64_t s = t; s < std::min<int64_t>(slices, t + 2 * pool_.size()); s += pool_.size())
        for (const GemvWeight& w : weights) {
          const int64_t r0 = w.first_row + w.rows * s / slices;
          const int64_t r1 = w.first_row + w.rows * (s + 1) / slices;
          const int streams = std::max(w.streams, 1);
          for (int64_t depth = 0; total < kMaxIdlePrefetchBytes; depth += kPiece) {
            bool any = false;
            for (int j = 0; j < streams; ++j) {
              const char* begin = at(w, r0 + (r1 - r0) * j / streams) + depth;
              const char* end = at(w, r0 + (r1 - r0) * (j + 1) / streams);
              if (begin >= end) continue;
              const int64_t bytes = std::min<int64_t>(kPiece, end - begin);
              ranges.push_back({begin, bytes});
              total += bytes;
              any = true;
            }
            if (!any) break;
          }
        }
    }
    e.own = pool_.add_prefetch_plan(std::move(plan));
  }
  if (last_ && last_ != &e) last_->next = e.own;
  pool_.publish_prefetch(e.next, budget);
  last_ = &e;
}

}  // namespace infera::cpu
