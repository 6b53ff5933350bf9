// Engine-step speed on any backend, through the same run_step the generator uses, over dummy (or
// real) weights: prefill tokens/s of one prompt per step at given lengths, with the logits to the
// host and with the first token ids chosen on the backend (the time to first token of greedy
// generation), and batched decode tokens/s at given batch sizes after a
// prompt of --context tokens per sequence. Decode is timed three ways: with every row's logits
// copied to the host (the generator when it samples on the host), with one row's only, which
// isolates the device step from the logits' trip over PCIe, and greedy with the ids chosen on the
// backend (run_step_argmax: the generator's greedy path). With --sampled, also sampled decoding
// (T 0.8, top-k 40, top-p 0.9): every row's logits to the host's Sampler, or sampled on the backend
// (run_step_sample, the generator's path for penalty-free sampling). Each decode line gives the
// host recording time of its timed steps alone. Raw per-step samples go to --json.
//
//   step_bench --model ../shared/models/qwen3-0.6b --dummy-weights --device cuda \
//       --kv-dtype bf16 --prefill 512,2048 --batch 1,8,64,256 --context 512 --json out.json
// --prefill-batch 8x512 also times 8 prompts of 512 tokens prefilled in one step (tokens/s over
// all 4096 prompt tokens; JSON "prefill_batch").
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/registry.h"
#include "engine/kv_cache.h"
#include "engine/step.h"
#include "infera/error.h"
#include "model/causal_lm.h"
#include "sample/sampler.h"
#ifdef INFERA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace {

using namespace infera;

// On CUDA: how steps were issued, and with INFERA_CUDA_PROFILE=1 the kernels' device time.
void report_backend(Backend& backend, const std::string& what) {
#ifdef INFERA_WITH_CUDA
  static CudaStats before;  // the counts are cumulative: host time is reported per case
  if (const auto s = cuda_stats(backend)) {
    const int64_t steps = s->recorded_steps - before.recorded_steps;
    std::printf(
        "  [%s] cuda: %lld graph launches (%lld captured), %lld eager steps (%lld streamed); "
        "host recording %.1f us/step over %lld steps\n",
        what.c_str(), static_cast<long long>(s->graph_launches),
        static_cast<long long>(s->graph_captures), static_cast<long long>(s->eager_steps),
        static_cast<long long>(s->streamed_steps),
        steps > 0 ? (s->host_record_seconds - before.host_record_seconds) / double(steps) * 1e6
                  : 0.0,
        static_cast<long long>(steps));
    before = *s;
  }
  const std::string profile = cuda_profile_report(backend);
  if (!profile.empty()) std::printf("  [%s] kernel time:\n%s", what.c_str(), profile.c_str());
#endif
}
// Host recording of the timed steps alone (the per-case line above also counts the prompts'
// prefill steps, whose share grows with the batch: 64 of 169 steps at batch 256).
struct HostRecording {
  double seconds = 0, flush_seconds = 0;
  int64_t steps = 0;
};
HostRecording host_recording(Backend& backend) {
#ifdef INFERA_WITH_CUDA
  if (const auto s = cuda_stats(backend))
    return {s->host_record_seconds, s->host_flush_seconds, s->recorded_steps};
#endif
  return {};
}

// `ncu --profile-from-start off` then profiles one warm decode step's kernels (--profile-step).
void profiler_range(Backend& backend, bool start) {
#ifdef INFERA_WITH_CUDA
  if (cuda_stats(backend)) cuda_profiler_range(start);
#else
  (void)backend;
  (void)start;
#endif
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

std::vector<int32_t> prompt_ids(int64_t n, int64_t seed, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(int32_t((1000 + seed * 104729 + i * 7919) % vocab));
  return ids;
}

struct Options {
  std::string model, device = "auto", kv_dtype = "bf16", json;
  bool dummy = false;
  bool sampled = false;       // also time top-k/top-p sampling on the host and on the backend
  bool profile_step = false;  // CUDA: profiler range around each batch's last greedy step
  std::vector<int64_t> prefill = {512, 2048}, batch = {1, 8, 64};
  std::vector<std::string> prefill_batch;  // "SxL": S prompts of L tokens in one step
  int64_t context = 512, steps = 64, repeats = 5, block_size = 32;
};

// `seqs` prompts of `len` tokens each in one step (seqs 1: one prompt, the time to first token),
// timed two ways in alternating order: with the last rows' logits copied to the host (seqs x vocab
// f32, pageable memory), and with the first token ids chosen on the backend (run_step_argmax, the
// generator's greedy path: only the ids cross PCIe, as a compiled PyTorch prefill samples on the
// device). Every repeat prefills from empty: its sequences are freed after it. The cache itself
// is one for all repeats, so that every step's buffers stay where they were: on CUDA each mode's
// step then runs eagerly once and is captured once (the two warm-up rounds) and every timed repeat
// replays the graph. (A fresh cache a repeat moved its pool, and with it which repeats were
// captures, by how earlier allocations fell: two builds compared at --repeats 3 timed different
// numbers of captures, x0.75-1.26 apart; session 22.)
nlohmann::json bench_prefill(CausalLM& model, const Options& o, DType kv, int64_t len,
                             int64_t seqs = 1) {
  std::vector<double> logits_samples, ids_samples;
  HostRecording host;  // the timed steps' host recording and flush time (CUDA), summed
  const int64_t vocab = model.info().vocab;
  const int64_t blocks = (len + o.block_size - 1) / o.block_size;
  KvCache cache(model.backend(), model.kv_shape(),
                {.block_size = o.block_size, .num_blocks = seqs * blocks, .dtype = kv});
  constexpr int64_t kWarmup = 2;  // eager (cuBLAS, kernel attributes), then the capture
  for (int64_t r = 0; r < kWarmup + o.repeats; ++r) {
    for (int pass = 0; pass < 2; ++pass) {
      const bool ids_mode = (pass + r) % 2 == 1;
      std::vector<std::vector<int32_t>> ids;
      std::vector<SeqChunk> chunks;
      for (int64_t s = 0; s < seqs; ++s) ids.push_back(prompt_ids(len, r * seqs + s, vocab));
      for (int64_t s = 0; s < seqs; ++s) {
        const SeqId seq = cache.add_sequence();
        cache.reserve(seq, len);
        chunks.push_back({seq, ids[size_t(s)], OutputRows::Last});
      }
      std::vector<float> logits(static_cast<size_t>(ids_mode ? 0 : seqs * vocab));
      std::vector<int32_t> first(static_cast<size_t>(seqs));
      model.backend().synchronize();
      // --profile-step: the last repeat's first-token-ids step (a graph replay by then).
      const bool profiled = o.profile_step && ids_mode && r == kWarmup + o.repeats - 1;
      const HostRecording before = host_recording(model.backend());
      if (profiled) profiler_range(model.backend(), true);
      const auto t = Clock::now();
      if (ids_mode)
        run_step_argmax(model, cache, chunks, first);
      else
        run_step(model, cache, chunks, logits);
      const double took = seconds_since(t);
      if (profiled) profiler_range(model.backend(), false);
      for (const SeqChunk& c : chunks) cache.free_sequence(c.seq);
      if (r >= kWarmup) {
        (ids_mode ? ids_samples : logits_samples).push_back(took);
        const HostRecording after = host_recording(model.backend());
        host.seconds += after.seconds - before.seconds;
        host.flush_seconds += after.flush_seconds - before.flush_seconds;
        host.steps += after.steps - before.steps;
      }
    }
  }
  const double m = median(logits_samples), mi = median(ids_samples);
  const double tokens = double(seqs * len);
  std::printf("prefill %3lld x %6lld tokens: median %8.3f ms  %10.0f tok/s  (logits to host)\n",
              (long long)seqs, (long long)len, m * 1e3, tokens / m);
  std::printf("prefill %3lld x %6lld tokens: median %8.3f ms  %10.0f tok/s  (first token ids)\n",
              (long long)seqs, (long long)len, mi * 1e3, tokens / mi);
  // Mean over the timed steps (graph captures included in flush): the host time before the GPU
  // starts a replayed step (recording) and the flush's own time.
  if (host.steps > 0)
    std::printf("prefill %3lld x %6lld tokens: host record %7.1f + flush %7.1f us/step (mean)\n",
                (long long)seqs, (long long)len, host.seconds / double(host.steps) * 1e6,
                host.flush_seconds / double(host.steps) * 1e6);
  return {{"sequences", seqs},
          {"prompt_tokens", len},
          {"seconds", logits_samples},
          {"median_seconds", m},
          {"tokens_per_second", tokens / m},
          {"first_token_ids",
           {{"seconds", ids_samples}, {"median_seconds", mi}, {"tokens_per_second", tokens / mi}}}};
}

nlohmann::json bench_decode(CausalLM& model, const Options& o, DType kv, int64_t batch) {
  const int64_t vocab = model.info().vocab, warmup = 3;
  const int64_t need = o.context + 5 * (o.steps + warmup) + 1;  // five modes at most
  const int64_t per_seq = (need + o.block_size - 1) / o.block_size;
  KvCache cache(model.backend(), model.kv_shape(),
                {.block_size = o.block_size, .num_blocks = batch * per_seq, .dtype = kv});
  std::vector<SeqId> seqs;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t b = 0; b < batch; ++b) {
    seqs.push_back(cache.add_sequence());
    cache.reserve(seqs.back(), need);
    prompts.push_back(prompt_ids(o.context, b, vocab));
  }
  // Prompts, up to 2048 tokens per step.
  const int64_t per_step = std::max<int64_t>(1, 2048 / o.context);
  for (int64_t b = 0; b < batch; b += per_step) {
    std::vector<SeqChunk> chunks;
    for (int64_t i = b; i < std::min(batch, b + per_step); ++i)
      chunks.push_back({seqs[size_t(i)], prompts[size_t(i)], OutputRows::None});
    std::vector<float> none;
    run_step(model, cache, chunks, none);
  }
  std::vector<int32_t> next(size_t(batch), 1);
  // Sampled modes: temperature 0.8, top-k 40, top-p 0.9 per row (a common chat setting), chosen
  // on the host by the Sampler from every row's logits, or on the backend (run_step_sample).
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 40;
  sp.top_p = 0.9f;
  std::vector<Sampler> samplers;
  for (int64_t b = 0; b < batch; ++b) {
    sp.seed = static_cast<uint64_t>(b + 1);
    samplers.emplace_back(sp);
  }
  const bool backend_samples = model.backend().supports(Op::SampleRows, {DType::F32});
  enum Mode { kAllLogits, kOneRow, kGreedyIds, kHostSampled, kDeviceSampled };
  auto run = [&](Mode mode, int64_t steps, std::vector<double>* samples) {
    const bool all_rows = mode == kAllLogits || mode == kHostSampled;
    std::vector<float> logits(size_t((all_rows ? batch : 1) * vocab));
    std::vector<int32_t> ids(static_cast<size_t>(batch));
    std::vector<RowSampling> rows(static_cast<size_t>(batch));
    std::vector<SampledId> sampled(static_cast<size_t>(batch));
    for (int64_t s = 0; s < steps; ++s) {
      std::vector<SeqChunk> chunks;
      for (int64_t b = 0; b < batch; ++b)
        chunks.push_back({seqs[size_t(b)], std::span<const int32_t>(&next[size_t(b)], 1),
                          mode != kOneRow || b == 0 ? OutputRows::Last : OutputRows::None});
      const auto t = Clock::now();
      const bool profiled = o.profile_step && samples && mode == kGreedyIds && s + 1 == steps;
      if (profiled) profiler_range(model.backend(), true);
      if (mode == kGreedyIds) {
        run_step_argmax(model, cache, chunks, ids);
      } else if (mode == kDeviceSampled) {
        for (size_t b = 0; b < rows.size(); ++b)
          rows[b] = {sp.temperature, sp.top_k, sp.top_p, sp.min_p, samplers[b].next_uniform()};
        run_step_sample(model, cache, chunks, rows, sampled);
        for (size_t b = 0; b < ids.size(); ++b) ids[b] = sampled[b].id;
      } else {
        run_step(model, cache, chunks, logits);
        if (mode == kHostSampled)
          for (size_t b = 0; b < ids.size(); ++b)
            ids[b] = samplers[b].sample(
                std::span<float>(logits.data() + b * size_t(vocab), size_t(vocab)), {}, {});
      }
      if (profiled) profiler_range(model.backend(), false);
      if (samples) samples->push_back(seconds_since(t));
      if (mode == kGreedyIds || mode == kHostSampled || mode == kDeviceSampled)
        for (size_t b = 0; b < next.size(); ++b) next[b] = std::max(ids[b], 0);  // real decoding
      else
        for (auto& id : next) id = int32_t((id * 31 + s + 7) % vocab);  // sampling stand-in
    }
  };
  nlohmann::json j = {{"batch", batch}, {"context", o.context}};
  const char* const names[] = {"all_logits", "one_row_logits", "greedy_ids", "host_sampled",
                               "device_sampled"};
  const char* const labels[] = {"all logits to host", "one row's logits  ", "greedy ids to host",
                                "sampled on host   ", "sampled on device "};
  std::vector<Mode> modes = {kAllLogits, kOneRow, kGreedyIds};
  if (o.sampled) {
    modes.push_back(kHostSampled);
    if (backend_samples) modes.push_back(kDeviceSampled);
  }
  for (const Mode mode : modes) {
    std::vector<double> samples;
    run(mode, warmup, nullptr);
    const HostRecording before = host_recording(model.backend());
    run(mode, o.steps, &samples);
    const HostRecording after = host_recording(model.backend());
    const double m = median(samples);
    const double per = after.steps > before.steps ? 1e6 / double(after.steps - before.steps) : 0;
    const double record_us = (after.seconds - before.seconds) * per;
    const double flush_us = (after.flush_seconds - before.flush_seconds) * per;
    std::printf(
        "decode batch %4lld (%s): median step %7.3f ms  %10.0f tok/s  host record %5.1f + flush "
        "%5.1f us/step\n",
        (long long)batch, labels[mode], m * 1e3, double(batch) / m, record_us, flush_us);
    j[names[mode]] = {{"seconds", samples},
                      {"median_step_seconds", m},
                      {"tokens_per_second", double(batch) / m},
                      {"host_record_us_per_step", record_us},
                      {"host_flush_us_per_step", flush_us}};
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("Engine-step speed: prefill and batched decode tokens/s");
  app.add_option("--model", o.model, "Model folder (config.json)")->required();
  app.add_flag("--dummy-weights", o.dummy, "Seeded random weights of the config's shapes");
  app.add_option("--device", o.device, "cpu, cuda or auto")->capture_default_str();
  app.add_option("--kv-dtype", o.kv_dtype, "f32, bf16 or f16")->capture_default_str();
  app.add_option("--prefill", o.prefill, "Prompt lengths for prefill")->delimiter(',');
  app.add_option("--prefill-batch", o.prefill_batch,
                 "Batched prefill: SxL = S prompts of L tokens in one step (e.g. 8x512)")
      ->delimiter(',');
  app.add_option("--batch", o.batch, "Batch sizes for decode")->delimiter(',');
  app.add_option("--context", o.context, "Prompt tokens per sequence before decode");
  app.add_option("--decode-steps", o.steps, "Timed decode steps per batch size");
  app.add_option("--repeats", o.repeats, "Timed prefills per length");
  app.add_option("--json", o.json, "Write raw samples here");
  app.add_flag("--sampled", o.sampled,
               "Also decode with T 0.8 / top-k 40 / top-p 0.9 sampled on the host and the backend");
  app.add_flag("--profile-step", o.profile_step,
               "CUDA: cudaProfilerStart/Stop around each batch's last timed greedy step and each "
               "prefill case's last first-token-ids step (for ncu --profile-from-start off)");
  CLI11_PARSE(app, argc, argv);
  try {
    const DType kv = o.kv_dtype == "f32"   ? DType::F32
                     : o.kv_dtype == "f16" ? DType::F16
                                           : DType::BF16;
    auto backend = make_backend({.device = o.device});
    const auto t = Clock::now();
    auto model = load_causal_lm(o.model, *backend, {.dummy_weights = o.dummy});
    std::printf("%s on %s, KV %s, loaded in %.2f s\n", model->info().summary().c_str(),
                backend->name().c_str(), o.kv_dtype.c_str(), seconds_since(t));
    nlohmann::json out = {{"model", model->info().summary()},
                          {"backend", backend->name()},
                          {"kv_dtype", o.kv_dtype},
                          {"prefill", nlohmann::json::array()},
                          {"decode", nlohmann::json::array()}};
    report_backend(*backend, "load");
    for (int64_t len : o.prefill) {
      out["prefill"].push_back(bench_prefill(*model, o, kv, len));
      report_backend(*backend, "prefill " + std::to_string(len));
    }
    for (const std::string& sxl : o.prefill_batch) {
      const size_t x = sxl.find('x');
      const int64_t seqs = x == std::string::npos ? 0 : std::atoll(sxl.substr(0, x).c_str());
      const int64_t len = x == std::string::npos ? 0 : std::atoll(sxl.substr(x + 1).c_str());
      if (seqs < 1 || len < 1)
        throw InvalidArgument("--prefill-batch wants SxL (e.g. 8x512), got '" + sxl + "'");
      out["prefill_batch"].push_back(bench_prefill(*model, o, kv, len, seqs));
      report_backend(*backend, "prefill " + sxl);
    }
    for (int64_t b : o.batch) {
      out["decode"].push_back(bench_decode(*model, o, kv, b));
      report_backend(*backend, "decode batch " + std::to_string(b));
    }
    if (!o.json.empty()) std::ofstream(o.json) << out.dump(1) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
