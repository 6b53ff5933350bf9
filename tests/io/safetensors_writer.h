// A tiny safetensors writer for tests: builds well-formed files from named tensors, and lets a test
// hand-write the header JSON (or the header length) to produce the malformed files the loader must
// reject. Header-only so that model tests can reuse it.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "infera/tensor.h"

namespace infera::test {

using Bytes = std::vector<uint8_t>;

// u64 little-endian length + header text + data, with no checks at all (for malformed files).
inline Bytes raw_safetensors(const std::string& header, const Bytes& data, uint64_t header_len) {
  Bytes out;
  out.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(header_len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}
inline Bytes raw_safetensors(const std::string& header, const Bytes& data) {
  return raw_safetensors(header, data, header.size());
}

inline void write_bytes(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  write_bytes(path, Bytes(text.begin(), text.end()));
}

inline Bytes read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Well-formed files: tensors laid out back to back in insertion order.
class SafetensorsWriter {
 public:
  SafetensorsWriter& add(const std::string& name, const std::string& dtype,
                         const std::vector<int64_t>& shape, const Bytes& bytes) {
    header_[name] = {{"dtype", dtype},
                     {"shape", shape},
                     {"data_offsets", {data_.size(), data_.size() + bytes.size()}}};
    data_.insert(data_.end(), bytes.begin(), bytes.end());
    return *this;
  }

  // Copies a host tensor (e.g. one loaded from a fixture) into this file.
  SafetensorsWriter& add(const Tensor& t) {
    std::vector<int64_t> shape(t.shape().dims.begin(), t.shape().dims.begin() + t.rank());
    const auto* p = static_cast<const uint8_t*>(t.data());
    return add(t.name(), std::string(dtype_name(t.dtype())), shape, Bytes(p, p + t.nbytes()));
  }

  SafetensorsWriter& add_f32(const std::string& name, const std::vector<int64_t>& shape,
                             const std::vector<float>& values) {
    Bytes b(values.size() * 4);
    std::memcpy(b.data(), values.data(), b.size());
    return add(name, "F32", shape, b);
  }

  SafetensorsWriter& metadata(const nlohmann::json& m) {
    header_["__metadata__"] = m;
    return *this;
  }

  // `pad_to`: the header is space-padded so that the data region starts at a multiple of it, as
  // the reference writer does (8). Pass 1 for no padding (to produce misaligned data).
  Bytes build(size_t pad_to = 8) const {
    std::string header = header_.empty() ? "{}" : header_.dump();
    while ((8 + header.size()) % pad_to != 0) header.push_back(' ');
    return raw_safetensors(header, data_);
  }

  void write(const std::filesystem::path& path, size_t pad_to = 8) const {
    write_bytes(path, build(pad_to));
  }

  nlohmann::json& header() { return header_; }
  Bytes& data() { return data_; }

 private:
  nlohmann::json header_ = nlohmann::json::object();
  Bytes data_;
};

// A fresh folder under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto stamp = std::chrono::steady_clock::now().time_since_epoch().count();
    path_ = std::filesystem::temp_directory_path() /
            ("infera-test-" + std::to_string(::getpid()) + "-" + std::to_string(stamp) + "-" +
             std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace infera::test
