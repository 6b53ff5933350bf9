#include "io/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "infera/error.h"

namespace infera::io {

namespace {

// Reads little-endian fields from [data, data + size) with a bounds check on every read. `what`
// names the field for the error message.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& origin)
      : data_(data), size_(size), origin_(origin) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(origin_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }

  void need(uint64_t bytes, const std::string& what) const {
    if (bytes > remaining())
      fail(what + ": needs " + std::to_string(bytes) + " bytes, only " +
           std::to_string(remaining()) + " remain (file truncated?)");
  }

  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // x86-64 and aarch64 are little-endian
    pos_ += sizeof(T);
    return v;
  }

  std::string string(const std::string& what) {
    const uint64_t len = read<uint64_t>(what + " length");
    if (len > kGgufMaxStringBytes)
      fail(what + ": string length " + std::to_string(len) + " exceeds the " +
           std::to_string(kGgufMaxStringBytes) + "-byte limit");
    need(len, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& origin_;
};

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Smallest encoded size of one value of `type`: bounds array counts before allocating.
uint64_t min_encoded_bytes(GgufType type) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL:
      return 1;
    case GgufType::UINT16:
    case GgufType::INT16:
      return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32:
      return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64:
    case GgufType::STRING:  // the u64 length
      return 8;
    case GgufType::ARRAY:  // u32 type + u64 count
      return 12;
  }
  return 1;
}

bool known_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

GgufType read_type(Cursor& c, const std::string& what) {
  const uint32_t t = c.read<uint32_t>(what);
  if (!known_type(t)) c.fail(what + ": unknown value type " + std::to_string(t));
  return static_cast<GgufType>(t);
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& what, int depth);

// One scalar element into the array member for its kind.
void read_scalar_into(Cursor& c, GgufType type, GgufValue& v, const std::string& what) {
  switch (type) {
    case GgufType::UINT8:
      v.uint = c.read<uint8_t>(what);
      return;
    case GgufType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
      v.uint = b;
      return;
    }
    case GgufType::INT8:
      v.sint = c.read<int8_t>(what);
      return;
    case GgufType::UINT16:
      v.uint = c.read<uint16_t>(what);
      return;
    case GgufType::INT16:
      v.sint = c.read<int16_t>(what);
      return;
    case GgufType::UINT32:
      v.uint = c.read<uint32_t>(what);
      return;
    case GgufType::INT32:
      v.sint = c.read<int32_t>(what);
      return;
    case GgufType::UINT64:
      v.uint = c.read<uint64_t>(what);
      return;
    case GgufType::INT64:
      v.sint = c.read<int64_t>(what);
      return;
    case GgufType::FLOAT32:
      v.real = c.read<float>(what);
      return;
    case GgufType::FLOAT64:
      v.real = c.read<double>(what);
      return;
    case GgufType::STRING:
      v.str = c.string(what);
      return;
    case GgufType::ARRAY:
      break;
  }
  c.fail(what + ": not a scalar type");
}

bool is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64 || t == GgufType::BOOL;
}
bool is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& what, int depth) {
  GgufValue v;
  v.type = type;
  if (type != GgufType::ARRAY) {
    read_scalar_into(c, type, v, what);
    return v;
  }
  if (depth >= kGgufMaxArrayDepth)
    c.fail(what + ": arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth));
  v.elem_type = read_type(c, what + " element type");
  const uint64_t count = c.read<uint64_t>(what + " element count");
  // Each element takes at least min_encoded_bytes: a count the file cannot hold is rejected
  // before any allocation.
  if (count > c.remaining() / min_encoded_bytes(v.elem_type))
    c.fail(what + ": array of " + std::to_string(count) + " " + gguf_type_name(v.elem_type) +
           " elements cannot fit in the " + std::to_string(c.remaining()) + " remaining bytes");
  const auto n = static_cast<size_t>(count);
  GgufValue element;
  for (size_t i = 0; i < n; ++i) {
    const std::string item = what + "[" + std::to_string(i) + "]";
    if (v.elem_type == GgufType::ARRAY) {
      v.arrays.push_back(read_value(c, GgufType::ARRAY, item, depth + 1));
      continue;
    }
    read_scalar_into(c, v.elem_type, element, item);
    if (v.elem_type == GgufType::STRING) {
      v.strings.push_back(std::move(element.str));
    } else if (is_unsigned(v.elem_type)) {
      v.uints.push_back(element.uint);
    } else if (is_signed(v.elem_type)) {
      v.sints.push_back(element.sint);
    } else {
      v.reals.push_back(element.real);
    }
  }
  return v;
}

struct AlignedDelete {
  std::align_val_t align;
  void operator()(void* p) const { ::operator delete(p, align); }
};

}  // namespace

const char* gguf_type_name(GgufType type) {
  static const char* const kNames[] = {"UINT8",  "INT8",    "UINT16", "INT16",  "UINT32",
                                       "INT32",  "FLOAT32", "BOOL",   "STRING", "ARRAY",
                                       "UINT64", "INT64",   "FLOAT64"};
  const auto i = static_cast<uint32_t>(type);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::optional<int64_t> GgufValue::as_int() const {
  if (is_signed(type)) return sint;
  if (is_unsigned(type) && type != GgufType::BOOL) {
    if (uint > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(uint);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (type == GgufType::FLOAT32 || type == GgufType::FLOAT64) return real;
  if (const auto i = as_int()) return static_cast<double>(*i);
  return std::nullopt;
}

size_t GgufValue::array_size() const {
  return uints.size() + sints.size() + reals.size() + strings.size() + arrays.size();
}

GgufValue GgufValue::u32(uint32_t x) {
  GgufValue v;
  v.type = GgufType::UINT32;
  v.uint = x;
  return v;
}
GgufValue GgufValue::i32(int32_t x) {
  GgufValue v;
  v.type = GgufType::INT32;
  v.sint = x;
  return v;
}
GgufValue GgufValue::f32(float x) {
  GgufValue v;
  v.type = GgufType::FLOAT32;
  v.real = x;
  return v;
}
GgufValue GgufValue::boolean(bool x) {
  GgufValue v;
  v.type = GgufType::BOOL;
  v.uint = x ? 1 : 0;
  return v;
}
GgufValue GgufValue::string(std::string x) {
  GgufValue v;
  v.type = GgufType::STRING;
  v.str = std::move(x);
  return v;
}
GgufValue GgufValue::string_array(std::vector<std::string> x) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = GgufType::STRING;
  v.strings = std::move(x);
  return v;
}
GgufValue GgufValue::i32_array(const std::vector<int32_t>& x) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = GgufType::INT32;
  v.sints.assign(x.begin(), x.end());
  return v;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  const auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

std::optional<DType> dtype_from_ggml_type(uint32_t ggml_type) {
  switch (ggml_type) {
    case 0:
      return DType::F32;
    case 1:
      return DType::F16;
    case 2:
      return DType::Q4_0;
    case 8:
      return DType::Q8_0;
    case 12:
      return DType::Q4_K;
    case 14:
      return DType::Q6_K;
    case 26:
      return DType::I32;
    case 30:
      return DType::BF16;
    default:
      return std::nullopt;
  }
}

uint32_t ggml_type_of(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q8_0:
      return 8;
    case DType::Q4_K:
      return 12;
    case DType::Q6_K:
      return 14;
    case DType::I32:
      return 26;
    case DType::BF16:
      return 30;
  }
  throw InvalidArgument("no ggml type for dtype " + std::string(dtype_name(dtype)));
}

const char* ggml_type_name(uint32_t t) {
  // ggml's enum ggml_type, for messages about types we do not run.
  static const char* const kNames[] = {"F32",
                                       "F16",
                                       "Q4_0",
                                       "Q4_1",
                                       "Q4_2 (removed)",
                                       "Q4_3 (removed)",
                                       "Q5_0",
                                       "Q5_1",
                                       "Q8_0",
                                       "Q8_1",
                                       "Q2_K",
                                       "Q3_K",
                                       "Q4_K",
                                       "Q5_K",
                                       "Q6_K",
                                       "Q8_K",
                                       "IQ2_XXS",
                                       "IQ2_XS",
                                       "IQ3_XXS",
                                       "IQ1_S",
                                       "IQ4_NL",
                                       "IQ3_S",
                                       "IQ2_S",
                                       "IQ4_XS",
                                       "I8",
                                       "I16",
                                       "I32",
                                       "I64",
                                       "F64",
                                       "IQ1_M",
                                       "BF16"};
  return t < std::size(kNames) ? kNames[t] : "unknown";
}

GgufFile parse_gguf(const uint8_t* data, size_t size, const std::string& origin) {
  Cursor c(data, size, origin);
  GgufFile file;
  if (c.read<uint32_t>("magic") != kMagic) c.fail("not a GGUF file (magic is not \"GGUF\")");
  file.version = c.read<uint32_t>("version");
  if (file.version == 1)
    c.fail("GGUF version 1 (32-bit counts) is not supported; convert the file again");
  if (file.version != 2 && file.version != 3) {
    // A big-endian file reads as a version with its bytes swapped (e.g. 3 -> 0x03000000).
    c.fail("unsupported GGUF version " + std::to_string(file.version) +
           (file.version > 0xffff ? " (a big-endian file?)" : ""));
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest metadata entry: 8-byte key length + 4-byte type + 1-byte value; smallest tensor
  // info: 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.remaining() / 13)
    c.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  if (n_tensors > c.remaining() / 32)
    c.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");

  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string where = "metadata entry " + std::to_string(i);
    std::string key = c.string(where + " key");
    if (key.empty()) c.fail(where + ": empty key");
    const GgufType type = read_type(c, "metadata " + key + " type");
    GgufValue value = read_value(c, type, "metadata " + key, 0);
    if (file.metadata.count(key)) c.fail("metadata key " + key + " appears twice");
    file.keys.push_back(key);
    file.metadata.emplace(std::move(key), std::move(value));
  }

  if (const GgufValue* align = file.find("general.alignment")) {
    if (align->type != GgufType::UINT32)
      c.fail(std::string("metadata general.alignment: expected UINT32, got ") +
             gguf_type_name(align->type));
    if (align->uint == 0 || (align->uint & (align->uint - 1)) != 0)
      c.fail("metadata general.alignment: " + std::to_string(align->uint) +
             " is not a power of two");
    file.alignment = align->uint;
  }

  std::map<std::string, size_t> seen;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.string("tensor " + std::to_string(i) + " name");
    const std::string what = "tensor " + t.name;
    if (t.name.empty()) c.fail("tensor " + std::to_string(i) + ": empty name");
    if (t.name.size() >= kGgufMaxNameBytes)
      c.fail(what + ": name longer than " + std::to_string(kGgufMaxNameBytes - 1) + " bytes");
    if (!seen.emplace(t.name, i).second) c.fail(what + ": name appears twice");
    const uint32_t n_dims = c.read<uint32_t>(what + " dimension count");
    if (n_dims < 1 || n_dims > static_cast<uint32_t>(kMaxDims))
      c.fail(what + ": " + std::to_string(n_dims) + " dimensions (supported: 1 to " +
             std::to_string(kMaxDims) + ")");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim = c.read<uint64_t>(what + " dimension " + std::to_string(d));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, dim, &numel) ||
          numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        c.fail(what + ": dimension " + std::to_string(d) + " = " + std::to_string(dim) +
               " is zero or makes the element count overflow");
      t.dims.push_back(dim);
    }
    t.ggml_type = c.read<uint32_t>(what + " type");
    const auto dtype = dtype_from_ggml_type(t.ggml_type);
    if (!dtype)
      c.fail(what + ": tensor type " + ggml_type_name(t.ggml_type) + " (" +
             std::to_string(t.ggml_type) +
             ") is not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K)");
    t.dtype = *dtype;
    const auto block = static_cast<uint64_t>(dtype_block_size(t.dtype));
    if (t.dims[0] % block != 0)
      c.fail(what + ": rows of " + std::to_string(t.dims[0]) + " elements are not whole " +
             std::string(dtype_name(t.dtype)) + " blocks of " + std::to_string(block));
    // numel <= 2^63 and whole blocks: the byte count fits 64 bits.
    t.nbytes = numel / block * dtype_bytes(t.dtype, static_cast<size_t>(block));
    t.shape.rank = static_cast<int>(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d)
      t.shape.dims[n_dims - 1 - d] = static_cast<int64_t>(t.dims[d]);
    t.offset = c.read<uint64_t>(what + " data offset");
    if (t.offset % file.alignment != 0)
      c.fail(what + ": data offset " + std::to_string(t.offset) + " is not a multiple of the " +
             std::to_string(file.alignment) + "-byte alignment");
    file.tensors.push_back(std::move(t));
  }

  const uint64_t header_end = c.pos();
  const uint64_t pad = (file.alignment - header_end % file.alignment) % file.alignment;
  file.data_offset = header_end + pad;
  if (n_tensors > 0 && file.data_offset > size)
    c.fail("data section at byte " + std::to_string(file.data_offset) +
           " starts past the end of the file (" + std::to_string(size) + " bytes)");
  const uint64_t data_size = file.data_offset <= size ? size - file.data_offset : 0;

  // Bounds and overlaps, in offset order.
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : file.tensors) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw FormatError(origin + ": tensor " + t.name + ": data [" + std::to_string(t.offset) +
                        ", " + std::to_string(t.offset + t.nbytes) + ") runs past the " +
                        std::to_string(data_size) + "-byte data section (file truncated?)");
    order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto* prev = order[i - 1];
    if (order[i]->offset < prev->offset + prev->nbytes)
      throw FormatError(origin + ": tensor " + order[i]->name + " at data offset " +
                        std::to_string(order[i]->offset) + " overlaps tensor " + prev->name + " [" +
                        std::to_string(prev->offset) + ", " +
                        std::to_string(prev->offset + prev->nbytes) + ")");
  }
  return file;
}

std::vector<Tensor> read_gguf_tensors(const GgufFile& file, const uint8_t* data, size_t size,
                                      const std::shared_ptr<void>& owner) {
  std::vector<Tensor> tensors;
  tensors.reserve(file.tensors.size());
  for (const auto& t : file.tensors) {
    // parse_gguf checked data_offset + offset + nbytes <= size.
    if (file.data_offset + t.offset + t.nbytes > size)
      throw FormatError("tensor " + t.name + ": data outside the buffer");
    const uint8_t* src = data + file.data_offset + t.offset;
    // Element alignment our kernels load with: 4 for f32/i32, 2 for f16/bf16 and the blocks
    // (their scales are 16-bit).
    const size_t need = (t.dtype == DType::F32 || t.dtype == DType::I32) ? 4 : 2;
    if (t.nbytes > 0 && reinterpret_cast<uintptr_t>(src) % need != 0) {
      constexpr std::align_val_t kAlign{64};
      std::shared_ptr<void> buffer(::operator new(t.nbytes, kAlign), AlignedDelete{kAlign});
      std::memcpy(buffer.get(), src, t.nbytes);
      tensors.emplace_back(t.name, t.dtype, t.shape, Device::CPU, buffer.get(), buffer);
      continue;
    }
    // Read-only mapping; the pointer is non-const only because Tensor also describes activations.
    tensors.emplace_back(t.name, t.dtype, t.shape, Device::CPU, const_cast<uint8_t*>(src), owner);
  }
  return tensors;
}

}  // namespace infera::io
