// Read-only memory map of a whole file. Weights are used in place from this mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace infera::io {

class MappedFile {
 public:
  // Throws IoError naming the path when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace infera::io
