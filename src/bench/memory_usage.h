// Resident memory of this process, from /proc/self/status (Linux).
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

}  // namespace infera::bench
