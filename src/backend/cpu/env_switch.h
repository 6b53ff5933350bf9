// The CPU backend's on/off settings read from the environment (once, by each setting's owner).
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "infera/error.h"

namespace infera::cpu {

// `name` as 1 (true) or 0 (false); unset or empty: `fallback`; anything else throws
// InvalidArgument naming the variable and its value.
inline bool on_off_from_env(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  if (std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  throw InvalidArgument(std::string(name) + " must be 0 or 1, not '" + v + "'");
}

}  // namespace infera::cpu
