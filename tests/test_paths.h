// Where tests find ../shared (fixtures, the Qwen3-0.6B tokenizer and config).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace infera::test {

// The repository (tests/data, models/): the build's source tree, or $INFERA_SOURCE_DIR for a test
// binary run on another machine over a copy of the tree (the GPU machine).
inline std::filesystem::path source_dir() {
  if (const char* env = std::getenv("INFERA_SOURCE_DIR"); env && *env) return env;
  return INFERA_SOURCE_DIR;
}

inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("INFERA_SHARED_DIR"); env && *env) return env;
  return source_dir() / ".." / "shared";
}

inline std::filesystem::path fixture(const std::string& name) {
  return shared_dir() / "fixtures" / name;
}

}  // namespace infera::test
