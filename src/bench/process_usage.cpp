#include "bench/process_usage.h"

#include <sys/resource.h>

#include <cmath>
#include <ctime>
#include <fstream>
#include <string>

namespace infera::bench {
namespace {

// The value of a "Name:   123 kB" line of /proc/self/status, in bytes; -1 if absent.
int64_t status_kib_field(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    try {
      return std::stoll(line.substr(field.size() + 1)) * 1024;
    } catch (const std::exception&) {
      return -1;
    }
  }
  return -1;
}

}  // namespace

int64_t peak_rss_bytes() {
  const int64_t hwm = status_kib_field("VmHWM");
  if (hwm >= 0) return hwm;
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

int64_t current_rss_bytes() { return status_kib_field("VmRSS"); }

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double process_cpu_seconds() {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return NAN;
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double load_average_1min() {
  std::ifstream in("/proc/loadavg");
  double load = NAN;
  if (!(in >> load)) return NAN;
  return load;
}

}  // namespace infera::bench
