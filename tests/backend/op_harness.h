// The backend op test harness (in the spirit of llama.cpp's test-backend-ops): each op's cases are
// written once, run on every backend this build and machine have and, for the CPU, on every SIMD
// target the processor supports, and compared with a plain scalar reference (double precision) by
// normalised mean squared error against a bound per dtype. A backend that declines an op/dtype
// (Backend::supports) is reported, not failed.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/backend.h"

namespace infera::test {

struct HarnessBackend {
  std::string name;  // "cpu-1t", "cpu-2t", "cuda"
  std::function<std::unique_ptr<Backend>()> make;
  bool simd_targets = false;  // run once per supported SIMD target (the CPU backend)
};

// The backends to test here: the CPU with 1 and 2 threads, and CUDA when compiled in and a
// device is visible (otherwise a printed note says it was skipped).
std::vector<HarnessBackend> harness_backends();

// The CUDA targets other than cuda_exact compute in bf16 on tensor cores where the default
// backend does ("cuda", "cuda_skinny", ...): held to the bf16 bounds there.
bool tensor_core_cuda_target(const std::string& name);

// Whether a case of `macs` multiply-adds is left out on `b`: only in sanitizer builds (ASan), only
// on the CPU, only past kSanitizerCpuMacs. Those cases are sized for CUDA's kernels (skinny,
// stream and prefill GEMM tiles); on the CPU every SIMD target's tails and blockings are reached
// by the smaller cases, and under ASan the large ones took most of the suite's time. The release
// build runs every case on every target.
inline constexpr int64_t kSanitizerCpuMacs = int64_t{16} << 20;
bool skip_under_sanitizer(const Backend& b, int64_t macs);

// The same backend with attention_packed forced to its dense schedule (every key tile, the window
// masked per row): the CPU with 2 threads, CUDA (and cuda_exact) with CudaOptions::packed_dense;
// nullptr for a backend without one.
std::unique_ptr<Backend> dense_schedule_backend(const HarnessBackend& hb);

// NMSE bounds by the dtype of the op's low-precision operand (weights, cache). Reference and
// backend see the same rounded inputs, so the differences left are summation order and libm:
// ~1e-13 on the CPU. The bounds leave room for a backend that computes in that dtype (a GPU
// rounding activations to bf16 has NMSE ~1e-5), while an indexing bug gives ~1.
double nmse_bound(DType dtype);

// Host data rounded to `dtype` (the values the backend will see), and a backend tensor of it.
struct HostData {
  std::vector<float> values;  // after rounding to dtype
  std::vector<unsigned char> bytes;
};
HostData make_host_data(DType dtype, size_t count, std::mt19937& rng, float scale = 1.0f);
// A tensor on `backend` holding `data` (uploaded through prepare_weight, which every backend
// implements for any dtype it supports).
Tensor to_backend(Backend& backend, const std::string& name, DType dtype, Shape shape,
                  HostData& data);
std::vector<float> read_back(Backend& backend, const Tensor& t);

// Records the worst NMSE per (op, dtype) and prints one line per op at the end of a test.
class OpReport {
 public:
  explicit OpReport(std::string label) : label_(std::move(label)) {}
  ~OpReport();
  // Compares and records; returns false (after ADD_FAILURE with the case) over the bound.
  bool check(Op op, DType dtype, const std::string& case_name, std::span<const float> got,
             std::span<const double> want);
  void declined(Op op, DType dtype);

 private:
  struct Entry {
    Op op;
    DType dtype;
    int cases = 0;
    double worst = 0;
    bool declined = false;
  };
  Entry& entry(Op op, DType dtype);
  std::string label_;
  std::vector<Entry> entries_;
};

// "2x3x4": a case's sizes, for its name.
std::string dims(std::initializer_list<int64_t> ds);
// out [n, m] = x [n, k] . w [m, k]^T in double: the matmul references of the fused-op cases.
std::vector<double> matmul_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     int n, int k, int m);

// Row-wise RMSNorm of x [n, d] in double: w * x / sqrt(mean of squares + eps) (the residual-MLP
// and decode-chain cases' reference).
std::vector<double> rmsnorm_reference(const std::vector<double>& x, const std::vector<float>& w,
                                      int n, int d, double eps);
// out [n, m] = x [n, k] . w [m, k]^T with x already in double (uncached: chained references).
std::vector<double> matvec_reference(const std::vector<double>& x, const std::vector<float>& w,
                                     int n, int k, int m);
std::vector<double> as_doubles(const std::vector<float>& v);

// Runs `body(backend, label)` for `hb` once, or once per SIMD target for the CPU backend.
void for_each_target(const HarnessBackend& hb,
                     const std::function<void(Backend&, const std::string&)>& body);

}  // namespace infera::test
