// `infera bench`: the speed harness kept for every backend and model. One run measures the
// machine (read bandwidth, peak multiply-add rate), loads the model (cold load time), then
// prefills and decodes at several lengths after warm-up, N times, and writes every raw sample,
// the summaries, the environment and the roofline fractions to one JSON file (bench/results/,
// format in bench/results/README.md). The model is only touched through bench_lm_adapter.h.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench/environment.h"
#include "bench/hash.h"
#include "bench/machine_monitor.h"
#include "bench/process_usage.h"
#include "bench/report.h"
#include "bench/result.h"
#include "bench/timer.h"
#include "bench_lm_adapter.h"
#include "bench_lm_report.h"
#include "commands.h"
#include "generation_options.h"
#include "infera/error.h"
#include "io/gguf_model.h"
#include "model_options.h"

namespace infera::cli {
namespace {

namespace fs = std::filesystem;
using bench::BenchResult;

struct BenchOptions {
  std::string model;
  bool dummy_weights = false;
  uint64_t dummy_seed = 0;
  int threads = 0;
  std::string device = "cpu";
  std::string matmul_precision = kGenerationMatmulPrecision;
  std::string kv_dtype = "auto";
  int64_t kv_block_size = 32;
  std::vector<int64_t> prefill{128, 512, 2048};
  std::vector<int64_t> decode_contexts{128, 2048};
  int64_t decode_steps = 64;
  int repeats = 5;
  int warmup = 1;
  int64_t prefill_chunk = 512;
  bool skip_machine = false;
  int64_t bandwidth_mib = 0;  // 0: bench::default_bandwidth_buffer_bytes()
  int bandwidth_passes = 10;
  int interleaved_passes = 3;
  int64_t decode_probe_steps = 16;  // 0: no probes between decode steps
  int decode_probe_passes = 2;
  int fma_samples = 5;
  std::string out_dir = "bench/results";
  std::string out;
  std::string label;
  bool quiet = false;
};

// The folder holding config.json, or a GGUF file; --dummy-weights also accepts the config.json
// itself.
fs::path model_dir(const BenchOptions& o) {
  fs::path dir = o.model;
  if (o.dummy_weights && fs::is_regular_file(dir) && dir.filename() == "config.json")
    dir = dir.parent_path().empty() ? fs::path(".") : dir.parent_path();
  if (!fs::is_directory(dir) && !fs::is_regular_file(dir))
    throw IoError("model '" + o.model +
                  "' does not exist (expected a Hugging Face model folder or a .gguf file)");
  return dir;
}

// The hash of config.json's content with keys sorted and whitespace dropped, so two runs on
// the same configuration compare equal however the file is laid out.
std::string config_hash(const fs::path& config) {
  std::ifstream in(config);
  if (!in) throw IoError("cannot read " + config.string());
  try {
    return bench::fnv1a64_hex(nlohmann::json::parse(in).dump());
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(config.string() + ": not valid JSON (" + e.what() + ")");
  }
}

void validate(const BenchOptions& o, int64_t max_positions) {
  for (int64_t n : o.prefill)
    if (n < 1 || n >= max_positions)
      throw InvalidArgument("--prefill " + std::to_string(n) + ": must be 1 to " +
                            std::to_string(max_positions - 1) + " (the model's context)");
  for (int64_t c : o.decode_contexts)
    if (c < 1 || c + o.decode_steps > max_positions)
      throw InvalidArgument(
          "--decode-context " + std::to_string(c) + " plus " + std::to_string(o.decode_steps) +
          " steps exceeds the model's context of " + std::to_string(max_positions));
}

void progress(const BenchOptions& o, const char* format, auto... args) {
  if (o.quiet) return;
  std::fprintf(stderr, format, args...);
  std::fflush(stderr);
}

void log_probe(const BenchOptions& o, const char* phase, const bench::ProbeReading& r,
               const bench::MachineMonitor& monitor) {
  std::string matmul;
  if (const auto kind = monitor.matmul_kind(); kind && *kind != bench::DotKind::F32Fma)
    matmul = ", " + std::string(bench::dot_kind_name(*kind)) + " peak " +
             std::to_string(static_cast<int>(r.matmul_gflops_p50)) + " GFLOP/s";
  progress(o,
           "machine %s: read bandwidth %.1f GB/s (%lld MiB buffer), f32 FMA peak %.1f GFLOP/s%s, "
           "%d threads\n",
           phase, r.bandwidth_gbs_p50, static_cast<long long>(monitor.buffer_bytes() >> 20),
           r.fma_gflops_p50, matmul.c_str(), monitor.threads());
}

// The instruction the CPU backend's prefill matmuls run on for these weights: quantized weights
// through the int8 GEMMs (VNNI), bf16 weights with --matmul-precision bf16 through vdpbf16ps
// where the CPU has it (cpu_backend.h), everything else widened to f32 FMA.
bench::DotKind matmul_kind(DType weights, const std::string& precision) {
  using bench::DotKind;
  if (dtype_is_quantized(weights))
    return bench::dot_kind_supported(DotKind::Int8Dot) ? DotKind::Int8Dot : DotKind::F32Fma;
  if (weights == DType::BF16 && precision == "bf16" && bench::dot_kind_supported(DotKind::Bf16Dot))
    return DotKind::Bf16Dot;
  return DotKind::F32Fma;
}

void record_prefill(BenchResult& r, int64_t n, const StageSeconds& t) {
  const std::string p = "prefill." + std::to_string(n) + ".";
  r.series(p + "tokens_per_second", "tokens/s", true).samples.push_back(n / t.total());
  r.series(p + "ttft_seconds", "s", false).samples.push_back(t.total());
  r.series(p + "prepare_seconds", "s", false, false).samples.push_back(t.prepare);
  r.series(p + "forward_seconds", "s", false, false).samples.push_back(t.forward);
  r.series(p + "postprocess_seconds", "s", false, false).samples.push_back(t.postprocess);
}

// Decode tokens/s is one sample per repeat (steps / their total time); each step's own time
// is kept raw as well, and the stages as per-step means per repeat.
void record_decode(BenchResult& r, int64_t context, const std::vector<StageSeconds>& steps) {
  const std::string p = "decode." + std::to_string(context) + ".";
  StageSeconds sum;
  bench::Metric& raw = r.series(p + "step_seconds", "s", false, false);
  for (const StageSeconds& s : steps) {
    sum.prepare += s.prepare;
    sum.forward += s.forward;
    sum.postprocess += s.postprocess;
    raw.samples.push_back(s.total());
  }
  const auto n = static_cast<double>(steps.size());
  r.series(p + "tokens_per_second", "tokens/s", true).samples.push_back(n / sum.total());
  r.series(p + "prepare_seconds_per_step", "s", false, false).samples.push_back(sum.prepare / n);
  r.series(p + "forward_seconds_per_step", "s", false, false).samples.push_back(sum.forward / n);
  r.series(p + "postprocess_seconds_per_step", "s", false, false)
      .samples.push_back(sum.postprocess / n);
}

// Decode in blocks of --decode-probe-steps with a short bandwidth probe (--decode-probe-passes
// over a --bandwidth-mib buffer held through the run) before the first block and after each: the
// machine's bandwidth swings within a run on a shared VM (33-87 GB/s seen in one run), so each
// block is held to the probes on either side of it. Block b's fraction of the roofline = its
// tokens/s x its bytes per token / the mean of those two probes
// (decode.<c>.adjacent_roofline_fraction, one sample per block; the probes' samples in
// decode.<c>.adjacent_bandwidth_gbs, the blocks' speeds in decode.<c>.block_tokens_per_second).
// The probes run between steps, outside every step's timing.
//
// Where the backend times its decode ops (OpStats::decode_matmul / decode_attention, the CPU's),
// each block also splits its steps into the weight matmuls, the cache attention and the rest
// (decode.<c>.{matmul,attention,other}_seconds_per_step) and holds the matmuls' and the
// attention's own bytes / seconds to the same probes
// (decode.<c>.{matmul,attention}_roofline_fraction).
std::vector<StageSeconds> decode_with_adjacent_probes(const BenchOptions& o, int64_t context,
                                                      LmBenchAdapter& lm, Backend& backend,
                                                      bench::MachineMonitor& monitor,
                                                      BenchResult& result) {
  const std::string p = "decode." + std::to_string(context) + ".";
  result.series(p + "tokens_per_second", "tokens/s", true);  // first in the table, as without
  bench::Metric& probes = result.series(p + "adjacent_bandwidth_gbs", "GB/s", true, false);
  bench::Metric& speeds = result.series(p + "block_tokens_per_second", "tokens/s", true, false);
  bench::Metric& fractions = result.series(p + "adjacent_roofline_fraction", "fraction", true);
  // The op split, recorded once a block shows the backend times its ops.
  const auto op_series = [&](const char* name, const char* unit, bool higher,
                             bool headline = false) -> bench::Metric& {
    return result.series(p + name, unit, higher, headline);
  };
  const auto probe_gbs = [&] {
    const std::vector<double> s = monitor.adjacent_bandwidth(o.decode_probe_passes);
    probes.samples.insert(probes.samples.end(), s.begin(), s.end());
    double sum = 0;
    for (double v : s) sum += v;
    return sum / static_cast<double>(s.size());
  };
  monitor.begin_adjacent();  // the probe buffer allocated and touched outside the timings
  double before = probe_gbs();
  std::vector<StageSeconds> steps;
  for (int64_t done = 0; done < o.decode_steps;) {
    const int64_t b = std::min(o.decode_probe_steps, o.decode_steps - done);
    backend.reset_op_stats();
    backend.set_op_timing(true);
    const std::vector<StageSeconds> block = lm.run_decode_steps(b);
    backend.set_op_timing(false);
    const OpStats ops = backend.op_stats();
    double seconds = 0, bytes = 0;
    for (int64_t s = 0; s < b; ++s) {
      seconds += block[static_cast<size_t>(s)].total();
      bytes += lm.cost().decode_bytes(context + done + s + 1);  // step s reads c + s + 1 positions
    }
    const double after = probe_gbs();
    const double tokens_per_second = static_cast<double>(b) / seconds;
    const double bandwidth = (before + after) / 2 * 1e9;
    speeds.samples.push_back(tokens_per_second);
    fractions.samples.push_back(tokens_per_second * (bytes / static_cast<double>(b)) / bandwidth);
    if (ops.decode_matmul.calls > 0 && ops.decode_matmul.seconds > 0) {
      const auto steps = static_cast<double>(b);
      const OpStats::Timed& mm = ops.decode_matmul;
      const OpStats::Timed& at = ops.decode_attention;
      op_series("matmul_seconds_per_step", "s", false).samples.push_back(mm.seconds / steps);
      op_series("attention_seconds_per_step", "s", false).samples.push_back(at.seconds / steps);
      op_series("other_seconds_per_step", "s", false)
          .samples.push_back((seconds - mm.seconds - at.seconds) / steps);
      op_series("matmul_bytes_per_step", "bytes", false).samples.push_back(mm.bytes / steps);
      op_series("attention_bytes_per_step", "bytes", false).samples.push_back(at.bytes / steps);
      op_series("matmul_roofline_fraction", "fraction", true, true)
          .samples.push_back(mm.bytes / mm.seconds / bandwidth);
      if (at.seconds > 0)
        op_series("attention_roofline_fraction", "fraction", true, true)
            .samples.push_back(at.bytes / at.seconds / bandwidth);
    }
    steps.insert(steps.end(), block.begin(), block.end());
    before = after;
    done += b;
  }
  monitor.end_adjacent();
  return steps;
}

void run_bench(const BenchOptions& o, const std::string& command_line) {
  if (o.threads < 0) throw InvalidArgument("--threads must not be negative");
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const fs::path dir = model_dir(o);
  if (o.prefill.empty() && o.decode_contexts.empty())
    throw InvalidArgument("--prefill and --decode-context are both empty: nothing to measure");
  BenchResult result("causal_lm");
  result.set_label(o.label);
  result.set_command(command_line);
  result.environment() = bench::capture_environment();
  result.environment()["threads"] = threads;
  result.environment()["load_average_1min_start"] = bench::json_number(bench::load_average_1min());
  // A GGUF file: the hash of the config.json equivalent its metadata gives (same rule).
  result.environment()["model_config_hash"] =
      fs::is_regular_file(dir) ? bench::fnv1a64_hex(io::load_gguf_model(dir).config.json().dump())
                               : config_hash(dir / "config.json");

  BenchModel m = start_bench_backend(o.device, threads, o.matmul_precision);
  // The probes measure the CPU and its memory: the limits of a CPU backend only.
  const bool probe = !o.skip_machine && m.backend->device() == Device::CPU;
  if (!o.skip_machine && !probe)
    progress(o, "machine probes skipped: they measure the CPU, the backend is %s\n",
             m.backend->name().c_str());
  bench::MachineMonitor monitor(threads, o.bandwidth_mib << 20);
  if (probe)
    log_probe(o, "before", monitor.probe(result, o.bandwidth_passes, o.fma_samples), monitor);

  load_bench_model(m, dir, {.dummy_weights = o.dummy_weights, .dummy_seed = o.dummy_seed});
  const ModelInfo& info = m.model->info();
  validate(o, info.max_positions);
  if (probe) monitor.set_matmul_kind(matmul_kind(info.weight_dtype, o.matmul_precision));
  result.series("load.seconds", "s", false).samples.push_back(m.load_seconds);
  result.series("load.backend_seconds", "s", false, false).samples.push_back(m.backend_seconds);
  result.series("memory.rss_after_load_mib", "MiB", false)
      .samples.push_back(static_cast<double>(bench::current_rss_bytes()) / (1 << 20));
  progress(o, "loaded %s in %.2f s: %s, weights %s\n", info.summary().c_str(), m.load_seconds,
           m.backend->name().c_str(), info.weight_format.c_str());
  const KvSettings kv{.dtype = resolve_kv_dtype(o.kv_dtype, o.matmul_precision),
                      .block_size = o.kv_block_size};
  result.environment()["backend"] = m.backend->name();
  result.environment()["weight_format"] = info.weight_format;
  result.environment()["weight_bytes"] = info.weight_bytes;
  result.environment()["kv_cache_format"] = std::string(dtype_name(kv.dtype));
  result.environment()["matmul_precision"] = o.matmul_precision;
  result.environment()["model"] = info.summary();
  result.environment()["model_parameters"] = info.parameters;
  result.config().update({{"model", o.model},
                          {"device", o.device},
                          {"dummy_weights", o.dummy_weights},
                          {"dummy_seed", o.dummy_seed},
                          {"threads", threads},
                          {"kv_dtype", o.kv_dtype},
                          {"kv_block_size", o.kv_block_size},
                          {"prefill_tokens", o.prefill},
                          {"decode_contexts", o.decode_contexts},
                          {"decode_steps", o.decode_steps},
                          {"repeats", o.repeats},
                          {"warmup", o.warmup},
                          {"prefill_chunk", o.prefill_chunk},
                          {"interleaved_passes", o.interleaved_passes},
                          {"decode_probe_steps", o.decode_probe_steps},
                          {"decode_probe_passes", o.decode_probe_passes},
                          {"decode_probe_buffer_bytes", monitor.buffer_bytes()}});

  LmBenchAdapter lm(*m.model, kv);
  std::set<int64_t> lengths(o.prefill.begin(), o.prefill.end());
  lengths.insert(o.decode_contexts.begin(), o.decode_contexts.end());
  auto has = [](const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  std::vector<bench::ProbeReading> interleaved;  // one per measured repeat
  for (int iteration = 0; iteration < o.warmup + o.repeats; ++iteration) {
    const bool measured = iteration >= o.warmup;
    const double cpu_start = bench::process_cpu_seconds();
    const bench::Stopwatch wall;
    for (int64_t n : lengths) {
      const bool decode = has(o.decode_contexts, n);
      const std::vector<int32_t> prompt = lm.synthetic_prompt(n);
      const StageSeconds t =
          lm.run_prefill(prompt, n + (decode ? o.decode_steps : 0), o.prefill_chunk);
      if (measured && has(o.prefill, n)) record_prefill(result, n, t);
      progress(o, "%s %d: prefill %lld: %.3f s (%.1f tok/s)", measured ? "repeat" : "warm-up",
               measured ? iteration - o.warmup + 1 : iteration + 1, static_cast<long long>(n),
               t.total(), n / t.total());
      if (decode) {
        const std::vector<StageSeconds> steps =
            measured && probe && o.decode_probe_steps > 0
                ? decode_with_adjacent_probes(o, n, lm, *m.backend, monitor, result)
                : lm.run_decode_steps(o.decode_steps);
        if (measured) record_decode(result, n, steps);
        double sum = 0;
        for (const StageSeconds& s : steps) sum += s.total();
        progress(o, " | decode %lld steps: %.2f tok/s", static_cast<long long>(o.decode_steps),
                 o.decode_steps / sum);
      }
      progress(o, "\n");
      lm.end_sequence();
    }
    // The CPU this repeat got, of what its threads could have used: well below 1 means other
    // processes shared the cores and the timings are theirs as much as ours.
    if (measured)
      result.series("run.cpu_share", "fraction", true)
          .samples.push_back((bench::process_cpu_seconds() - cpu_start) /
                             (wall.seconds() * threads));
    // A short probe after each repeat pairs every repeat with the machine's state at the time.
    if (measured && probe && o.interleaved_passes > 0)
      interleaved.push_back(monitor.probe(result, o.interleaved_passes, 1));
  }
  result.series("memory.peak_rss_mib", "MiB", false)
      .samples.push_back(static_cast<double>(monitor.workload_peak_rss_bytes()) / (1 << 20));
  result.config()["peak_rss_excludes_probes"] = monitor.excludes_probes();
  result.environment()["load_average_1min_end"] = bench::json_number(bench::load_average_1min());
  const std::string model_summary = info.summary();
  m.model.reset();  // free the weights before the second bandwidth probe (`info` dies with it)
  if (probe)
    log_probe(o, "after", monitor.probe(result, o.bandwidth_passes, o.fma_samples), monitor);

  derive_rooflines(result, lm.cost(), o.prefill, o.decode_contexts, o.decode_steps, interleaved);
  const fs::path path = o.out.empty() ? bench::write_result(result, o.out_dir) : fs::path(o.out);
  if (!o.out.empty()) bench::write_result_file(result, path);
  std::printf("%s\n%s", model_summary.c_str(), bench::summary_table(result).c_str());
  std::printf("result: %s\n", path.string().c_str());
}

}  // namespace

namespace {
std::string& stored_command_line() {
  static std::string line;
  return line;
}
}  // namespace

void remember_command_line(int argc, char** argv) {
  std::string& line = stored_command_line();
  line.clear();
  for (int i = 0; i < argc; ++i) {
    if (i) line += ' ';
    line += argv[i];
  }
}
const std::string& command_line() { return stored_command_line(); }

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure load, prefill, decode and time to first token against the machine's limits");
  cmd->footer(
      "Writes every raw sample, min/p50/p95, the environment and roofline fractions to a JSON "
      "file (format: bench/results/README.md); plot files with bench/plot_results.py.\n"
      "Examples:\n"
      "  infera bench --model ../shared/models/qwen3-0.6b --dummy-weights\n"
      "  infera bench --model ../shared/models/qwen3-0.6b --dummy-weights --prefill 128,512 "
      "--decode-context 128 --decode-steps 32 --repeats 3");
  cmd->add_option("-m,--model", o->model, "Model folder (config.json + weights) or a .gguf file")
      ->required();
  cmd->add_flag(
      "--dummy-weights", o->dummy_weights,
      "Seeded random weights of the config's shapes (the speed workload; no weight file)");
  cmd->add_option("--dummy-seed", o->dummy_seed, "Seed of --dummy-weights")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads,
                  "CPU threads for the model and the probes (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "Backend: cpu, cuda or auto")->capture_default_str();
  cmd->add_option("--matmul-precision", o->matmul_precision,
                  "CPU matmuls with bf16 weights: f32 activations, or bf16 dot products "
                  "(AVX512-BF16, activations rounded to bf16; elsewhere the f32 path)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--kv-dtype", o->kv_dtype,
                  "KV cache storage: auto (bf16 where matmuls run in bf16, else f32), f32, bf16 "
                  "or f16")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--kv-block-size", o->kv_block_size, "KV cache tokens per block")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  cmd->add_option("--prefill", o->prefill, "Prompt lengths to prefill")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--decode-context", o->decode_contexts,
                  "Contexts to decode at (a prefill of that length, then --decode-steps)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--decode-steps", o->decode_steps, "Decode steps per context and repeat")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("-r,--repeats", o->repeats, "Measured repeats")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Unmeasured repeats first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "Prompt tokens per forward pass")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_flag("--skip-machine", o->skip_machine,
                "Skip the bandwidth and FMA probes (no roofline fractions)");
  cmd->add_option("--bandwidth-mib", o->bandwidth_mib,
                  "Bandwidth probe buffer (default: 16x the last-level cache, >= 512 MiB)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--bandwidth-passes", o->bandwidth_passes,
                  "Bandwidth passes before and after the model runs")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--interleaved-passes", o->interleaved_passes,
                  "Bandwidth passes (and one FMA sample) after every repeat; 0: none")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  cmd->add_option("--decode-probe-steps", o->decode_probe_steps,
                  "A short bandwidth probe before and every this many measured decode steps, each "
                  "block of steps held to the probes beside it; 0: none")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--decode-probe-passes", o->decode_probe_passes,
                  "Bandwidth passes of each probe between decode steps")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_option("--fma-samples", o->fma_samples,
                  "FMA peak samples (0.2 s each) before and after the model runs")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--out-dir", o->out_dir, "Folder for the result file")->capture_default_str();
  cmd->add_option("-o,--out", o->out, "Result file path (overrides --out-dir)");
  cmd->add_option("--label", o->label, "A name for this run, kept in the file and its name");
  cmd->add_flag("-q,--quiet", o->quiet, "No progress on stderr");
  cmd->callback([o] { run_bench(*o, command_line()); });
}

}  // namespace infera::cli
