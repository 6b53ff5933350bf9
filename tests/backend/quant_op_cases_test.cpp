// Matmul with Q8_0 / Q4_0 weights on the device backends (the CPU's quantized kernels have their
// own test against the same reference with its int8 activations: quant_matmul_test.cpp). Weights
// are group-64 quantized (the decision runtime's 8/4-bit formats) or raw random blocks (every
// nibble and int8 value, -128 included); the reference is the scalar dequantizer
// (quant::dequantize_row, bit-identical to the gguf package) times the f32 activations, summed in
// double. The CUDA kernel rounds activations and dequantized weights to bf16 for the tensor
// cores: NMSE ~1e-6, bound 1e-4 (nmse_bound); a wrong nibble order, scale or offset gives ~1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/op_harness.h"
#include "infera/error.h"
#include "ops/backend.h"
#include "quant/quantize.h"

namespace infera::test {
namespace {

class QuantOps : public ::testing::TestWithParam<HarnessBackend> {};

std::vector<uint8_t> weight_bytes(DType dtype, int64_t m, int64_t k, bool raw, std::mt19937& rng) {
  const size_t row_bytes = dtype_bytes(dtype, static_cast<size_t>(k));
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(m));
  if (raw) {
    for (auto& b : w) b = static_cast<uint8_t>(rng());
    const size_t block = dtype == DType::Q8_0 ? 34 : 18;
    for (size_t off = 0; off < w.size(); off += block) w[off + 1] &= 0x3B;  // finite f16 scale
    return w;
  }
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t j = 0; j < m; ++j) {
    for (float& v : row) v = dist(rng);
    void* dst = w.data() + row_bytes * static_cast<size_t>(j);
    if (dtype == DType::Q8_0)
      quant::quantize_row_q8_0_g64(row.data(), k, dst);
    else
      quant::quantize_row_q4_0_g64(row.data(), k, dst);
  }
  return w;
}

// x [n, k] times the scalar dequantizer's rows of w [m, k], summed in double.
std::vector<double> dequantized_matmul(const std::vector<float>& x, DType dtype,
                                       const std::vector<uint8_t>& w, int64_t n, int64_t k,
                                       int64_t m) {
  std::vector<float> deq(static_cast<size_t>(m * k));
  const size_t row_bytes = dtype_bytes(dtype, static_cast<size_t>(k));
  for (int64_t j = 0; j < m; ++j)
    quant::dequantize_row(dtype, w.data() + row_bytes * size_t(j), k, deq.data() + j * k);
  std::vector<double> out(static_cast<size_t>(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += double(x[size_t(i * k + p)]) * deq[size_t(j * k + p)];
      out[size_t(i * m + j)] = s;
    }
  return out;
}

TEST_P(QuantOps, GroupwiseMatmulMatchesDequantizedReference) {
  auto b = GetParam().make();
  if (b->device() == Device::CPU)  // int8 activations there: its own reference
    GTEST_SKIP() << "CPU quantized matmul: tests/backend/quant_matmul_test.cpp";
  OpReport report(GetParam().name);
  std::mt19937 rng(11);
  for (DType dtype : {DType::Q8_0, DType::Q4_0}) {
    if (!b->supports(Op::Matmul, {dtype})) {
      report.declined(Op::Matmul, dtype);
      continue;
    }
    // n: 1 row, odd, past one 64-row tile; m: non-multiples of 64; k: one group, odd group
    // counts, 1024 (the model widths).
    for (auto [n, k, m] : {std::tuple{1, 64, 1},
                           {1, 1024, 37},
                           {3, 192, 65},
                           {17, 128, 130},
                           {64, 256, 64},
                           {93, 320, 71},
                           {130, 1024, 200}}) {
      for (bool raw : {false, true}) {
        const std::string name = std::to_string(n) + "x" + std::to_string(k) + "x" +
                                 std::to_string(m) + (raw ? " raw blocks" : " group-64");
        SCOPED_TRACE(name);
        std::vector<uint8_t> w = weight_bytes(dtype, m, k, raw, rng);
        HostData x = make_host_data(DType::F32, size_t(n * k), rng);
        Tensor xt = to_backend(*b, "x", DType::F32, {n, k}, x);
        const Tensor host_w("w", dtype, {m, k}, Device::CPU, w.data(), nullptr);
        Tensor wt = b->prepare_weight(host_w);
        Tensor out = b->alloc("out", DType::F32, {n, m});
        b->matmul(xt, wt, out);
        report.check(Op::Matmul, dtype, name, read_back(*b, out),
                     dequantized_matmul(x.values, dtype, w, n, k, m));
      }
    }
    // A weight whose width is not x's is refused.
    Tensor x = b->alloc("x", DType::F32, {2, 64});
    std::vector<uint8_t> bad(dtype_bytes(dtype, 96) * 2);
    const Tensor host_bad("w", dtype, {2, 96}, Device::CPU, bad.data(), nullptr);
    Tensor wb = b->prepare_weight(host_bad);
    Tensor out = b->alloc("out", DType::F32, {2, 2});
    EXPECT_THROW(b->matmul(x, wb, out), InvalidArgument);
  }
}

// The fused entry points the Qwen3 layer calls (q/k/v through matmul_multi, gate/up through
// matmul_swiglu) take quantized weights as well: they used to demand float weights on CUDA, so a
// quantized model failed at its first forward although plain matmul supported the format.
TEST_P(QuantOps, FusedMatmulsTakeQuantizedWeights) {
  auto b = GetParam().make();
  if (b->device() == Device::CPU)  // int8 activations there: its own reference
    GTEST_SKIP() << "CPU quantized matmul: tests/backend/quant_matmul_test.cpp";
  OpReport report(GetParam().name);
  std::mt19937 rng(12);
  for (DType dtype : {DType::Q8_0, DType::Q4_0}) {
    if (!b->supports(Op::Matmul, {dtype})) {
      report.declined(Op::Matmul, dtype);
      continue;
    }
    for (auto [n, k, m] : {std::tuple{1, 128, 40}, {3, 256, 33}, {9, 192, 70}}) {
      const std::string name =
          std::to_string(n) + "x" + std::to_string(k) + "x" + std::to_string(m);
      SCOPED_TRACE(name);
      HostData x = make_host_data(DType::F32, size_t(n * k), rng);
      Tensor xt = to_backend(*b, "x", DType::F32, {n, k}, x);
      std::vector<std::vector<uint8_t>> w;
      std::vector<Tensor> wt, out;
      for (int i = 0; i < 3; ++i) {
        w.push_back(weight_bytes(dtype, m, k, false, rng));
        const Tensor host("w" + std::to_string(i), dtype, {m, k}, Device::CPU, w.back().data(),
                          nullptr);
        wt.push_back(b->prepare_weight(host));
        out.push_back(b->alloc("out" + std::to_string(i), DType::F32, {n, m}));
      }
      const Tensor* ws[] = {&wt[0], &wt[1], &wt[2]};
      Tensor* outs[] = {&out[0], &out[1], &out[2]};
      b->matmul_multi(xt, ws, outs);
      for (size_t i = 0; i < 3; ++i)
        report.check(Op::Matmul, dtype, name + " multi " + std::to_string(i), read_back(*b, out[i]),
                     dequantized_matmul(x.values, dtype, w[i], n, k, m));
      Tensor gate = b->alloc("gate", DType::F32, {n, m}), up = b->alloc("up", DType::F32, {n, m});
      b->matmul_swiglu(xt, wt[0], wt[1], gate, up);
      const std::vector<double> g = dequantized_matmul(x.values, dtype, w[0], n, k, m),
                                u = dequantized_matmul(x.values, dtype, w[1], n, k, m);
      std::vector<double> want(g.size());
      for (size_t i = 0; i < g.size(); ++i) want[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      report.check(Op::MatmulSwiglu, dtype, name, read_back(*b, gate), want);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, QuantOps, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
