// A Tensor is a typed, shaped view of memory that lives on one device. It never assumes host
// memory: model code passes tensors to ops and reads results back only through Backend::to_host.
// Storage is shared and reference-counted so that a view of an mmapped weight keeps the mapping
// alive, and an activation buffer can be handed around without copies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace infera {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  I32,
  // Block-quantized weight types plug in here (each with its own matmul kernel file).
};

enum class Device : uint8_t { CPU, CUDA };

std::string_view dtype_name(DType dtype);
std::string_view device_name(Device device);
// Bytes for `count` elements; quantized types will round up to whole blocks. Throws
// InvalidArgument when the byte count does not fit int64.
size_t dtype_bytes(DType dtype, size_t count);

constexpr int kMaxDims = 4;

struct Shape {
  std::array<int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  int64_t operator[](int i) const { return dims[static_cast<size_t>(i)]; }
  // The one place shape arithmetic is checked. A shape is valid when every dimension is >= 0 and
  // the product of its non-zero dimensions fits int64: then numel(), every partial product of
  // dimensions (row widths, strides) and the product in any order fit too, even for a shape with a
  // zero dimension whose other dimensions are huge. numel() throws InvalidArgument otherwise.
  int64_t numel() const;
  bool operator==(const Shape& other) const;
  std::string str() const;  // "[3072, 1024]"
};

// Bytes of a `dtype` tensor of `shape`: Shape::numel()'s checks, plus the byte count fitting
// int64 (counting non-zero dimensions only, as numel() does). Throws InvalidArgument otherwise.
size_t shape_nbytes(DType dtype, const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  // `owner` keeps `data` alive (an mmap, a malloc'd or cudaMalloc'd buffer); may be null for
  // borrowed memory whose lifetime the caller guarantees.
  Tensor(std::string name, DType dtype, Shape shape, Device device, void* data,
         std::shared_ptr<void> owner);

  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return shape_nbytes(dtype_, shape_); }
  bool empty() const { return data_ == nullptr; }

  // Raw pointer; only backends of the tensor's device dereference it.
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }

  // Same memory, new shape with the same element count (row-major reinterpretation).
  Tensor reshaped(Shape shape) const;
  // Rows [begin, begin+count) along dimension 0, same memory.
  Tensor rows(int64_t begin, int64_t count) const;

 private:
  std::string name_;
  DType dtype_ = DType::F32;
  Shape shape_;
  Device device_ = Device::CPU;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

}  // namespace infera
