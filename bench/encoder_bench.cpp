// Encoder latency on dummy weights (ModernBERT-large and mmBERT-base shapes by default), on the CPU
// or CUDA, with local layers scheduled windowed (only the key tiles a window needs) and dense
// (every key tile, masked per row), the two interleaved run by run so that machine noise hits
// both alike:
//  - attention: one local layer's attention_packed at the model's shape and the batch's lengths;
//  - forward:   the whole forward pass of the packed batch up to the last hidden states, left on
//               the backend's device and synchronized (as a transformers peer times
//               `model(...)` + `torch.cuda.synchronize()`); the [T, hidden] f32 copy to the host
//               is timed alone (output_copy): a caller that needs every hidden state on the host
//               pays the sum.
// Prints min / median / p95 per case and the median ratio dense / windowed; writes every sample
// to a JSON file.
//
//   build/release/bench/encoder_bench --runs 50 --attention-runs 50 --out bench/results/enc.json
//   build/release/bench/encoder_bench --device cuda --batch 1x93 --batch 50x93 --batch 10x512 \
//       --batch 64x512 --runs 50 --out enc_cuda.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "bench/process_usage.h"
#include "bench/stats.h"
#ifdef INFERA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "model/encoder.h"

namespace {

using infera::BatchDesc;
using Json = nlohmann::json;

// The project's shared statistics (src/bench): type-7 percentiles as numpy, peak RSS from VmHWM.
double peak_rss_mb() {
  return static_cast<double>(infera::bench::peak_rss_bytes()) / (1024.0 * 1024.0);
}

// q as a fraction (0.5 = median); NaN for no samples.
double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return infera::bench::percentile_sorted(v, q * 100.0);
}

Json summary(const std::vector<double>& ms) {
  return {{"min_ms", percentile(ms, 0.0)},
          {"median_ms", percentile(ms, 0.5)},
          {"p95_ms", percentile(ms, 0.95)},
          {"runs", ms.size()}};
}

// Interleaved timing of f(0) (windowed) and f(1) (dense), or f(0) alone (modes 1); returns the
// samples of each, in ms.
template <typename F>
std::array<std::vector<double>, 2> interleaved(int warmup, int runs, int modes, F&& f) {
  std::array<std::vector<double>, 2> ms;
  for (int r = 0; r < warmup + runs; ++r)
    for (int k = 0; k < modes; ++k) {  // alternate which goes first, so neither always runs warmer
      const int m = (r + k) % modes;
      const auto t0 = std::chrono::steady_clock::now();
      f(m);
      const double t =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r >= warmup) ms[static_cast<size_t>(m)].push_back(t);
    }
  return ms;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(double(a[i]) - double(b[i]));
    if (!std::isfinite(d)) return INFINITY;
    diff = std::max(diff, d);
  }
  return diff;
}

void report(const char* what, const std::string& spec, Json& c, int64_t tokens) {
  const char* names[2] = {"windowed", "dense"};
  for (const char* n : names) {
    if (!c.contains(n)) continue;  // --windowed-only
    std::printf(
        "  %-9s %-7s %-8s min %9.2f  median %9.2f  p95 %9.2f ms  (%.0f tokens/s, %lld key "
        "tiles)\n",
        what, spec.c_str(), n, c[n]["min_ms"].get<double>(), c[n]["median_ms"].get<double>(),
        c[n]["p95_ms"].get<double>(), double(tokens) / c[n]["median_ms"].get<double>() * 1e3,
        static_cast<long long>(c[n]["key_tiles"].get<int64_t>()));
  }
  if (!c.contains("dense")) {
    std::fflush(stdout);
    return;
  }
  c["dense_over_windowed_median"] =
      c["dense"]["median_ms"].get<double>() / c["windowed"]["median_ms"].get<double>();
  std::printf("  %-9s %-7s dense / windowed median %.3f; outputs differ by %.1e\n", what,
              spec.c_str(), c["dense_over_windowed_median"].get<double>(),
              c["windowed_vs_dense_max_abs_diff"].get<double>());
  std::fflush(stdout);
}

struct Mode {
  const char* name;
  std::unique_ptr<infera::Backend> backend;
  std::unique_ptr<infera::Encoder> model;
};

// Host seconds the CUDA backend spent recording steps and in their flushes so far (0 elsewhere).
double host_seconds(infera::Backend& backend) {
#ifdef INFERA_WITH_CUDA
  if (const auto s = infera::cuda_stats(backend))
    return s->host_record_seconds + s->host_flush_seconds;
#endif
  (void)backend;
  return 0;
}

int64_t local_attention(const std::string& config_dir) {
  std::ifstream in(std::filesystem::path(config_dir) / "config.json");
  const Json j = Json::parse(in);
  return j.value("local_attention", int64_t{128});
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Encoder forward latency, windowed vs dense local attention, on dummy weights"};
  std::vector<std::string> configs = {"bench/configs/modernbert-large",
                                      "bench/configs/mmbert-base"};
  std::vector<std::string> batches = {"50x93", "10x512"};
  int runs = 50, attention_runs = 50, warmup = 1, threads = 0;
  std::string out;
  app.add_option("--config", configs, "Model folders (config.json) to run with dummy weights");
  app.add_option("--batch", batches, "Batches as SEQUENCESxTOKENS");
  app.add_option("--runs", runs, "Measured forward runs per case and mode (0: none)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--attention-runs", attention_runs,
                 "Measured runs of one local layer's attention per case and mode (0: none)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--warmup", warmup, "Unmeasured runs first")->check(CLI::Range(0, 100));
  app.add_option("--threads", threads, "CPU threads (0: one per core; the CPU only)");
  std::string precision = "f32";
  app.add_option("--matmul-precision", precision,
                 "bf16-weight matmuls: f32 activations, or bf16 dot products (AVX512-BF16)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  std::string device = "cpu";
  app.add_option("--device", device, "cpu, cuda or auto");
  bool profile = false;
  app.add_flag("--profile", profile,
               "CUDA with INFERA_CUDA_PROFILE=1: print device time per (op, kernel) of the "
               "windowed forward runs of each batch (eager launches, so shares, not latency)");
  app.add_option("--out", out, "JSON file for every sample");
  bool windowed_only = false;
  app.add_flag("--windowed-only", windowed_only,
               "Time the windowed schedule alone (A/B runs of other switches: half the time)");
  CLI11_PARSE(app, argc, argv);
  const int nm = windowed_only ? 1 : 2;  // modes timed

  Json result = {{"runs", runs},          {"attention_runs", attention_runs}, {"warmup", warmup},
                 {"threads", threads},    {"matmul_precision", precision},    {"device", device},
                 {"cases", Json::array()}};
  try {
    for (const std::string& config : configs) {
      Mode modes[2] = {{"windowed", nullptr, nullptr}, {"dense", nullptr, nullptr}};
      for (int mi = 0; mi < nm; ++mi) {
        Mode& m = modes[mi];
        m.backend = infera::make_backend({.device = device,
                                          .threads = threads,
                                          .matmul_precision = precision,
                                          .packed_attention = m.name});
        m.model =
            infera::load_encoder(config, *m.backend, {.dummy_weights = true, .dummy_seed = 1});
      }
      const infera::ModelInfo& info = modes[0].model->info();
      std::printf("%s: %s, %s\n", config.c_str(), info.summary().c_str(),
                  modes[0].backend->name().c_str());
      for (const std::string& spec : batches) {
        const auto x = spec.find('x');
        const int seqs = std::stoi(spec.substr(0, x)), len = std::stoi(spec.substr(x + 1));
        std::mt19937 rng(7);
        std::vector<std::vector<int32_t>> ids(static_cast<size_t>(seqs));
        for (auto& s : ids)
          for (int i = 0; i < len; ++i)
            s.push_back(static_cast<int32_t>(rng() % uint32_t(info.vocab)));
        const BatchDesc batch = infera::encoder_batch(ids);
        const int64_t n = batch.num_tokens();

        // One local layer's attention at this shape: q, k, v random, window local_attention / 2.
        if (attention_runs > 0) {
          std::array<std::vector<float>, 2> out;
          std::array<int64_t, 2> tiles{};
          const int64_t heads = info.q_heads, d = info.head_dim;
          std::vector<float> host(static_cast<size_t>(n * heads * d));
          std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
          for (float& v : host) v = dist(rng);
          const infera::Shape shape{n, heads, d};
          const int32_t window = static_cast<int32_t>(local_attention(config) / 2);
          std::array<infera::Tensor, 2> q, o;
          // prepare_weight uses the host tensor in place (CPU) or copies it to the device.
          const infera::Tensor host_q("q", infera::DType::F32, shape, infera::Device::CPU,
                                      host.data(), nullptr);
          for (int m = 0; m < nm; ++m) {
            infera::Backend& b = *modes[m].backend;
            q[m] = b.prepare_weight(host_q);
            o[m] = b.alloc("out", infera::DType::F32, shape);
            out[m].resize(host.size());
          }
          const infera::Batch batches[2] = {
              modes[0].backend->upload_batch(batch),
              nm > 1 ? modes[1].backend->upload_batch(batch) : infera::Batch{}};
          const infera::AttentionParams params{
              .scale = 1.0f / std::sqrt(float(d)), .causal = false, .window = window};
          auto ms = interleaved(warmup, attention_runs, nm, [&](int m) {
            infera::Backend& b = *modes[m].backend;
            b.reset_op_stats();
            b.attention_packed(q[m], q[m], q[m], batches[m], params, o[m]);
            b.synchronize();  // a device backend runs ops asynchronously
            tiles[static_cast<size_t>(m)] = b.op_stats().packed_key_tiles;
          });
          for (int m = 0; m < nm; ++m) modes[m].backend->to_host(o[m], out[static_cast<size_t>(m)]);
          Json c = {{"kind", "attention_local_layer"},
                    {"config", config},
                    {"batch", spec},
                    {"tokens", n},
                    {"window", window},
                    {"backend", modes[0].backend->name()},
                    {"windowed_vs_dense_max_abs_diff",
                     nm > 1 ? max_abs_diff(out[0], out[1]) : 0.0}};
          for (int m = 0; m < nm; ++m) {
            c[modes[m].name] = summary(ms[static_cast<size_t>(m)]);
            c[modes[m].name]["samples_ms"] = ms[static_cast<size_t>(m)];
            c[modes[m].name]["key_tiles"] = tiles[static_cast<size_t>(m)];
          }
          report("attention", spec, c, n);
          result["cases"].push_back(c);
        }

        if (runs > 0) {
#ifdef INFERA_WITH_CUDA
          if (profile)  // drop what the attention runs counted
            for (int m = 0; m < nm; ++m) infera::cuda_profile_report(*modes[m].backend);
#endif
          std::array<std::vector<float>, 2> hidden;
          std::array<int64_t, 2> tiles{};
          std::array<std::vector<double>, 2> host_us;  // per run: host recording + flush (CUDA)
          for (auto& h : hidden) h.resize(static_cast<size_t>(n * info.hidden));
          auto ms = interleaved(warmup, runs, nm, [&](int m) {
            const double host_before = host_seconds(*modes[m].backend);
            modes[m].backend->reset_op_stats();
            modes[m].model->hidden_states_on_device(batch);
            modes[m].backend->synchronize();  // a device backend runs ops asynchronously
            tiles[static_cast<size_t>(m)] = modes[m].backend->op_stats().packed_key_tiles;
            host_us[static_cast<size_t>(m)].push_back(
                (host_seconds(*modes[m].backend) - host_before) * 1e6);
          });
          // The two schedules' outputs, compared once outside the timed runs.
          for (int m = 0; m < nm; ++m)
            modes[m].model->hidden_states(batch, hidden[static_cast<size_t>(m)]);
          Json c = {{"kind", "forward"},
                    {"config", config},
                    {"model", info.summary()},
                    {"batch", spec},
                    {"tokens", n},
                    {"backend", modes[0].backend->name()},
                    {"output", "device"},
                    {"windowed_vs_dense_max_abs_diff",
                     nm > 1 ? max_abs_diff(hidden[0], hidden[1]) : 0.0}};
          for (int m = 0; m < nm; ++m) {
            c[modes[m].name] = summary(ms[static_cast<size_t>(m)]);
            c[modes[m].name]["samples_ms"] = ms[static_cast<size_t>(m)];
            c[modes[m].name]["key_tiles"] = tiles[static_cast<size_t>(m)];
            // The timed runs' host recording + flush: what the GPU waits for before a replayed
            // forward's graph can start (0 off CUDA).
            auto& h = host_us[static_cast<size_t>(m)];
            h.erase(h.begin(), h.begin() + std::min<std::ptrdiff_t>(warmup, std::ssize(h)));
            std::sort(h.begin(), h.end());
            c[modes[m].name]["host_record_flush_us_median"] = h.empty() ? 0.0 : h[h.size() / 2];
          }
          std::printf("  %-9s %-7s host recording + flush: median %.1f us a forward\n", "forward",
                      spec.c_str(), c[modes[0].name]["host_record_flush_us_median"].get<double>());
          // The output copy alone (to_host of a tensor of the output's size), once per run.
          infera::Backend& b0 = *modes[0].backend;
          const infera::Tensor t = b0.alloc("hidden", infera::DType::F32, {n, info.hidden});
          std::vector<double> copy;
          for (int r = 0; r < runs; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            b0.to_host(t, hidden[0]);
            copy.push_back(
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count());
          }
          c["output_copy"] = summary(copy);
          c["output_copy"]["samples_ms"] = copy;
          report("forward", spec, c, n);
#ifdef INFERA_WITH_CUDA
          if (profile) {
            const std::string table = infera::cuda_profile_report(*modes[0].backend);
            std::printf("  profile of the windowed forward runs, %s:\n%s", spec.c_str(),
                        table.empty() ? "  (none: set INFERA_CUDA_PROFILE=1 with --device cuda)\n"
                                      : table.c_str());
            c["windowed_profile"] = table;
            if (nm > 1) infera::cuda_profile_report(*modes[1].backend);  // discard the dense counts
          }
#endif
          std::printf("  %-9s %-7s output copy alone (not in the times above): median %.3f ms\n",
                      "forward", spec.c_str(), c["output_copy"]["median_ms"].get<double>());
          result["cases"].push_back(c);
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "encoder_bench: error: %s\n", e.what());
    return 1;
  }
  result["peak_rss_mb"] = peak_rss_mb();
  std::printf("peak RSS %.0f MB\n", peak_rss_mb());
  if (!out.empty()) std::ofstream(out) << result.dump(1) << "\n";
  return 0;
}
