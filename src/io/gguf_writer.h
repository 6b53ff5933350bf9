// Writes GGUF version 3 files (layout in gguf.h) that llama.cpp and the `gguf` Python package
// read: metadata in the order added, tensor infos, then each tensor's data at a multiple of the
// alignment (32, llama.cpp's default). Tensor data is produced one tensor at a time while writing,
// so a whole quantized model never has to sit in memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "infera/tensor.h"
#include "io/gguf.h"

namespace infera::io {

class GgufWriter {
 public:
  // Fills `out` (already sized to dtype_bytes(dtype, numel)) with the tensor's bytes.
  using Producer = std::function<void(std::vector<uint8_t>& out)>;

  void set(const std::string& key, GgufValue value);  // replaces an existing key in place
  // `shape` row-major (outermost first), written innermost first as GGUF wants. The row length
  // must be whole blocks of `dtype`.
  void add_tensor(const std::string& name, DType dtype, const Shape& shape, Producer produce);

  // Writes to `path` (through a temporary file renamed at the end, so a failed write never leaves
  // a truncated model behind). Throws IoError naming the path.
  void write(const std::filesystem::path& path) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t nbytes;
    Producer produce;
  };
  void write_to(const std::filesystem::path& file) const;
  static constexpr uint64_t kAlignment = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace infera::io
