// The op interface every model is written against, and every backend implements.
// Layer contract: models -> ops (this file) -> backends. Ops know nothing of models; models never
// touch tensor memory directly (it may live on a GPU) and read results back only via to_host().
//
// Conventions for all ops:
// - Activations are F32 row-major; weights may be any dtype the backend supports_weight().
// - `out` is pre-allocated by the caller with the documented shape; ops check shapes and throw
//   InvalidArgument naming the op ("[matmul] x [4, 1024] vs w [3072, 1000]").
// - Token ids and positions are host spans; a device backend copies them itself.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "infera/tensor.h"

namespace infera {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  virtual bool supports_weight(DType dtype) const = 0;

  // --- memory -------------------------------------------------------------------------------
  // A zero-filled activation buffer on this backend's device.
  virtual Tensor alloc(const std::string& name, DType dtype, Shape shape) = 0;
  // Makes a host weight usable by this backend. The CPU backend returns the same view, so
  // weights stay in place in the mmap; a GPU backend uploads once at load.
  virtual Tensor prepare_weight(const Tensor& host_weight) = 0;
  // Copies an F32 tensor to host memory (dst.size() == src.numel()).
  virtual void to_host(const Tensor& src, std::span<float> dst) = 0;

  // --- ops ----------------------------------------------------------------------------------
  // out[i, :] = table[ids[i], :]; table [vocab, dim] any weight dtype, out [n, dim] F32.
  virtual void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) = 0;
  // Row-wise RMSNorm over the last dimension: x [rows, dim], weight [dim], out like x.
  // In place (out aliasing x) is allowed.
  virtual void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) = 0;
  // out[n, m] = x[n, k] . w[m, k]^T (w in the Hugging Face [out_features, in_features] layout).
  virtual void matmul(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // Rotary embedding, rotate-half convention, in place: x [n, heads, head_dim]; token i sits at
  // positions[i]. inv_freq[j] = 1 / theta^(2j / head_dim).
  virtual void rope(Tensor& x, std::span<const int32_t> positions, double theta) = 0;
  // dst rows [dst_row, dst_row + src.dim(0)) = src (same row width).
  virtual void copy_rows(const Tensor& src, Tensor& dst, int64_t dst_row) = 0;
  // Appends keys or values to a head-major cache: src [n, hkv, d] goes to cache [hkv, capacity, d]
  // at positions [start_pos, start_pos + n). Head-major keeps each head's history contiguous,
  // so attention reads it as one matrix.
  virtual void kv_append(const Tensor& src, Tensor& cache, int64_t start_pos) = 0;
  // Causal grouped-query attention over a cache.
  //   q [n, hq, d]; k_cache, v_cache [hkv, capacity, d] holding positions [0, start_pos + n);
  //   query i sits at position start_pos + i and attends to keys 0 ..= start_pos + i.
  //   Head h reads kv head h / (hq / hkv). out [n, hq, d]. Softmax in F32.
  virtual void attention_causal(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                int64_t start_pos, float scale, Tensor& out) = 0;
  // out = silu(gate) * up, elementwise; all [n, f].
  virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out = a + b, elementwise, same shapes; out may alias a.
  virtual void add(const Tensor& a, const Tensor& b, Tensor& out) = 0;

  // Waits for queued work (no-op on the CPU).
  virtual void synchronize() {}
};

// The CPU backend with `threads` workers (0: one per core).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace infera
