// Encoder forward latency on any backend (the ModernBERT-large figures: 1x93, 50x93,
// 10x512, 64x512 tokens), on dummy weights: the median of --runs hidden_states() calls per batch
// after a warm-up. hidden_states() ends with the [T, hidden] f32 copy to the host; the same copy
// is timed alone (to_host of a tensor that size) and reported beside it, so the device time is
// the difference. Raw samples go to --json.
//
//   encoder_speed --config bench/configs/modernbert-large --device cuda \
//       --batch 1x93,50x93,10x512,64x512 --runs 20 --json out.json
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "model/encoder.h"

namespace {

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

template <typename F>
std::vector<double> time_ms(int warmup, int runs, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < warmup + runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double t =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (r >= warmup) ms.push_back(t);
  }
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Encoder forward latency on any backend, dummy weights"};
  std::string config = "bench/configs/modernbert-large", device = "auto", out;
  std::vector<std::string> batches = {"1x93", "50x93", "10x512", "64x512"};
  int runs = 20, warmup = 2;
  app.add_option("--config", config, "Model folder (config.json)");
  app.add_option("--device", device, "cpu, cuda or auto");
  app.add_option("--batch", batches, "Batches as SEQUENCESxTOKENS")->delimiter(',');
  app.add_option("--runs", runs, "Measured runs per batch")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", warmup, "Unmeasured runs first")->check(CLI::Range(0, 100));
  app.add_option("--json", out, "JSON file for every sample");
  CLI11_PARSE(app, argc, argv);
  nlohmann::json result = {{"config", config}, {"cases", nlohmann::json::array()}};
  try {
    auto backend = infera::make_backend({.device = device});
    auto model = infera::load_encoder(config, *backend, {.dummy_weights = true, .dummy_seed = 1});
    const infera::ModelInfo& info = model->info();
    std::printf("%s on %s\n", info.summary().c_str(), backend->name().c_str());
    result["model"] = info.summary();
    result["backend"] = backend->name();
    for (const std::string& spec : batches) {
      const auto x = spec.find('x');
      const int seqs = std::stoi(spec.substr(0, x)), len = std::stoi(spec.substr(x + 1));
      std::mt19937 rng(7);
      std::vector<std::vector<int32_t>> ids(static_cast<size_t>(seqs));
      for (auto& s : ids)
        for (int i = 0; i < len; ++i)
          s.push_back(static_cast<int32_t>(rng() % uint32_t(info.vocab)));
      const infera::BatchDesc batch = infera::encoder_batch(ids);
      const int64_t n = batch.num_tokens();
      std::vector<float> hidden(static_cast<size_t>(n * info.hidden));
      const auto fwd = time_ms(warmup, runs, [&] { model->hidden_states(batch, hidden); });
      infera::Tensor t = backend->alloc("hidden", infera::DType::F32, {n, info.hidden});
      const auto copy = time_ms(warmup, runs, [&] { backend->to_host(t, hidden); });
      const double f = median_ms(fwd), c = median_ms(copy);
      std::printf(
          "forward %-7s %6lld tokens: median %8.3f ms (copy of the output alone %6.3f ms, "
          "difference %8.3f ms)\n",
          spec.c_str(), static_cast<long long>(n), f, c, f - c);
      result["cases"].push_back({{"batch", spec},
                                 {"tokens", n},
                                 {"forward_ms", fwd},
                                 {"forward_median_ms", f},
                                 {"output_copy_ms", copy},
                                 {"output_copy_median_ms", c}});
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "encoder_speed: %s\n", e.what());
    return 1;
  }
  if (!out.empty()) std::ofstream(out) << result.dump(1) << "\n";
  return 0;
}
