#include "infera/tensor.h"

#include <sstream>

#include "infera/error.h"

namespace infera {

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::I32:
      return "I32";
    case DType::Q8_0:
      return "Q8_0";
    case DType::Q4_0:
      return "Q4_0";
    case DType::Q4_K:
      return "Q4_K";
    case DType::Q6_K:
      return "Q6_K";
  }
  return "?";
}

std::string_view device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

size_t dtype_bytes(DType dtype, size_t count) {
  switch (dtype) {
    case DType::F32:
    case DType::I32:
      return count * 4;
    case DType::F16:
    case DType::BF16:
      return count * 2;
    case DType::Q8_0:
      return (count + 31) / 32 * 34;
    case DType::Q4_0:
      return (count + 31) / 32 * 18;
    case DType::Q4_K:
      return (count + 255) / 256 * 144;
    case DType::Q6_K:
      return (count + 255) / 256 * 210;
  }
  throw Error("dtype_bytes: unknown dtype");
}

int64_t dtype_block_size(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
    case DType::Q4_0:
      return 32;
    case DType::Q4_K:
    case DType::Q6_K:
      return 256;
    default:
      return 1;
  }
}

bool dtype_is_quantized(DType dtype) { return dtype_block_size(dtype) > 1; }

Shape::Shape(std::initializer_list<int64_t> d) {
  if (d.size() > kMaxDims) throw InvalidArgument("Shape: more than 4 dimensions");
  for (int64_t v : d) dims[static_cast<size_t>(rank++)] = v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& other) const {
  if (rank != other.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<size_t>(i)] != other.dims[static_cast<size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::ostringstream out;
  out << '[';
  for (int i = 0; i < rank; ++i) out << (i ? ", " : "") << dims[static_cast<size_t>(i)];
  out << ']';
  return out.str();
}

Tensor::Tensor(std::string name, DType dtype, Shape shape, Device device, void* data,
               std::shared_ptr<void> owner)
    : name_(std::move(name)),
      dtype_(dtype),
      shape_(shape),
      device_(device),
      data_(data),
      owner_(std::move(owner)) {}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape.numel() != numel())
    throw InvalidArgument("tensor " + name_ + ": cannot reshape " + shape_.str() + " to " +
                          shape.str());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::renamed(std::string name) const {
  Tensor t = *this;
  t.name_ = std::move(name);
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  if (rank() < 1 || begin < 0 || count < 0 || begin + count > dim(0))
    throw InvalidArgument("tensor " + name_ + ": rows [" + std::to_string(begin) + ", " +
                          std::to_string(begin + count) + ") out of " + shape_.str());
  Tensor t = *this;
  t.shape_.dims[0] = count;
  const size_t row_bytes =
      dtype_bytes(dtype_, static_cast<size_t>(numel() / std::max<int64_t>(dim(0), 1)));
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin) * row_bytes;
  return t;
}

}  // namespace infera
