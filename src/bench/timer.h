// Wall-clock timing for benchmarks: a monotonic stopwatch. Every benchmark times its stages
// (load, prepare, forward, postprocess) with this one clock so the numbers compare.
#pragma once

#include <chrono>

namespace infera::bench {

class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  // Seconds since the last lap (or the start), then starts the next lap: times consecutive
  // stages with one clock read between them.
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(now - start_).count();
    start_ = now;
    return s;
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace infera::bench
