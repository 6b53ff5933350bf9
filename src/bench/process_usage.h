// What this process uses (resident memory, CPU time) and how busy the machine is: on a shared
// machine, the CPU a run actually got says how far its timings can be trusted.
#pragma once

#include <cstdint>

namespace infera::bench {

// Peak resident set size (VmHWM) in bytes; falls back to getrusage's ru_maxrss; -1 if unknown.
int64_t peak_rss_bytes();
// Current resident set size (VmRSS) in bytes; -1 if unknown.
int64_t current_rss_bytes();
// Resets the peak to the current RSS (writes "5" to /proc/self/clear_refs, Linux >= 4.0), so a
// measurement probe's scratch buffer does not count as the workload's peak. False if refused.
bool reset_peak_rss();

// User + system CPU seconds of every thread of this process so far.
double process_cpu_seconds();
// The 1-minute load average (runnable threads, all processes); NaN if unknown.
double load_average_1min();

}  // namespace infera::bench
