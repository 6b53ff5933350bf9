// Matmul throughput of every weight type on the same shapes, interleaved in one run (each
// repetition times bf16, q8_0, q4_0, q4_k, q6_k back to back, so machine noise hits all alike),
// reported as min / median / p95 with the median ratio to bf16, and written with the raw samples
// to bench/results/matmul_interleaved-<time>.json.
//   build/release/bench/matmul_interleaved [--repeats 15] [--threads 2] [--cpu-time 1]
//       [--case mlp_up_prefill128] [--types bf16,bf16_dot]
// --cpu-time 1 times each call in process CPU time instead of wall time: with --threads 1 that
// leaves out the time the thread is descheduled on a machine that others load (memory bandwidth
// contention still counts).
// Decode shapes (1 row) are memory bound: weight GB/s is the number that matters. Prefill
// (128 rows) is compute bound: GFLOP/s (2 * n * m * k per call). "q4_0_rg" / "q4_k_rg" /
// "q6_k_rg" are the weights after the backend's prepare_weight (row groups where the CPU has the
// 512-bit kernels and INFERA_CPU_REPACK asks for them: run with =all to see every type's),
// "q4_0" / "q4_k" / "q6_k" the file's layout. A case with copies > 1 cycles through that many
// distinct weights per sample (more than the last-level cache holds: each matrix comes from DRAM,
// as in a decode step).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/quant_matmul.h"
#include "infera/tensor.h"
#include "ops/backend.h"
#include "quant/block_formats.h"

namespace {

using infera::DType;
using infera::Tensor;

struct Case {
  const char* name;
  int64_t n, m, k;
  int copies = 1;
};

// Random blocks with finite scales (|d| < 1): timing does not depend on the values, and random
// bytes avoid quantizing 155M floats first.
std::vector<uint8_t> random_weight(DType dtype, int64_t m, int64_t k, uint32_t seed) {
  std::vector<uint8_t> w(infera::dtype_bytes(dtype, static_cast<size_t>(m * k)));
  std::mt19937 rng(seed);
  for (size_t i = 0; i + 4 <= w.size(); i += 4) {
    const uint32_t r = rng();
    std::memcpy(&w[i], &r, 4);
  }
  if (dtype == DType::BF16) {
    for (size_t i = 1; i < w.size(); i += 2) w[i] &= 0x3F;  // small finite values
    return w;
  }
  const size_t block =
      infera::dtype_bytes(dtype, static_cast<size_t>(infera::dtype_block_size(dtype)));
  std::vector<size_t> halves = dtype == DType::Q4_K   ? std::vector<size_t>{0, 2}
                               : dtype == DType::Q6_K ? std::vector<size_t>{208}
                                                      : std::vector<size_t>{0};
  for (size_t off = 0; off + block <= w.size(); off += block)
    for (size_t h : halves) w[off + h + 1] &= 0x3B;
  return w;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * double(v.size() - 1) + 0.5));
  return v[i];
}

// Seconds on the wall clock, or of this process's CPU time.
double now(bool cpu_time) {
  if (!cpu_time)
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 15, threads = 2;
  bool cpu_time = false;
  std::string only_case, only_types;  // comma-separated filters (empty: all)
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeats")) repeats = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--threads")) threads = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--cpu-time")) cpu_time = std::atoi(argv[i + 1]) != 0;
    if (!std::strcmp(argv[i], "--case")) only_case = argv[i + 1];
    if (!std::strcmp(argv[i], "--types")) only_types = argv[i + 1];
  }
  auto backend = infera::make_cpu_backend(threads);
  // "bf16_dot": the same bf16 weights through --matmul-precision bf16 (AVX512-BF16 dot products).
  auto bf16_backend = infera::make_cpu_backend(threads, infera::PackedAttentionSchedule::Windowed,
                                               infera::MatmulPrecision::BF16);
  // "bf16_pk": the same through prepare_weight, packed in the broadcast form
  // (matmul_bf16_packed.h).
  const DType types[] = {DType::BF16, DType::BF16, DType::BF16, DType::Q8_0, DType::Q4_0,
                         DType::Q4_0, DType::Q4_K, DType::Q4_K, DType::Q6_K, DType::Q6_K};
  const char* labels[] = {"bf16",    "bf16_dot", "bf16_pk", "q8_0", "q4_0",
                          "q4_0_rg", "q4_k",     "q4_k_rg", "q6_k", "q6_k_rg"};
  // Through prepare_weight (row groups / bf16 pairs where the setting and the CPU allow).
  const auto prepared = [](size_t ti) { return ti == 2 || ti == 5 || ti == 7 || ti == 9; };
  const auto backend_for = [&](size_t ti) -> infera::Backend& {
    return ti == 1 || ti == 2 ? *bf16_backend : *backend;
  };
  const Case cases[] = {{"lm_head_decode", 1, 151936, 1024},
                        {"mlp_up_decode_x48_dram", 1, 3072, 1024, 48},
                        {"mlp_down_decode_x48_dram", 1, 1024, 3072, 48},
                        {"attn_q_decode_x64_dram", 1, 2048, 1024, 64},
                        {"mlp_up_decode", 1, 3072, 1024},
                        {"mlp_up_batch8", 8, 3072, 1024},
                        {"mlp_up_prefill128", 128, 3072, 1024},
                        {"mlp_down_prefill512", 512, 1024, 3072}};
  std::string json = "{\"threads\": " + std::to_string(threads) +
                     ", \"cpu_time\": " + (cpu_time ? "true" : "false") + ", \"isa\": \"" +
                     infera::cpu::quant_kernel_target_name() + "\", \"backend\": \"" +
                     backend->name() + "\", \"repeats\": " + std::to_string(repeats) +
                     ", \"cases\": [";
  std::printf("%s, quantized kernels on %s, %d repeats interleaved\n", backend->name().c_str(),
              infera::cpu::quant_kernel_target_name(), repeats);
  const auto listed = [](const std::string& list, const std::string& name) {
    return list.empty() || ("," + list + ",").find("," + name + ",") != std::string::npos;
  };
  std::vector<size_t> kept;  // the types measured
  for (size_t ti = 0; ti < std::size(types); ++ti)
    if (listed(only_types, labels[ti])) kept.push_back(ti);
  bool first_case = true;
  for (size_t ci = 0; ci < std::size(cases); ++ci) {
    const Case& c = cases[ci];
    if (!listed(only_case, c.name)) continue;
    std::vector<std::vector<std::vector<uint8_t>>> storage(std::size(types));
    std::vector<std::vector<Tensor>> w(std::size(types));  // [type][copy]
    for (size_t ti : kept) {
      for (int cp = 0; cp < c.copies; ++cp) {
        storage[ti].push_back(random_weight(types[ti], c.m, c.k, 7 + uint32_t(cp)));
        Tensor t("w", types[ti], infera::Shape{c.m, c.k}, infera::Device::CPU,
                 storage[ti].back().data(), nullptr);
        w[ti].push_back(prepared(ti) ? backend_for(ti).prepare_weight(t) : t);
      }
    }
    Tensor x = backend->alloc("x", DType::F32, {c.n, c.k});
    std::mt19937 rng(3);
    std::normal_distribution<float> dist;
    for (int64_t i = 0; i < c.n * c.k; ++i) x.data_as<float>()[i] = dist(rng);
    Tensor out = backend->alloc("out", DType::F32, {c.n, c.m});
    std::vector<std::vector<double>> seconds(std::size(types));
    for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up, not recorded
      for (size_t ti : kept) {
        const double t0 = now(cpu_time);
        for (const Tensor& wc : w[ti]) backend_for(ti).matmul(x, wc, out);
        const double s = now(cpu_time) - t0;
        if (r >= 0) seconds[ti].push_back(s);
      }
    }
    std::printf("\n%s: x [%ld, %ld] . w [%ld, %ld]^T\n", c.name, long(c.n), long(c.k), long(c.m),
                long(c.k));
    std::printf("  %-5s %10s %10s %10s %12s %10s %12s\n", "type", "min ms", "median ms", "p95 ms",
                "weight GB/s", "GFLOP/s", "vs first (x)");
    const double bf16_median = percentile(seconds[kept.front()], 0.5);
    json += std::string(first_case ? "" : ", ") + "{\"name\": \"" + c.name +
            "\", \"copies\": " + std::to_string(c.copies) + ", \"n\": " + std::to_string(c.n) +
            ", \"m\": " + std::to_string(c.m) + ", \"k\": " + std::to_string(c.k) +
            ", \"types\": [";
    first_case = false;
    for (size_t ti : kept) {
      const double med = percentile(seconds[ti], 0.5);
      const double bytes = double(storage[ti].front().size()) * c.copies;
      const double flops = 2.0 * double(c.n) * double(c.m) * double(c.k) * c.copies;
      std::printf("  %-5s %10.3f %10.3f %10.3f %12.2f %10.1f %12.2f\n", labels[ti],
                  1e3 * percentile(seconds[ti], 0), 1e3 * med, 1e3 * percentile(seconds[ti], 0.95),
                  bytes / med / 1e9, flops / med / 1e9, bf16_median / med);
      json += std::string(ti == kept.front() ? "" : ", ") + "{\"dtype\": \"" + labels[ti] +
              "\", \"weight_bytes\": " + std::to_string(size_t(bytes)) + ", \"seconds\": [";
      for (size_t i = 0; i < seconds[ti].size(); ++i)
        json += (i ? ", " : "") + std::to_string(seconds[ti][i]);
      json += "]}";
    }
    json += "]}";
  }
  json += "]}\n";
  const std::filesystem::path dir = std::filesystem::path(INFERA_SOURCE_DIR) / "bench" / "results";
  std::filesystem::create_directories(dir);
  // Seconds and milliseconds: runs started within one second (an A/B script) keep apart.
  const auto path = dir / ("matmul_interleaved-" + std::to_string(std::time(nullptr)) + "-" +
                           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count() %
                                          1000) +
                           ".json");
  std::ofstream(path) << json;
  std::printf("\nraw samples: %s\n", path.c_str());
  return 0;
}
