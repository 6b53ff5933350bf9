// Parsing and validation of one safetensors buffer (normally an mmapped file). Kept apart from
// WeightStore so that the parser can be exercised on plain memory buffers (fuzz tests, where an
// exact-size heap buffer lets AddressSanitizer catch any read past the end).
//
// Layout: u64 little-endian header length N, N bytes of JSON header, then the data region.
// Header: {"NAME": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {...}}; offsets are relative to the data region (byte 8 + N).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "infera/tensor.h"

namespace infera::io {

// Headers above this size are rejected before parsing: real ones are a few hundred KB even for
// models with tens of thousands of tensors, and a hostile length must not make us parse gigabytes.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull * 1024 * 1024;

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // relative to the data region
  uint64_t end = 0;
};

struct SafetensorsHeader {
  uint64_t data_start = 0;                // 8 + N: absolute offset of the data region
  std::vector<SafetensorsEntry> entries;  // sorted by begin, validated, non-overlapping
};

// The dtypes we can hand to kernels. Returns nullopt for any other safetensors dtype string.
std::optional<DType> safetensors_dtype(std::string_view name);

// Validates everything about the header against a buffer of `size` bytes: every entry's dtype,
// shape, offsets and byte size, and that no two tensors overlap. Throws FormatError naming
// `origin` (and the tensor, where there is one). Never reads outside [data, data + size).
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& origin);

// parse_safetensors() plus Tensors (Device::CPU) that point into `data`, kept alive by `owner`.
// A tensor whose address is not aligned to its element size is copied into an owned, aligned
// buffer (see the .cpp for why).
std::vector<Tensor> read_safetensors(const uint8_t* data, size_t size, const std::string& origin,
                                     const std::shared_ptr<void>& owner);

}  // namespace infera::io
