// A stable 64-bit content hash (FNV-1a), for fingerprints such as "which model config was this
// run on": identical on every platform and build, unlike std::hash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace infera::bench {

constexpr uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV offset basis
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;  // FNV prime
  }
  return h;
}

// "fnv1a64:0123456789abcdef"
std::string fnv1a64_hex(std::string_view bytes);

}  // namespace infera::bench
