// Where tests find ../shared (fixtures, the Qwen3-0.6B tokenizer and config).
#pragma once

#include <cstdlib>
#include <filesystem>

namespace infera::test {

inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("INFERA_SHARED_DIR"); env && *env) return env;
  return std::filesystem::path(INFERA_SOURCE_DIR) / ".." / "shared";
}

inline std::filesystem::path fixture(const std::string& name) {
  return shared_dir() / "fixtures" / name;
}

}  // namespace infera::test
