// CPU decode settings A/B inside one process: the model is loaded once and the variants take
// turns every --block decode steps, the order rotating each round, with a short read-bandwidth
// probe between blocks. On this project's shared VMs the memory bandwidth moves within seconds
// (15-85 GB/s seen), so separate processes, or even runs a minute apart, compare machine states,
// not code; blocks of a fraction of a second side by side compare code.
//
//   build/release/bench/decode_ab --model build/gguf-0.6b/qwen3-0.6b-dummy-q8_0.gguf --threads 2
//       --variant base: --variant s1:streams=1 --variant dyn:dynamic=1 [--rounds 20] [--block 8]
//       [--context 128] [--kv-dtype bf16] [--out FILE.json]
//
// A variant is NAME:SETTINGS, SETTINGS a comma list of the CPU backend's process-wide decode
// switches: streams=0|1|2|4|8 (quant_gemv_streams; 0 = auto), dynamic=0|1
// (decode_dynamic_rows), prefetch=KiB (decode_idle_prefetch_bytes: what each thread prefetches
// of the next GEMV while idle; 0 = off), paired=0|1 (attention_paired_heads: a decode row's kv
// heads two at a time), repack=LIST (INFERA_CPU_REPACK for this variant's copy of the model:
// "0", "all" or type names such as q4_k,q8_0,q6_k,bf16; variants with different lists load the
// model once each, on backends of their own, and the others share the first's), huge=0|1 (the
// copy's repacked weights on transparent huge pages or not, INFERA_HUGE_PAGES; a copy of its
// own as for repack). Each round
// starts a new sequence on every loaded copy
// (a --context prompt, untimed) and runs one block per variant. Printed per variant: median
// tokens/s, the median of per-round ratios to the first variant [min, max], and the median
// fraction of the adjacent probes (block tokens/s x bytes per token / the mean of the probes
// before and after it, as `infera bench` computes decode.<c>.adjacent_roofline_fraction).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/decode_prefetch.h"
#include "backend/cpu/quant_matmul.h"
#include "bench/machine_monitor.h"
#include "bench/stats.h"
#include "core/huge_pages.h"
#include "bench_lm_adapter.h"
#include "infera/error.h"

namespace {

using namespace infera;

struct Variant {
  std::string name;
  int streams = 0;
  bool dynamic = false;
  int64_t prefetch_kib = 0;
  bool paired = true;
  std::string repack;  // INFERA_CPU_REPACK while its model loads ("": the process's setting)
  int huge = -1;       // huge pages for its copy's weights (-1: the process's setting)
  size_t model = 0;    // which loaded copy it runs
  std::vector<double> tokens_per_second, fraction;
};

Variant parse_variant(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos || colon == 0)
    throw InvalidArgument("--variant " + spec + ": expected NAME:SETTINGS");
  Variant v;
  v.name = spec.substr(0, colon);
  v.streams = cpu::quant_gemv_streams();
  v.dynamic = cpu::decode_dynamic_rows();
  v.prefetch_kib = cpu::decode_idle_prefetch_bytes() >> 10;
  v.paired = cpu::attention_paired_heads();
  std::stringstream in(spec.substr(colon + 1));
  for (std::string kv; std::getline(in, kv, ',');) {
    if (kv.empty()) continue;
    const auto eq = kv.find('=');
    const std::string key = kv.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (key == "streams") {
      char* end = nullptr;
      const long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 0 || n > 8 ||
          !cpu::valid_gemv_streams(static_cast<int>(n)))
        throw InvalidArgument("--variant " + spec + ": streams must be 0 (auto), 1, 2, 4 or 8");
      v.streams = static_cast<int>(n);
    } else if (key == "dynamic" && (value == "0" || value == "1")) {
      v.dynamic = value == "1";
    } else if (key == "paired" && (value == "0" || value == "1")) {
      v.paired = value == "1";
    } else if (key == "prefetch") {
      char* end = nullptr;
      const long long kib = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || kib < 0 || kib > 8192)
        throw InvalidArgument("--variant " + spec + ": prefetch must be KiB in [0, 8192]");
      v.prefetch_kib = kib;
    } else if (key == "huge" && (value == "0" || value == "1")) {
      v.huge = value == "1";
    } else if (key == "repack" && !value.empty()) {
      for (char& c : value)
        if (c == ';') c = ',';  // a list inside the comma list: q4_k;q6_k
      v.repack = value;
    } else {
      throw InvalidArgument("--variant " + spec + ": unknown setting '" + kv + "'");
    }
  }
  return v;
}

void apply(const Variant& v) {
  cpu::set_quant_gemv_streams(v.streams);
  cpu::set_decode_dynamic_rows(v.dynamic);
  cpu::set_decode_idle_prefetch_bytes(v.prefetch_kib << 10);
  cpu::set_attention_paired_heads(v.paired);
}

int run(int argc, char** argv) {
  CLI::App app{"CPU decode settings A/B in one process, blocks of steps alternating"};
  std::string model;
  int threads = 0, rounds = 20, passes = 2;
  int64_t block = 8, context = 128;
  std::vector<std::string> specs;
  std::string out;
  app.add_option("-m,--model", model, "Model folder or .gguf file")->required();
  app.add_option("-t,--threads", threads, "CPU threads (0: one per core)");
  app.add_option("--variant", specs, "NAME:SETTINGS (see the file's header)")->required();
  app.add_option("--rounds", rounds, "Rounds (a block of every variant each)")
      ->check(CLI::Range(1, 10000));
  app.add_option("--block", block, "Decode steps per block")->check(CLI::Range(1, 4096));
  app.add_option("--context", context, "Prompt tokens before each round's blocks")
      ->check(CLI::Range(1, 1 << 20));
  std::string kv_dtype = "bf16";
  app.add_option("--kv-dtype", kv_dtype, "KV cache storage (infera bench's default here: bf16)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  app.add_option("--probe-passes", passes, "Bandwidth passes of each probe")
      ->check(CLI::Range(1, 100));
  app.add_option("--out", out, "JSON file of every block's sample");
  CLI11_PARSE(app, argc, argv);

  std::vector<Variant> variants;
  for (const auto& s : specs) variants.push_back(parse_variant(s));
  // One copy of the model per distinct repack list (the repacking happens as a model loads).
  std::vector<std::pair<std::string, bool>> copies;  // (repack list, huge pages) of each copy
  std::vector<cli::BenchModel> models;
  std::vector<std::unique_ptr<cli::LmBenchAdapter>> lms;
  const char* env_repack = std::getenv("INFERA_CPU_REPACK");
  const std::string process_repack = env_repack ? env_repack : "";
  const bool process_huge = huge_pages_wanted();
  for (Variant& v : variants) {
    const std::pair<std::string, bool> wanted = {v.repack.empty() ? process_repack : v.repack,
                                                 v.huge < 0 ? process_huge : v.huge == 1};
    auto it = std::find(copies.begin(), copies.end(), wanted);
    if (it == copies.end()) {
      if (wanted.first.empty())
        unsetenv("INFERA_CPU_REPACK");
      else
        setenv("INFERA_CPU_REPACK", wanted.first.c_str(), 1);
      set_huge_pages_wanted(wanted.second);
      models.push_back(cli::start_bench_backend("cpu", threads, "bf16"));
      cli::load_bench_model(models.back(), model, LoadOptions{});
      lms.push_back(std::make_unique<cli::LmBenchAdapter>(
          *models.back().model, cli::KvSettings{.dtype = kv_dtype == "f32"   ? DType::F32
                                                         : kv_dtype == "f16" ? DType::F16
                                                                             : DType::BF16}));
      copies.push_back(wanted);
      it = copies.end() - 1;
    }
    v.model = static_cast<size_t>(it - copies.begin());
  }
  set_huge_pages_wanted(process_huge);
  if (env_repack)
    setenv("INFERA_CPU_REPACK", process_repack.c_str(), 1);
  else
    unsetenv("INFERA_CPU_REPACK");
  const int pool_threads =
      threads > 0 ? threads : static_cast<int>(std::thread::hardware_concurrency());
  bench::MachineMonitor monitor(pool_threads, 0);
  monitor.begin_adjacent();
  const auto probe = [&] {
    const std::vector<double> s = monitor.adjacent_bandwidth(passes);
    return bench::summarize(s).p50;
  };
  const std::vector<int32_t> prompt = lms[0]->synthetic_prompt(context);
  const int64_t capacity = context + block * static_cast<int64_t>(variants.size()) + 1;
  std::fprintf(stderr, "%d rounds of %zu variants x %lld steps, context %lld, %zu model copies\n",
               rounds, variants.size(), static_cast<long long>(block),
               static_cast<long long>(context), lms.size());
  for (auto& lm : lms) {  // warm-up: every path touched once
    lm->run_prefill(prompt, capacity, 512);
    apply(variants[0]);
    lm->run_decode_steps(block);
    lm->end_sequence();
  }
  for (int r = 0; r < rounds; ++r) {
    for (auto& lm : lms) lm->run_prefill(prompt, capacity, 512);
    double before = probe();
    for (size_t i = 0; i < variants.size(); ++i) {
      Variant& v = variants[(i + static_cast<size_t>(r)) % variants.size()];
      apply(v);
      cli::LmBenchAdapter& lm = *lms[v.model];
      const int64_t start = lm.context_length();
      const std::vector<cli::StageSeconds> steps = lm.run_decode_steps(block);
      double seconds = 0, bytes = 0;
      for (size_t s = 0; s < steps.size(); ++s) {
        seconds += steps[s].total();
        bytes += lm.cost().decode_bytes(start + static_cast<int64_t>(s) + 1);
      }
      const double after = probe();
      v.tokens_per_second.push_back(static_cast<double>(block) / seconds);
      v.fraction.push_back(bytes / seconds / (0.5 * (before + after) * 1e9));
      before = after;
    }
    for (auto& lm : lms) lm->end_sequence();
  }
  monitor.end_adjacent();

  const Variant& base = variants[0];
  std::printf("%-10s %10s %22s %10s\n", "variant", "tok/s", "ratio [min, max]", "fraction");
  nlohmann::json j;
  for (const Variant& v : variants) {
    std::vector<double> ratio;
    // Round r's block of a variant and of the base ran side by side (same round).
    for (size_t r = 0; r < v.tokens_per_second.size(); ++r)
      ratio.push_back(v.tokens_per_second[r] / base.tokens_per_second[r]);
    const bench::Summary r = bench::summarize(ratio);
    std::printf("%-10s %10.2f   x%.3f [%.3f, %.3f] %10.3f\n", v.name.c_str(),
                bench::summarize(v.tokens_per_second).p50, r.p50, r.min, r.max,
                bench::summarize(v.fraction).p50);
    j["variants"][v.name] = {{"tokens_per_second", v.tokens_per_second},
                             {"adjacent_roofline_fraction", v.fraction},
                             {"ratio_to_first", ratio},
                             {"streams", v.streams},
                             {"dynamic", v.dynamic},
                             {"paired", v.paired},
                             {"repack", copies[v.model].first},
                             {"huge_pages", copies[v.model].second}};
  }
  if (!out.empty()) {
    j["config"] = {{"model", model},
                   {"threads", pool_threads},
                   {"rounds", rounds},
                   {"block", block},
                   {"context", context},
                   {"kv_dtype", kv_dtype}};
    std::ofstream(out) << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decode_ab: %s\n", e.what());
    return 1;
  }
}
