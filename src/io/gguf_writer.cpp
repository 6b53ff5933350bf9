#include "io/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <system_error>

#include "infera/error.h"

namespace infera::io {

namespace {

class ByteSink {
 public:
  explicit ByteSink(std::ofstream& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    write(b, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    write(s.data(), s.size());
  }
  void write(const void* p, size_t n) {
    out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    written_ += n;
  }
  void pad_to(uint64_t alignment) {
    static const char kZeros[64] = {};
    while (written_ % alignment != 0)
      write(kZeros, std::min<uint64_t>(sizeof(kZeros), alignment - written_ % alignment));
  }
  uint64_t written() const { return written_; }

 private:
  std::ofstream& out_;
  uint64_t written_ = 0;
};

void put_scalar(ByteSink& s, GgufType type, uint64_t u, int64_t i, double r,
                const std::string& str) {
  switch (type) {
    case GgufType::UINT8:
    case GgufType::BOOL:
      return s.put(static_cast<uint8_t>(u));
    case GgufType::INT8:
      return s.put(static_cast<int8_t>(i));
    case GgufType::UINT16:
      return s.put(static_cast<uint16_t>(u));
    case GgufType::INT16:
      return s.put(static_cast<int16_t>(i));
    case GgufType::UINT32:
      return s.put(static_cast<uint32_t>(u));
    case GgufType::INT32:
      return s.put(static_cast<int32_t>(i));
    case GgufType::UINT64:
      return s.put(u);
    case GgufType::INT64:
      return s.put(i);
    case GgufType::FLOAT32:
      return s.put(static_cast<float>(r));
    case GgufType::FLOAT64:
      return s.put(r);
    case GgufType::STRING:
      return s.put_string(str);
    case GgufType::ARRAY:
      break;
  }
  throw InvalidArgument("GGUF writer: array given where a scalar was expected");
}

void put_value(ByteSink& s, const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return put_scalar(s, v.type, v.uint, v.sint, v.real, v.str);
  s.put(static_cast<uint32_t>(v.elem_type));
  s.put(static_cast<uint64_t>(v.array_size()));
  switch (v.elem_type) {
    case GgufType::STRING:
      for (const auto& x : v.strings) s.put_string(x);
      return;
    case GgufType::ARRAY:
      for (const auto& x : v.arrays) {
        if (x.type != GgufType::ARRAY) throw InvalidArgument("GGUF writer: nested non-array");
        put_value(s, x);
      }
      return;
    case GgufType::FLOAT32:
    case GgufType::FLOAT64:
      for (double x : v.reals) put_scalar(s, v.elem_type, 0, 0, x, {});
      return;
    default:
      for (uint64_t x : v.uints) put_scalar(s, v.elem_type, x, 0, 0, {});
      for (int64_t x : v.sints) put_scalar(s, v.elem_type, 0, x, 0, {});
      return;
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, const Shape& shape,
                            Producer produce) {
  if (name.empty() || name.size() >= kGgufMaxNameBytes)
    throw InvalidArgument("GGUF writer: tensor name '" + name + "' is empty or too long");
  if (shape.rank < 1) throw InvalidArgument("GGUF writer: tensor " + name + " has no dimensions");
  const int64_t row = shape[shape.rank - 1];
  if (row % dtype_block_size(dtype) != 0)
    throw InvalidArgument("GGUF writer: tensor " + name + " rows of " + std::to_string(row) +
                          " are not whole " + std::string(dtype_name(dtype)) + " blocks");
  for (const auto& t : tensors_)
    if (t.name == name) throw InvalidArgument("GGUF writer: tensor " + name + " added twice");
  tensors_.push_back({name, dtype, shape, dtype_bytes(dtype, static_cast<size_t>(shape.numel())),
                      std::move(produce)});
}

void GgufWriter::write(const std::filesystem::path& path) const {
  const std::filesystem::path tmp = path.string() + ".partial";
  try {
    write_to(tmp);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);  // never leave a truncated model behind
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    throw IoError(path.string() + ": cannot move the finished file into place: " + ec.message());
}

void GgufWriter::write_to(const std::filesystem::path& tmp) const {
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw IoError(tmp.string() + ": cannot create");
    ByteSink s(out);
    s.write("GGUF", 4);
    s.put<uint32_t>(3);
    s.put<uint64_t>(tensors_.size());
    s.put<uint64_t>(metadata_.size());
    for (const auto& [key, value] : metadata_) {
      s.put_string(key);
      s.put(static_cast<uint32_t>(value.type));
      put_value(s, value);
    }
    uint64_t offset = 0;
    for (const auto& t : tensors_) {
      s.put_string(t.name);
      s.put<uint32_t>(static_cast<uint32_t>(t.shape.rank));
      for (int d = t.shape.rank - 1; d >= 0; --d)
        s.put<uint64_t>(static_cast<uint64_t>(t.shape[d]));
      s.put<uint32_t>(ggml_type_of(t.dtype));
      s.put<uint64_t>(offset);
      offset += (t.nbytes + kAlignment - 1) / kAlignment * kAlignment;
    }
    s.pad_to(kAlignment);
    std::vector<uint8_t> bytes;
    for (const auto& t : tensors_) {
      bytes.assign(t.nbytes, 0);
      t.produce(bytes);
      if (bytes.size() != t.nbytes)
        throw Error("GGUF writer: tensor " + t.name + " produced " + std::to_string(bytes.size()) +
                    " bytes, expected " + std::to_string(t.nbytes));
      s.write(bytes.data(), bytes.size());
      s.pad_to(kAlignment);
    }
    out.flush();
    if (!out) throw IoError(tmp.string() + ": write failed (disk full?)");
  }
}

}  // namespace infera::io
