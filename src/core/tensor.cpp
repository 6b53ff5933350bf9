#include "infera/tensor.h"

#include <limits>
#include <optional>
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
  }
  return "?";
}

std::string_view device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

namespace {

size_t element_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F16:
    case DType::BF16:
      return 2;
  }
  throw Error("dtype_bytes: unknown dtype");
}

constexpr uint64_t kMaxCount = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Product of the non-zero dimensions, or nullopt when a dimension is negative or the product
// exceeds int64. Zeros are skipped so that [0, 2^40, 2^40] is rejected like [2^40, 2^40]:
// code that multiplies the trailing dimensions (a row width, a stride) would overflow on it.
std::optional<uint64_t> nonzero_product(const Shape& shape) {
  uint64_t product = 1;
  for (int i = 0; i < shape.rank; ++i) {
    const int64_t d = shape.dims[static_cast<size_t>(i)];
    if (d < 0) return std::nullopt;
    if (d == 0) continue;
    if (__builtin_mul_overflow(product, static_cast<uint64_t>(d), &product) || product > kMaxCount)
      return std::nullopt;
  }
  return product;
}

bool has_zero_dim(const Shape& shape) {
  for (int i = 0; i < shape.rank; ++i)
    if (shape.dims[static_cast<size_t>(i)] == 0) return true;
  return false;
}

[[noreturn]] void too_large(const Shape& shape, const std::string& what) {
  throw InvalidArgument("shape " + shape.str() + ": " + what);
}

}  // namespace

size_t dtype_bytes(DType dtype, size_t count) {
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(count), element_bytes(dtype), &bytes) ||
      bytes > kMaxCount)
    throw InvalidArgument("dtype_bytes: " + std::to_string(count) + " " +
                          std::string(dtype_name(dtype)) + " elements do not fit int64 bytes");
  return static_cast<size_t>(bytes);
}

size_t shape_nbytes(DType dtype, const Shape& shape) {
  const auto product = nonzero_product(shape);
  if (!product) too_large(shape, "a negative dimension, or more than 2^63-1 elements");
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(*product, element_bytes(dtype), &bytes) || bytes > kMaxCount)
    too_large(shape, "more than 2^63-1 bytes in " + std::string(dtype_name(dtype)));
  return has_zero_dim(shape) ? 0 : static_cast<size_t>(bytes);
}

Shape::Shape(std::initializer_list<int64_t> d) {
  if (d.size() > kMaxDims) throw InvalidArgument("Shape: more than 4 dimensions");
  for (int64_t v : d) dims[static_cast<size_t>(rank++)] = v;
}

int64_t Shape::numel() const {
  const auto product = nonzero_product(*this);
  if (!product) too_large(*this, "a negative dimension, or more than 2^63-1 elements");
  return has_zero_dim(*this) ? 0 : static_cast<int64_t>(*product);
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
