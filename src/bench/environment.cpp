#include "bench/environment.h"

#include <hwy/highway.h>  // HWY_MAJOR/MINOR/PATCH
#include <sys/utsname.h>

#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/build_info.h"  // generated: see cmake/build_info.cmake
#include "bench/machine_probe.h"

namespace infera::bench {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The value of the first "key : value" line of /proc/cpuinfo.
std::string cpuinfo_field(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(name.find_last_not_of(" \t") + 1);
    if (name != key) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

// The SIMD extensions that decide which kernels can run (x86 names as /proc/cpuinfo spells them).
nlohmann::json simd_flags() {
  static const char* const kRelevant[] = {
      "sse4_2",   "avx",      "avx2",        "fma",         "f16c",     "avx512f",
      "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx_vnni", "avx512_fp16",
      "amx_tile", "amx_bf16", "amx_int8",    "asimd",       "sve",      "i8mm"};
  // x86 lists them under "flags", Arm under "Features".
  std::set<std::string> present;
  for (const char* field : {"flags", "Features"}) {
    std::istringstream words(cpuinfo_field(field));
    std::string word;
    while (words >> word) present.insert(word);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const char* f : kRelevant)
    if (present.count(f)) out.push_back(f);
  return out;
}

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t"));
  s.erase(s.find_last_not_of(" \t") + 1);
  return s;
}

// "[always] madvise never" -> "always"
std::string bracketed_choice(const std::string& line) {
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return line;
  return line.substr(open + 1, close - open - 1);
}

int64_t meminfo_total_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kib = -1;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      return kib * 1024;
    }
    in.ignore(1 << 10, '\n');
  }
  return -1;
}

// "32768K" / "2M" -> bytes
int64_t parse_cache_size(const std::string& text) {
  try {
    size_t used = 0;
    int64_t v = std::stoll(text, &used);
    const char unit = used < text.size() ? text[used] : ' ';
    if (unit == 'K') v *= 1024;
    if (unit == 'M') v *= 1024 * 1024;
    return v;
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

int64_t last_level_cache_bytes() {
  int best_level = 0;
  int64_t bytes = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = read_first_line(dir + "level");
    if (level.empty()) continue;
    const std::string type = read_first_line(dir + "type");
    if (type == "Instruction") continue;
    const int l = std::atoi(level.c_str());
    if (l >= best_level) {
      best_level = l;
      bytes = parse_cache_size(read_first_line(dir + "size"));
    }
  }
  return bytes;
}

std::string utc_timestamp() {
  char text[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

nlohmann::json capture_environment() {
  utsname un{};
  uname(&un);
  std::string cpu = cpuinfo_field("model name");
  if (cpu.empty()) cpu = cpuinfo_field("Model");
  const std::string dirty = INFERA_GIT_DIRTY;
  return {
      {"created_utc", utc_timestamp()},
      {"git_revision", INFERA_GIT_REVISION},
      {"git_dirty", dirty == "true"    ? nlohmann::json(true)
                    : dirty == "false" ? nlohmann::json(false)
                                       : nlohmann::json(nullptr)},
      {"compiler", INFERA_COMPILER},
      {"cxx_flags", trim(INFERA_CXX_FLAGS)},
      {"build_type", INFERA_BUILD_TYPE},
      {"highway_version", std::to_string(HWY_MAJOR) + "." + std::to_string(HWY_MINOR) + "." +
                              std::to_string(HWY_PATCH)},
      {"cpu_model", cpu},
      {"logical_cpus", std::thread::hardware_concurrency()},
      {"cpu_simd_flags", simd_flags()},
      {"simd_dispatch_target", simd_target_name()},
      {"last_level_cache_bytes", last_level_cache_bytes()},
      {"memory_total_bytes", meminfo_total_bytes()},
      {"transparent_hugepages",
       bracketed_choice(read_first_line("/sys/kernel/mm/transparent_hugepage/enabled"))},
      {"os", std::string(un.sysname) + " " + un.release + " " + un.machine},
  };
}

}  // namespace infera::bench
