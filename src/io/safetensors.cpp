#include "io/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>

#include "core/json_limits.h"
#include "infera/error.h"

namespace infera::io {

namespace {

using nlohmann::json;

// Deeper nesting than this cannot be a safetensors header (real ones nest 3 levels); stopping early
// bounds the work and memory a hostile header can demand.
constexpr int kMaxHeaderDepth = 16;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw FormatError(origin + ": " + what);
}

[[noreturn]] void fail_tensor(const std::string& origin, const std::string& name,
                              const std::string& what) {
  throw FormatError(origin + ": tensor " + name + ": " + what);
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

json parse_header_json(const uint8_t* begin, size_t length, const std::string& origin) {
  const std::string_view text(reinterpret_cast<const char*>(begin), length);
  return parse_json_capped<json>(text, origin + ": safetensors header", kMaxHeaderDepth);
}

// A non-negative JSON integer that fits int64. Floats ("2.0"), negatives, booleans and strings
// are rejected: a shape or offset that is not an exact count is a corrupt file, not a rounding.
std::optional<uint64_t> as_count(const json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return u;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0)
    return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

std::string offsets_str(uint64_t b, uint64_t e) {
  // Appends rather than `"[" + to_string(b) + ...`: the latter trips GCC 12's false-positive
  // -Wrestrict (GCC bug 105329) in Release builds.
  std::string s = "[";
  s += std::to_string(b);
  s += ", ";
  s += std::to_string(e);
  s += "]";
  return s;
}

SafetensorsEntry parse_entry(const std::string& name, const json& v, uint64_t data_size,
                             const std::string& origin) {
  if (!v.is_object()) fail_tensor(origin, name, "header entry is not a JSON object");
  SafetensorsEntry entry;
  entry.name = name;

  const auto dt = v.find("dtype");
  if (dt == v.end()) fail_tensor(origin, name, "missing 'dtype'");
  if (!dt->is_string()) fail_tensor(origin, name, "'dtype' is not a string");
  const auto& dtype_str = dt->get_ref<const std::string&>();
  const auto dtype = safetensors_dtype(dtype_str);
  if (!dtype) fail_tensor(origin, name, "unsupported dtype '" + dtype_str + "'");
  entry.dtype = *dtype;

  const auto sh = v.find("shape");
  if (sh == v.end()) fail_tensor(origin, name, "missing 'shape'");
  if (!sh->is_array()) fail_tensor(origin, name, "'shape' is not an array");
  if (sh->size() > static_cast<size_t>(kMaxDims))
    fail_tensor(origin, name,
                "rank " + std::to_string(sh->size()) + " exceeds the supported " +
                    std::to_string(kMaxDims));
  for (const auto& d : *sh) {
    const auto n = as_count(d);
    if (!n)
      fail_tensor(origin, name,
                  "shape " + sh->dump() + " has a negative, non-integer or too large dimension");
    entry.shape.dims[static_cast<size_t>(entry.shape.rank++)] = static_cast<int64_t>(*n);
  }
  // Core's checked arithmetic (the one place it lives) rejects [2^40, 2^40], which would wrap to a
  // small product that "matches" a small byte range, and [0, 2^40, 2^40], whose zero makes the
  // byte count 0 while row widths and strides computed from it would still overflow.
  uint64_t nbytes = 0;
  try {
    nbytes = shape_nbytes(entry.dtype, entry.shape);
  } catch (const InvalidArgument&) {
    fail_tensor(origin, name,
                "shape " + sh->dump() + " is too large (its non-zero dimensions multiply past " +
                    "2^63-1 elements or bytes)");
  }

  const auto off = v.find("data_offsets");
  if (off == v.end()) fail_tensor(origin, name, "missing 'data_offsets'");
  if (!off->is_array() || off->size() != 2)
    fail_tensor(origin, name, "'data_offsets' is not an array of two integers");
  const auto b = as_count((*off)[0]);
  const auto e = as_count((*off)[1]);
  if (!b || !e)
    fail_tensor(origin, name, "data_offsets " + off->dump() + " are not integers in [0, 2^63)");
  entry.begin = *b;
  entry.end = *e;
  if (entry.begin > entry.end)
    fail_tensor(origin, name,
                "data_offsets " + offsets_str(entry.begin, entry.end) + " begin after end");
  if (entry.end > data_size)
    fail_tensor(origin, name,
                "data_offsets " + offsets_str(entry.begin, entry.end) +
                    " run past the data region of " + std::to_string(data_size) +
                    " bytes (file truncated?)");
  if (entry.end - entry.begin != nbytes)
    fail_tensor(origin, name,
                "data_offsets " + offsets_str(entry.begin, entry.end) + " span " +
                    std::to_string(entry.end - entry.begin) + " bytes, but " +
                    std::string(dtype_name(entry.dtype)) + " " + entry.shape.str() + " needs " +
                    std::to_string(nbytes));
  return entry;
}

struct AlignedDelete {
  std::align_val_t align;
  void operator()(void* p) const { ::operator delete(p, align); }
};

}  // namespace

std::optional<DType> safetensors_dtype(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  if (name == "I32") return DType::I32;
  return std::nullopt;
}

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& origin) {
  if (size < 8)
    fail(origin, "file is " + std::to_string(size) +
                     " bytes, shorter than the 8-byte safetensors header length");
  const uint64_t header_len = read_u64_le(data);
  if (header_len > kMaxSafetensorsHeaderBytes)
    fail(origin, "safetensors header length " + std::to_string(header_len) + " exceeds the " +
                     std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  if (header_len > size - 8)
    fail(origin, "safetensors header length " + std::to_string(header_len) +
                     " runs past the end of the file (" + std::to_string(size) + " bytes)");

  SafetensorsHeader header;
  header.data_start = 8 + header_len;
  const uint64_t data_size = size - header.data_start;

  const json root = parse_header_json(data + 8, header_len, origin);
  if (!root.is_object()) fail(origin, "safetensors header is not a JSON object");

  header.entries.reserve(root.size());
  for (const auto& [name, value] : root.items()) {
    if (name == "__metadata__") {
      // Free-form string map in the format; we only insist it is an object, we never read it.
      if (!value.is_object()) fail(origin, "__metadata__ is not a JSON object");
      continue;
    }
    header.entries.push_back(parse_entry(name, value, data_size, origin));
  }

  // Overlap check: after sorting by begin, each tensor must start at or after the furthest end
  // seen so far. Overlapping tensors would alias memory that kernels treat as independent.
  std::sort(header.entries.begin(), header.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t max_end = 0;
  const SafetensorsEntry* max_end_entry = nullptr;
  for (const auto& entry : header.entries) {
    if (max_end_entry != nullptr && entry.begin < max_end)
      fail_tensor(origin, entry.name,
                  "data_offsets " + offsets_str(entry.begin, entry.end) + " overlap tensor " +
                      max_end_entry->name + " " +
                      offsets_str(max_end_entry->begin, max_end_entry->end));
    if (max_end_entry == nullptr || entry.end >= max_end) {
      max_end = entry.end;
      max_end_entry = &entry;
    }
  }
  return header;
}

std::vector<Tensor> read_safetensors(const uint8_t* data, size_t size, const std::string& origin,
                                     const std::shared_ptr<void>& owner) {
  const SafetensorsHeader header = parse_safetensors(data, size, origin);
  std::vector<Tensor> tensors;
  tensors.reserve(header.entries.size());
  for (const auto& entry : header.entries) {
    const uint8_t* src = data + header.data_start + entry.begin;
    const size_t nbytes = static_cast<size_t>(entry.end - entry.begin);
    const size_t elem = dtype_bytes(entry.dtype, 1);
    // The format does not require alignment (the header length N is arbitrary), but our kernels
    // load bf16/f32 through typed pointers, and a misaligned typed load is undefined behaviour
    // (and slow or faulting on some targets). Writers (the reference safetensors library) pad the
    // header to 8 bytes so this copy is rare; when it happens it costs one tensor's memory.
    if (nbytes > 0 && reinterpret_cast<uintptr_t>(src) % elem != 0) {
      constexpr std::align_val_t kAlign{64};
      std::shared_ptr<void> buffer(::operator new(nbytes, kAlign), AlignedDelete{kAlign});
      std::memcpy(buffer.get(), src, nbytes);
      tensors.emplace_back(entry.name, entry.dtype, entry.shape, Device::CPU, buffer.get(), buffer);
      continue;
    }
    // The mapping is read-only; Tensor's pointer is non-const only because the same type also
    // describes writable activations. Writing through it faults (PROT_READ).
    tensors.emplace_back(entry.name, entry.dtype, entry.shape, Device::CPU,
                         const_cast<uint8_t*>(src), owner);
  }
  return tensors;
}

}  // namespace infera::io
