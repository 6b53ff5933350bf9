#include "bench/hash.h"

#include <cstdio>

namespace infera::bench {

std::string fnv1a64_hex(std::string_view bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes)));
  return std::string("fnv1a64:") + hex;
}

}  // namespace infera::bench
