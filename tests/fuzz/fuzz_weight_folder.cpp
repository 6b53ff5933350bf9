// A model folder on disk, through WeightStore::open_folder: the input is split at "\n--8<--\n"
// into model.safetensors.index.json and shards a.safetensors, b.safetensors, ... (without a
// separator it is written as model.safetensors). Covers the index checks (shard names are joined
// onto the folder: a path that escapes it must be refused), mmap, and cross-shard validation.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.h"
#include "infera/error.h"
#include "io/weight_store.h"

using namespace infera;
namespace fs = std::filesystem;

namespace {

// One folder per process, emptied before each input (tmpfs when the machine has it) and removed
// when the process exits normally.
struct Folder {
  fs::path path;
  Folder() {
    const fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    path = base / ("infera-fuzz-folder-" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~Folder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

const fs::path& folder() {
  static const Folder dir;
  return dir.path;
}

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fs::path& dir = folder();
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove_all(entry.path());
  const auto parts =
      fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), "\n--8<--\n");
  if (parts.size() == 1) {
    write(dir / "model.safetensors", parts[0]);
  } else {
    write(dir / "model.safetensors.index.json", parts[0]);
    for (size_t i = 1; i < parts.size() && i <= 26; ++i)
      write(dir / (std::string(1, static_cast<char>('a' + i - 1)) + ".safetensors"), parts[i]);
  }
  try {
    const auto store = io::WeightStore::open_folder(dir);
    size_t total = 0;
    for (const auto& name : store.names()) {
      const Tensor& t = store.get(name);
      const auto* p = static_cast<const uint8_t*>(t.data());
      unsigned sum = 0;
      for (size_t k = 0; k < t.nbytes(); ++k) sum += p[k];  // every byte handed out is mapped
      volatile unsigned sink = sum;
      (void)sink;
      total += t.nbytes();
    }
    fuzz::check(total == store.total_bytes(), "total_bytes() differs from the sum of nbytes()");
  } catch (const Error&) {
  }
  return 0;
}
