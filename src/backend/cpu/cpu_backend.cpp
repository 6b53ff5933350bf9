// The CPU backend: F32 activations, weights used in place (F32/F16/BF16), SIMD kernels from
// simd_kernels.cpp, work split over one thread pool by rows or heads.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/convert.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "infera/error.h"
#include "ops/backend.h"

namespace infera {
namespace {

void expect(bool ok, const char* op, const std::string& what) {
  if (!ok) throw InvalidArgument(std::string("[") + op + "] " + what);
}

void expect_f32_cpu(const Tensor& t, const char* op) {
  expect(!t.empty(), op, "tensor " + t.name() + " is empty");
  expect(t.device() == Device::CPU, op, "tensor " + t.name() + " is not on the cpu");
  expect(t.dtype() == DType::F32, op,
         "tensor " + t.name() + " must be F32, is " + std::string(dtype_name(t.dtype())));
}

void expect_within_cache(const char* op, int64_t start_pos, int64_t n, int64_t capacity) {
  expect(start_pos >= 0 && start_pos + n <= capacity, op,
         "positions up to " + std::to_string(start_pos + n) + " exceed the cache capacity " +
             std::to_string(capacity));
}

std::string shapes(const Tensor& a, const Tensor& b) {
  return a.name() + " " + a.shape().str() + " vs " + b.name() + " " + b.shape().str();
}

int64_t row_width(const Tensor& t) { return t.dim(t.rank() - 1); }
int64_t row_count(const Tensor& t) { return t.numel() / std::max<int64_t>(row_width(t), 1); }

struct HeapFree {
  void operator()(void* p) const { std::free(p); }
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads), panels_(static_cast<size_t>(pool_.size())) {}

  std::string name() const override {
    return std::string("cpu (") + cpu::simd_target_name() + ", " + std::to_string(pool_.size()) +
           " threads)";
  }
  Device device() const override { return Device::CPU; }
  bool supports_weight(DType dtype) const override {
    return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 ||
           dtype_is_quantized(dtype);
  }

  Tensor alloc(const std::string& name, DType dtype, Shape shape) override {
    // calloc maps large blocks lazily as zero pages, so a KV cache sized for a long context costs
    // memory only as positions fill. Kernels use unaligned loads; 16-byte alignment suffices.
    const size_t bytes =
        std::max<size_t>(dtype_bytes(dtype, static_cast<size_t>(shape.numel())), 1);
    void* p = std::calloc(bytes, 1);
    if (!p) throw Error("out of memory allocating " + name + " " + shape.str());
    return Tensor(name, dtype, shape, Device::CPU, p, std::shared_ptr<void>(p, HeapFree{}));
  }

  Tensor prepare_weight(const Tensor& host_weight) override {
    expect(supports_weight(host_weight.dtype()), "prepare_weight",
           "tensor " + host_weight.name() + ": dtype " +
               std::string(dtype_name(host_weight.dtype())) + " is not supported on the cpu");
    return host_weight;
  }

  void to_host(const Tensor& src, std::span<float> dst) override {
    expect_f32_cpu(src, "to_host");
    expect(static_cast<int64_t>(dst.size()) == src.numel(), "to_host", "size mismatch");
    std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
  }

  void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override {
    expect_f32_cpu(out, "embedding");
    expect(table.rank() == 2 && out.rank() == 2 && out.dim(0) == static_cast<int64_t>(ids.size()) &&
               out.dim(1) == table.dim(1),
           "embedding", shapes(table, out));
    const int64_t dim = table.dim(1);
    for (size_t i = 0; i < ids.size(); ++i) {
      expect(ids[i] >= 0 && ids[i] < table.dim(0), "embedding",
             "token id " + std::to_string(ids[i]) + " outside the vocabulary [0, " +
                 std::to_string(table.dim(0)) + ")");
      const char* row = static_cast<const char*>(table.data()) +
                        dtype_bytes(table.dtype(), static_cast<size_t>(ids[i] * dim));
      cpu::weight_row_to_f32(row, table.dtype(), dim,
                             out.data_as<float>() + static_cast<int64_t>(i) * dim);
    }
  }

  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    expect_f32_cpu(x, "rmsnorm");
    expect_f32_cpu(out, "rmsnorm");
    const int64_t dim = row_width(x), rows = row_count(x);
    expect(weight.numel() == dim && out.numel() == x.numel(), "rmsnorm", shapes(x, weight));
    std::vector<float> w(static_cast<size_t>(dim));
    cpu::widen_row(weight.data(), weight.dtype(), dim, w.data());
    const float* src = x.data_as<float>();
    float* dst = out.data_as<float>();
    pool_.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = src + r * dim;
        float* yr = dst + r * dim;
        // Same order as transformers' Qwen3RMSNorm: mean of squares in f32, rsqrt, then weight.
        const float mean = cpu::dot_f32(xr, xr, dim) / static_cast<float>(dim);
        const float inv = 1.0f / std::sqrt(mean + eps);
        for (int64_t i = 0; i < dim; ++i) yr[i] = w[static_cast<size_t>(i)] * (xr[i] * inv);
      }
    });
  }

  void matmul(const Tensor& x, const Tensor& w, Tensor& out) override {
    expect_f32_cpu(x, "matmul");
    expect_f32_cpu(out, "matmul");
    expect(supports_weight(w.dtype()), "matmul",
           "weight " + w.name() + " dtype " + std::string(dtype_name(w.dtype())) + " unsupported");
    const int64_t k = row_width(x), n = row_count(x);
    expect(w.rank() == 2 && w.dim(1) == k, "matmul", shapes(x, w));
    const int64_t m = w.dim(0);
    expect(row_width(out) == m && row_count(out) == n, "matmul", shapes(out, w));
    if (dtype_is_quantized(w.dtype()))  // integer kernels on the blocks (quant_matmul.h)
      return cpu::matmul_quantized(pool_, x.data_as<float>(), n, k, w.data(), w.dtype(), m,
                                   out.data_as<float>());
    for (auto& p : panels_) p.resize(static_cast<size_t>(cpu::kPanelRows * k));
    const float* xs = x.data_as<float>();
    float* os = out.data_as<float>();
    // Split output columns (weight rows) over threads in whole panels.
    const int64_t panels = (m + cpu::kPanelRows - 1) / cpu::kPanelRows;
    std::atomic<int> slot{0};
    pool_.parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
      std::vector<float>& panel = panels_[static_cast<size_t>(slot.fetch_add(1))];
      cpu::matmul_rows(xs, n, k, w.data(), w.dtype(), begin * cpu::kPanelRows,
                       std::min(m, end * cpu::kPanelRows), os, m, panel.data());
    });
  }

  void rope(Tensor& x, std::span<const int32_t> positions, double theta) override {
    expect_f32_cpu(x, "rope");
    expect(x.rank() == 3 && x.dim(0) == static_cast<int64_t>(positions.size()) && x.dim(2) % 2 == 0,
           "rope",
           "x " + x.shape().str() + " with " + std::to_string(positions.size()) + " positions");
    const int64_t n = x.dim(0), heads = x.dim(1), d = x.dim(2), half = d / 2;
    // inv_freq and angles in f32, as transformers computes them, for bit-level agreement.
    std::vector<float> inv_freq(static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j) {
      const float expo = static_cast<float>(2 * j) / static_cast<float>(d);
      inv_freq[static_cast<size_t>(j)] =
          1.0f / static_cast<float>(std::pow(static_cast<float>(theta), expo));
    }
    float* data = x.data_as<float>();
    pool_.parallel_for(n, 4, [&](int64_t begin, int64_t end) {
      std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
      for (int64_t i = begin; i < end; ++i) {
        for (int64_t j = 0; j < half; ++j) {
          const float angle = static_cast<float>(positions[static_cast<size_t>(i)]) *
                              inv_freq[static_cast<size_t>(j)];
          cs[static_cast<size_t>(j)] = std::cos(angle);
          sn[static_cast<size_t>(j)] = std::sin(angle);
        }
        for (int64_t h = 0; h < heads; ++h) {
          float* v = data + (i * heads + h) * d;
          for (int64_t j = 0; j < half; ++j) {
            const float a = v[j], b = v[j + half];
            v[j] = a * cs[static_cast<size_t>(j)] - b * sn[static_cast<size_t>(j)];
            v[j + half] = b * cs[static_cast<size_t>(j)] + a * sn[static_cast<size_t>(j)];
          }
        }
      }
    });
  }

  void copy_rows(const Tensor& src, Tensor& dst, int64_t dst_row) override {
    expect_f32_cpu(src, "copy_rows");
    expect_f32_cpu(dst, "copy_rows");
    const int64_t width = src.numel() / std::max<int64_t>(src.dim(0), 1);
    const int64_t dst_width = dst.numel() / std::max<int64_t>(dst.dim(0), 1);
    expect(width == dst_width && dst_row >= 0 && dst_row + src.dim(0) <= dst.dim(0), "copy_rows",
           shapes(src, dst) + " at row " + std::to_string(dst_row));
    std::memcpy(dst.data_as<float>() + dst_row * width, src.data(),
                static_cast<size_t>(src.numel()) * sizeof(float));
  }

  void kv_append(const Tensor& src, Tensor& cache, int64_t start_pos) override;
  void attention_causal(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                        int64_t start_pos, float scale, Tensor& out) override;

  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    expect_f32_cpu(gate, "swiglu");
    expect_f32_cpu(up, "swiglu");
    expect_f32_cpu(out, "swiglu");
    expect(gate.numel() == up.numel() && out.numel() == gate.numel(), "swiglu", shapes(gate, up));
    const float* g = gate.data_as<float>();
    const float* u = up.data_as<float>();
    float* o = out.data_as<float>();
    pool_.parallel_for(gate.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    });
  }

  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    expect_f32_cpu(a, "add");
    expect_f32_cpu(b, "add");
    expect_f32_cpu(out, "add");
    expect(a.numel() == b.numel() && out.numel() == a.numel(), "add", shapes(a, b));
    const float* pa = a.data_as<float>();
    const float* pb = b.data_as<float>();
    float* po = out.data_as<float>();
    for (int64_t i = 0; i < a.numel(); ++i) po[i] = pa[i] + pb[i];
  }

 private:
  cpu::ThreadPool pool_;
  std::vector<std::vector<float>> panels_;  // per-thread matmul scratch
};

void CpuBackend::attention_causal(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                  int64_t start_pos, float scale, Tensor& out) {
  expect_f32_cpu(q, "attention");
  expect_f32_cpu(k_cache, "attention");
  expect_f32_cpu(v_cache, "attention");
  expect_f32_cpu(out, "attention");
  expect(q.rank() == 3 && k_cache.rank() == 3 && v_cache.shape() == k_cache.shape() &&
             out.shape() == q.shape(),
         "attention", shapes(q, k_cache));
  const int64_t n = q.dim(0), hq = q.dim(1), d = q.dim(2);
  const int64_t hkv = k_cache.dim(0), capacity = k_cache.dim(1);
  expect(k_cache.dim(2) == d && hkv > 0 && hq % hkv == 0, "attention", shapes(q, k_cache));
  expect_within_cache("attention", start_pos, n, capacity);
  cpu::attention_causal(pool_, q.data_as<float>(), n, hq, d, k_cache.data_as<float>(),
                        v_cache.data_as<float>(), hkv, capacity, start_pos, scale,
                        out.data_as<float>());
}

void CpuBackend::kv_append(const Tensor& src, Tensor& cache, int64_t start_pos) {
  expect_f32_cpu(src, "kv_append");
  expect_f32_cpu(cache, "kv_append");
  expect(src.rank() == 3 && cache.rank() == 3 && src.dim(1) == cache.dim(0) &&
             src.dim(2) == cache.dim(2),
         "kv_append", shapes(src, cache));
  const int64_t n = src.dim(0), heads = src.dim(1), d = src.dim(2), capacity = cache.dim(1);
  expect_within_cache("kv_append", start_pos, n, capacity);
  const float* from = src.data_as<float>();
  float* to = cache.data_as<float>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h)
      std::memcpy(to + (h * capacity + start_pos + i) * d, from + (i * heads + h) * d,
                  static_cast<size_t>(d) * sizeof(float));
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace infera
