// GGUF (llama.cpp's model file format), versions 2 and 3, little-endian:
//   magic "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: (string key, u32 value type, value)*, tensor infos: (string name, u32 n_dims,
//   u64 dims[n_dims] innermost first, u32 ggml type, u64 offset)*, padding to general.alignment
//   (default 32), then the tensor data; strings are u64 length + bytes, arrays u32 element type +
//   u64 count + elements.
// The file is untrusted: every count, length, offset and size is checked against the bytes that
// remain before anything is allocated or read, and every failure is a FormatError naming the file
// and the field (or key, or tensor) at fault.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "infera/tensor.h"

namespace infera::io {

enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
const char* gguf_type_name(GgufType type);

// One metadata value. Scalars keep their declared type; integers are held in `uint` (unsigned
// types, bool) or `sint` (signed types), floats in `real`. An array keeps its element type and
// its elements in the member for that kind (nested arrays in `arrays`).
struct GgufValue {
  GgufType type = GgufType::UINT32;
  uint64_t uint = 0;
  int64_t sint = 0;
  double real = 0.0;
  std::string str;
  GgufType elem_type = GgufType::UINT32;  // arrays only
  std::vector<uint64_t> uints;            // UINT*, BOOL elements
  std::vector<int64_t> sints;             // INT* elements
  std::vector<double> reals;              // FLOAT* elements
  std::vector<std::string> strings;       // STRING elements
  std::vector<GgufValue> arrays;          // ARRAY elements

  // Any integer type whose value fits int64 (nullopt otherwise, including non-integers).
  std::optional<int64_t> as_int() const;
  std::optional<double> as_float() const;  // FLOAT32/FLOAT64 or an integer
  size_t array_size() const;

  static GgufValue u32(uint32_t v);
  static GgufValue i32(int32_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue string_array(std::vector<std::string> v);
  static GgufValue i32_array(const std::vector<int32_t>& v);
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // as stored: innermost (row length) first
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;
  Shape shape;          // row-major, outermost first (dims reversed): [out, in] for a weight
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
};

struct GgufFile {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;       // absolute start of the data section
  std::vector<std::string> keys;  // in file order
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;  // in file order

  const GgufValue* find(const std::string& key) const;
};

// ggml type ids <-> our dtypes. Unknown or unsupported ids give nullopt.
std::optional<DType> dtype_from_ggml_type(uint32_t ggml_type);
uint32_t ggml_type_of(DType dtype);  // InvalidArgument for I32
const char* ggml_type_name(uint32_t ggml_type);

// Limits that bound what a hostile header can make us allocate or walk.
constexpr uint64_t kGgufMaxStringBytes = 256ull << 20;  // a chat template is a few KB
constexpr int kGgufMaxArrayDepth = 4;
constexpr size_t kGgufMaxNameBytes = 64;  // GGML_MAX_NAME, as llama.cpp enforces

// Validates the whole header against a buffer of `size` bytes: every string, array, tensor info,
// the alignment, and that each tensor lies inside the file, aligned, without overlapping another.
// Never reads outside [data, data + size). `origin` names the file in errors.
GgufFile parse_gguf(const uint8_t* data, size_t size, const std::string& origin);

// parse_gguf() plus Tensors (Device::CPU, named as in the file) pointing into `data`, kept alive
// by `owner`. A tensor whose address is not aligned for its element type is copied (only possible
// with general.alignment < 4).
std::vector<Tensor> read_gguf_tensors(const GgufFile& file, const uint8_t* data, size_t size,
                                      const std::shared_ptr<void>& owner);

}  // namespace infera::io
