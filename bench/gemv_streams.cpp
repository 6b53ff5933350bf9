// Single-row quantized (and packed bf16) GEMVs with one weight stream per thread
// (INFERA_CPU_GEMV_STREAMS=1, the previous kernels) against S streams in lockstep, alternating in
// one process: every round times each type's 1-stream pass and its S-stream pass back to back (the
// order flips every round), so machine noise hits both alike; the per-round ratio t(1) / t(S) (> 1:
// lockstep faster) is reported as median [min, max] with each side's weight GB/s, then the ratio of
// the fastest passes (on a loaded machine the least disturbed ones), and the raw seconds go to
// --out.
//   build/release/bench/gemv_streams [--streams 4] [--rounds 15] [--threads 2] [--cpu-time 0]
//       [--case lm_head] [--types q8_0,q4_0_rg] [--out file.json]
// Weights are random blocks (finite scales) through the backend's prepare_weight, so "q4_0_rg" /
// "q4_k_rg" are row groups where the CPU has the 512-bit kernels (as a model load makes them);
// "q8_0" / "q6_k" are the file layout (as the decode of q8_0 / q4_k_m files reads them). A case
// with copies > 1 cycles through that many distinct weights per pass (DRAM-streamed, as decode).
// --versus rows: the "1" side is instead the file layout (INFERA_CPU_REPACK=0, auto streams) and
// the "S" side the default preparation (row groups where the CPU has their kernels; auto streams):
// the layout A/B of Q8_0 / Q6_K row groups. --probe 1: every round also reads the bench's
// bandwidth probe buffer (src/bench/machine_probe.h: 512 MiB, four streams per thread, wall time)
// once, and each side's GB/s is printed as a fraction of the probes' median too (use wall time).
// --prefetch1 B / --prefetchS B: the row-group software prefetch distance of each side
// (weight_rowgroups.h; default: the setting, INFERA_CPU_ROWGROUP_PREFETCH or its default), so
// --streams1 N: the "1" side's stream count (default 1), so `--streams 4 --streams1 4
// --prefetch1 1024 --prefetchS 0` alternates 1 KiB prefetch against none at 4 streams.
// --gfni1 0|1 / --gfniS 0|1: the Q6_K unpack of each side (quant_matmul.h, q6_k_gfni_unpack;
// default the setting), so `--streams 4 --streams1 4 --gfni1 0 --gfniS 1 --types q6_k` is the GFNI
// A/B.
#include <stdlib.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/weight_rowgroups.h"
#include "bench/machine_probe.h"
#include "infera/tensor.h"
#include "ops/backend.h"

namespace {

using infera::DType;
using infera::Tensor;

struct Case {
  const char* name;
  int64_t m, k;
  int copies;
};

// Random blocks with finite scales (|d| < 1), as matmul_interleaved makes them.
std::vector<uint8_t> random_weight(DType dtype, int64_t m, int64_t k, uint32_t seed) {
  std::vector<uint8_t> w(infera::dtype_bytes(dtype, static_cast<size_t>(m * k)));
  std::mt19937 rng(seed);
  if (dtype == DType::BF16) {  // normal values' top halves (finite)
    std::normal_distribution<float> dist;
    for (size_t i = 0; i + 2 <= w.size(); i += 2) {
      const float f = dist(rng);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      const uint16_t top = static_cast<uint16_t>(bits >> 16);
      std::memcpy(&w[i], &top, 2);
    }
    return w;
  }
  for (size_t i = 0; i + 4 <= w.size(); i += 4) {
    const uint32_t r = rng();
    std::memcpy(&w[i], &r, 4);
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

double now(bool cpu_time) {
  if (!cpu_time)
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * double(v.size() - 1) + 0.5))];
}

std::string list_json(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

}  // namespace

int main(int argc, char** argv) {
  int streams = 4, streams1 = 1, rounds = 15, threads = 2;
  bool cpu_time = false, versus_rows = false, probe = false;
  int64_t prefetch1 = infera::cpu::rowgroup_prefetch_bytes(), prefetch_s = prefetch1;
  bool gfni1 = infera::cpu::q6_k_gfni_unpack(), gfni_s = gfni1;
  std::string only_case, only_types, out_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--streams")) streams = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--threads")) threads = std::max(1, std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--cpu-time")) cpu_time = std::atoi(argv[i + 1]) != 0;
    if (!std::strcmp(argv[i], "--case")) only_case = argv[i + 1];
    if (!std::strcmp(argv[i], "--types")) only_types = argv[i + 1];
    if (!std::strcmp(argv[i], "--out")) out_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--versus")) versus_rows = !std::strcmp(argv[i + 1], "rows");
    if (!std::strcmp(argv[i], "--probe")) probe = std::atoi(argv[i + 1]) != 0;
    if (!std::strcmp(argv[i], "--streams1")) streams1 = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prefetch1")) prefetch1 = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prefetchS")) prefetch_s = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--gfni1")) gfni1 = std::atoi(argv[i + 1]) != 0;
    if (!std::strcmp(argv[i], "--gfniS")) gfni_s = std::atoi(argv[i + 1]) != 0;
  }
  infera::cpu::set_quant_gemv_streams(streams);  // validates the value
  auto backend = infera::make_cpu_backend(threads);
  // The file layout's backend for --versus rows (the repack setting is read at construction).
  const char* repack_env = std::getenv("INFERA_CPU_REPACK");
  const std::string repack_before = repack_env ? repack_env : "";
  setenv("INFERA_CPU_REPACK", "0", 1);
  auto rows_backend = infera::make_cpu_backend(threads);
  if (repack_env) {  // the caller's setting back, for the backends made below
    setenv("INFERA_CPU_REPACK", repack_before.c_str(), 1);
  } else {
    unsetenv("INFERA_CPU_REPACK");
  }
  std::unique_ptr<infera::bench::ReadBuffer> probe_buffer;
  if (probe) {
    probe_buffer = std::make_unique<infera::bench::ReadBuffer>(
        threads, infera::bench::default_bandwidth_buffer_bytes());
    probe_buffer->read_passes(1);  // first touch and warm-up
  }
  // "bf16_pk": bf16 weights packed for --matmul-precision bf16 (matmul_bf16_packed.h), where the
  // CPU has AVX512-BF16 (elsewhere that backend keeps rows: the line then measures the row kernel).
  auto bf16_backend = infera::make_cpu_backend(threads, infera::PackedAttentionSchedule::Windowed,
                                               infera::MatmulPrecision::BF16);
  const struct {
    const char* label;
    DType dtype;
  } types[] = {{"q8_0", DType::Q8_0},
               {"q4_0_rg", DType::Q4_0},
               {"q4_k_rg", DType::Q4_K},
               {"q6_k", DType::Q6_K},
               {"bf16_pk", DType::BF16}};
  const Case cases[] = {{"lm_head", 151936, 1024, 1},
                        {"mlp_up_x48", 3072, 1024, 48},
                        {"mlp_down_x48", 1024, 3072, 48},
                        {"attn_k_x96", 1024, 1024, 96},
                        // cache-resident (one 0.5-1.1 MB weight, L2-sized): the kernel's compute
                        // rate, which others' memory traffic barely moves
                        {"l2_1024", 1024, 1024, 1}};
  const auto listed = [](const std::string& list, const std::string& name) {
    return list.empty() || ("," + list + ",").find("," + name + ",") != std::string::npos;
  };
  if (versus_rows)
    std::printf("%s, %d threads, %s time, file layout (1) vs default preparation (S), %d rounds\n",
                infera::cpu::quant_kernel_target_name(), threads, cpu_time ? "CPU" : "wall",
                rounds);
  else
    std::printf("%s, %d threads, %s time, 1 stream vs %d in lockstep, %d rounds\n",
                infera::cpu::quant_kernel_target_name(), threads, cpu_time ? "CPU" : "wall",
                streams, rounds);
  std::printf("  %-13s %-8s %9s %9s %8s  %s\n", "case", "type", "GB/s (1)", "GB/s (S)", "t1/tS",
              "[min, max] of rounds, fastest t1 / fastest tS");
  std::string json = "{\"threads\": " + std::to_string(threads) +
                     ", \"streams\": " + std::to_string(streams) +
                     ", \"cpu_time\": " + (cpu_time ? "true" : "false") + ", \"isa\": \"" +
                     infera::cpu::quant_kernel_target_name() + "\", \"results\": [";
  bool first = true;
  for (const Case& c : cases) {
    if (!listed(only_case, c.name)) continue;
    Tensor x = backend->alloc("x", DType::F32, {1, c.k});
    std::mt19937 rng(3);
    std::normal_distribution<float> dist;
    for (int64_t i = 0; i < c.k; ++i) x.data_as<float>()[i] = dist(rng);
    Tensor out = backend->alloc("out", DType::F32, {1, c.m});
    for (const auto& ty : types) {
      if (!listed(only_types, ty.label)) continue;
      infera::Backend& be = ty.dtype == DType::BF16 ? *bf16_backend : *backend;
      infera::Backend& be_rows = ty.dtype == DType::BF16 ? *bf16_backend : *rows_backend;
      std::vector<std::vector<uint8_t>> storage;
      std::vector<Tensor> w, w_rows;
      for (int cp = 0; cp < c.copies; ++cp) {
        storage.push_back(random_weight(ty.dtype, c.m, c.k, 7 + uint32_t(cp)));
        const Tensor host("w", ty.dtype, infera::Shape{c.m, c.k}, infera::Device::CPU,
                          storage.back().data(), nullptr);
        w.push_back(be.prepare_weight(host));
        if (versus_rows) w_rows.push_back(be_rows.prepare_weight(host));
      }
      std::vector<double> probes;
      // s = 1: one stream (or, --versus rows, the file layout); else S streams (the default).
      const auto pass = [&](int s) {
        const bool rows_side = versus_rows && s == 1;
        infera::cpu::set_quant_gemv_streams(versus_rows ? 0 : s == 1 ? streams1 : s);
        infera::cpu::set_rowgroup_prefetch_bytes(s == 1 ? prefetch1 : prefetch_s);
        infera::cpu::set_q6_k_gfni_unpack(s == 1 ? gfni1 : gfni_s);
        infera::Backend& b = rows_side ? be_rows : be;
        const double t0 = now(cpu_time);
        for (const Tensor& wc : rows_side ? w_rows : w) b.matmul(x, wc, out);
        const double t = now(cpu_time) - t0;
        if (probe_buffer && s != 1) probes.push_back(probe_buffer->read_passes(1).front());
        return t;
      };
      pass(1);  // warm-up of both paths
      pass(streams);
      std::vector<double> t1, ts, ratio;
      for (int r = 0; r < rounds; ++r) {
        double a, b;
        if (r % 2 == 0) {
          a = pass(1);
          b = pass(streams);
        } else {
          b = pass(streams);
          a = pass(1);
        }
        t1.push_back(a);
        ts.push_back(b);
        ratio.push_back(a / b);
      }
      const double bytes = double(storage.front().size()) * c.copies;
      std::printf("  %-13s %-8s %9.2f %9.2f %8.3f  [%.3f, %.3f] %8.3f", c.name, ty.label,
                  bytes / percentile(t1, 0.5) / 1e9, bytes / percentile(ts, 0.5) / 1e9,
                  percentile(ratio, 0.5), percentile(ratio, 0), percentile(ratio, 1),
                  percentile(t1, 0) / percentile(ts, 0));
      if (!probes.empty()) {
        const double p50 = percentile(probes, 0.5);
        std::printf("   probe %.1f GB/s: (1) %.2f (S) %.2f", p50,
                    bytes / percentile(t1, 0.5) / 1e9 / p50,
                    bytes / percentile(ts, 0.5) / 1e9 / p50);
      }
      std::printf("\n");
      json += std::string(first ? "" : ", ") + "{\"case\": \"" + c.name + "\", \"type\": \"" +
              ty.label + "\", \"weight_bytes\": " + std::to_string(size_t(bytes)) +
              ", \"seconds_1\": " + list_json(t1) + ", \"seconds_s\": " + list_json(ts) +
              ", \"probe_gb_per_s\": " + list_json(probes) + "}";
      first = false;
    }
  }
  json += "]}\n";
  if (!out_path.empty()) std::ofstream(out_path) << json;
  return 0;
}
