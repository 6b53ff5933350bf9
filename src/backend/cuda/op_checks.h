// Host-side operand checks shared by the CUDA backend's op files: each failure is an
// InvalidArgument naming the op and the tensors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "backend/cuda/device_context.h"
#include "infera/error.h"
#include "infera/tensor.h"
#include "ops/batch.h"

namespace infera::cuda {

[[noreturn]] inline void fail_check(const char* op, const std::string& what) {
  throw InvalidArgument(std::string("[") + op + "] " + what);
}

// A macro, not a function, so that `what` (string concatenations, shape strings) is built only
// when the check fails: these checks run for every op of every step, and building their messages
// eagerly was host time the GPU waited for on the decode path.
#define INFERA_CUDA_EXPECT(ok, op, what)             \
  do {                                               \
    if (!(ok)) ::infera::cuda::fail_check(op, what); \
  } while (0)

// A [rows, cols] bf16 weight in device memory (what the decoder and encoder stacks' GEMM paths
// take; anything else keeps the composition).
inline bool is_bf16_matrix(const Tensor* t, int64_t rows, int64_t cols) {
  return t && t->device() == Device::CUDA && t->dtype() == DType::BF16 && t->rank() == 2 &&
         t->dim(0) == rows && t->dim(1) == cols;
}

inline bool is_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether bf16 matrix b starts where a ends (ModernBERT's Wqkv views; Backend::prepare_weights):
// a GEMM can read them as one weight of a's rows then b's.
inline bool follows(const Tensor& a, const Tensor& b) {
  return static_cast<const char*>(a.data()) + a.numel() * 2 == b.data();
}

inline void expect_f32(const Tensor& t, const char* op) {
  INFERA_CUDA_EXPECT(!t.empty(), op, "tensor " + t.name() + " is empty");
  INFERA_CUDA_EXPECT(t.device() == Device::CUDA, op, "tensor " + t.name() + " is not on cuda");
  INFERA_CUDA_EXPECT(
      t.dtype() == DType::F32, op,
      "tensor " + t.name() + " must be F32, is " + std::string(dtype_name(t.dtype())));
}

inline void expect_float_on_device(const Tensor& t, const char* op) {
  INFERA_CUDA_EXPECT(
      !t.empty() && t.device() == Device::CUDA, op,
      "tensor " + t.name() + " must be a cuda tensor (prepare_weight uploads weights)");
  INFERA_CUDA_EXPECT(t.dtype() == DType::F32 || t.dtype() == DType::F16 || t.dtype() == DType::BF16,
                     op,
                     "tensor " + t.name() + " dtype " + std::string(dtype_name(t.dtype())) +
                         " is not supported on cuda");
}

// Q8_0 / Q4_0 blocks: the weights matmul's quantized kernel reads (no fused GEMV takes them).
inline bool is_block_quantized(const Tensor& w) {
  return w.dtype() == DType::Q8_0 || w.dtype() == DType::Q4_0;
}

inline std::string shapes(const Tensor& a, const Tensor& b) {
  return a.name() + " " + a.shape().str() + " vs " + b.name() + " " + b.shape().str();
}

inline int64_t row_width(const Tensor& t) { return t.dim(t.rank() - 1); }
inline int64_t row_count(const Tensor& t) { return t.numel() / std::max<int64_t>(row_width(t), 1); }

inline OpNote note(const char* op, const char* kernel, std::initializer_list<const Tensor*> ts) {
  OpNote n;
  n.op = op;
  n.kernel = kernel;
  for (const Tensor* t : ts)
    if (n.count < 3) n.shapes[n.count++] = t->shape();
  return n;
}

// The layer's pools: cuda [kv_heads, blocks, block_size, head_dim] of one float dtype.
inline void expect_pool(const KvLayer& cache, int64_t kv_heads, int64_t head_dim, const char* op) {
  const Tensor& k = cache.keys;
  INFERA_CUDA_EXPECT(
      !k.empty() && k.device() == Device::CUDA && k.rank() == 4 &&
          (k.dtype() == DType::F32 || k.dtype() == DType::F16 || k.dtype() == DType::BF16) &&
          cache.values.shape() == k.shape() && cache.values.dtype() == k.dtype() &&
          cache.values.device() == Device::CUDA,
      op, "cache pools must be cuda [kv_heads, blocks, block_size, head_dim] of one float dtype");
  INFERA_CUDA_EXPECT(k.dim(0) == kv_heads && k.dim(3) == head_dim, op,
                     "cache " + k.shape().str() + " for " + std::to_string(kv_heads) +
                         " kv heads of " + std::to_string(head_dim));
}

}  // namespace infera::cuda
