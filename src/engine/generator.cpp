#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/kv_cache.h"
#include "engine/step.h"
#include "infera/error.h"

namespace infera {
namespace {
using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

enum class Phase : uint8_t { Waiting, Prefill, Decode, Done };

struct Running {
  const GenerationRequest* request = nullptr;
  Phase phase = Phase::Waiting;
  SeqId seq = -1;
  int64_t need = 0;        // cache positions reserved: prompt + new tokens, within the context
  int64_t prompt_fed = 0;  // prompt tokens already in the cache
  std::optional<Sampler> sampler;
  GenerationResult result;
  Clock::time_point admitted, first_token;
};

// Greedy with nothing that reads the logits first: the sampler would return their argmax.
bool plain_greedy(const SamplingParams& p) {
  return p.greedy() && p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f &&
         p.frequency_penalty == 0.0f;
}

// Only temperature, top-k, top-p and min-p: what Backend::sample_rows covers.
bool penalty_free(const SamplingParams& p) {
  return p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f;
}

std::string request_name(size_t i, size_t n) {
  return n == 1 ? "the request" : "request " + std::to_string(i);
}
}  // namespace

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}
double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_steps) / decode_seconds : 0.0;
}

Generator::Generator(CausalLM& model, GeneratorOptions options) : model_(model), options_(options) {
  if (options_.max_batch_tokens < 1) throw InvalidArgument("max batch tokens must be at least 1");
}

GenerationResult Generator::generate(const GenerationRequest& request,
                                     const std::function<bool(int32_t)>& on_token) {
  std::function<bool(size_t, int32_t)> each;
  if (on_token) each = [&](size_t, int32_t id) { return on_token(id); };
  return std::move(generate(std::span<const GenerationRequest>(&request, 1), each).front());
}

std::vector<GenerationResult> Generator::generate(
    std::span<const GenerationRequest> requests,
    const std::function<bool(size_t, int32_t)>& on_token) {
  const ModelInfo& info = model_.info();
  const size_t n = requests.size();
  if (n == 0) return {};
  std::vector<Running> runs(n);
  const int64_t bs = options_.block_size;
  int64_t total_blocks = 0, largest = 0;
  for (size_t i = 0; i < n; ++i) {
    const GenerationRequest& r = requests[i];
    const auto prompt_len = static_cast<int64_t>(r.prompt.size());
    const std::string who = request_name(i, n);
    if (prompt_len == 0) throw InvalidArgument(who + ": the prompt has no tokens");
    if (r.max_new_tokens < 0) throw InvalidArgument(who + ": max tokens must not be negative");
    for (int32_t id : r.prompt)
      if (id < 0 || id >= info.vocab)
        throw InvalidArgument(who + ": prompt token id " + std::to_string(id) +
                              " is outside the vocabulary [0, " + std::to_string(info.vocab) + ")");
    if (prompt_len >= info.max_positions)
      throw InvalidArgument(who + ": the prompt has " + std::to_string(prompt_len) +
                            " tokens; the model's context is " +
                            std::to_string(info.max_positions));
    r.sampling.validate();
    runs[i].request = &r;
    runs[i].need =
        std::min(info.max_positions, prompt_len + std::max<int64_t>(r.max_new_tokens, 1));
    runs[i].result.stats.prompt_tokens = prompt_len;
    const int64_t blocks = (runs[i].need + bs - 1) / bs;
    total_blocks += blocks;
    largest = std::max(largest, blocks);
  }

  const KvShape shape = model_.kv_shape();
  const int64_t block_bytes = shape.bytes_per_token(options_.kv_dtype) * bs;
  int64_t num_blocks = options_.num_blocks;
  if (num_blocks == 0) num_blocks = std::min(total_blocks, options_.max_kv_bytes / block_bytes);
  if (num_blocks < largest)
    throw InvalidArgument("a request needs " + std::to_string(largest) + " KV cache blocks (" +
                          std::to_string(largest * block_bytes >> 20) + " MiB) but the cache has " +
                          std::to_string(num_blocks) +
                          "; allow more KV cache memory or ask for fewer tokens");
  KvCache cache(model_.backend(), shape,
                {.block_size = bs, .num_blocks = num_blocks, .dtype = options_.kv_dtype});

  size_t next_admit = 0, done = 0, decode_rotation = 0;
  std::vector<SeqChunk> chunks;
  std::vector<size_t> chunk_run;  // which request each chunk belongs to
  std::vector<float> logits;
  std::vector<int32_t> ids;
  std::vector<RowSampling> rows;
  std::vector<SampledId> sampled;
  const bool backend_samples =
      options_.device_sampling && model_.backend().supports(Op::SampleRows, {DType::F32});
  auto finish = [&](Running& r, const std::string& reason) {
    r.result.finish_reason = reason;
    r.phase = Phase::Done;
    const auto now = Clock::now();
    if (r.result.tokens.empty())
      r.result.stats.prefill_seconds = seconds_between(r.admitted, now);
    else
      r.result.stats.decode_seconds = seconds_between(r.first_token, now);
    r.result.stats.generated_tokens = static_cast<int64_t>(r.result.tokens.size());
    r.result.stats.decode_steps = std::max<int64_t>(r.result.stats.generated_tokens - 1, 0);
    cache.free_sequence(r.seq);
    ++done;
  };

  while (done < n) {
    // Admit waiting requests in arrival order while their whole reservation fits.
    while (next_admit < n) {
      Running& r = runs[next_admit];
      const SeqId seq = cache.add_sequence();
      if (!cache.reserve(seq, r.need)) {
        cache.free_sequence(seq);
        break;
      }
      r.seq = seq;
      r.sampler.emplace(r.request->sampling);
      r.admitted = Clock::now();
      r.phase = Phase::Prefill;
      ++next_admit;
      if (r.request->max_new_tokens == 0) finish(r, "length");
    }
    // Decode rows first (one per running request, rotating if over budget), then prompt chunks.
    chunks.clear();
    chunk_run.clear();
    int64_t budget = options_.max_batch_tokens;
    for (size_t k = 0; k < n && budget > 0; ++k) {
      const size_t i = (decode_rotation + k) % n;
      if (runs[i].phase != Phase::Decode) continue;
      chunks.push_back({runs[i].seq, std::span<const int32_t>(&runs[i].result.tokens.back(), 1),
                        OutputRows::Last});
      chunk_run.push_back(i);
      --budget;
    }
    ++decode_rotation;
    for (size_t i = 0; i < n && budget > 0; ++i) {
      Running& r = runs[i];
      if (r.phase != Phase::Prefill) continue;
      const auto prompt_len = static_cast<int64_t>(r.request->prompt.size());
      const int64_t take = std::min(
          {prompt_len - r.prompt_fed, std::max<int64_t>(r.request->prefill_chunk, 1), budget});
      const bool last = r.prompt_fed + take == prompt_len;
      chunks.push_back({r.seq,
                        std::span<const int32_t>(r.request->prompt)
                            .subspan(static_cast<size_t>(r.prompt_fed), static_cast<size_t>(take)),
                        last ? OutputRows::Last : OutputRows::None});
      chunk_run.push_back(i);
      budget -= take;
    }
    if (chunks.empty()) continue;  // everything admitted this round finished at once

    const auto outputs = static_cast<size_t>(count_outputs(chunks));
    bool argmax_only = options_.device_greedy;
    for (size_t c = 0; c < chunks.size() && argmax_only; ++c)
      argmax_only = chunks[c].outputs == OutputRows::None ||
                    plain_greedy(runs[chunk_run[c]].request->sampling);
    bool device_sample = !argmax_only && backend_samples;
    for (size_t c = 0; c < chunks.size() && device_sample; ++c)
      device_sample = chunks[c].outputs == OutputRows::None ||
                      penalty_free(runs[chunk_run[c]].request->sampling);
    if (argmax_only) {
      ids.resize(outputs);
      run_step_argmax(model_, cache, chunks, ids);
    } else if (device_sample) {
      rows.clear();
      for (size_t c = 0; c < chunks.size(); ++c) {
        if (chunks[c].outputs == OutputRows::None) continue;
        Running& r = runs[chunk_run[c]];
        const SamplingParams& p = r.request->sampling;
        rows.push_back({p.temperature, p.top_k, p.top_p, p.min_p,
                        p.greedy() ? 0.0 : r.sampler->next_uniform()});
      }
      sampled.resize(outputs);
      run_step_sample(model_, cache, chunks, rows, sampled);
    } else {
      logits.resize(outputs * static_cast<size_t>(info.vocab));
      run_step(model_, cache, chunks, logits);
    }

    size_t out_row = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      Running& r = runs[chunk_run[c]];
      if (r.phase == Phase::Prefill) r.prompt_fed += static_cast<int64_t>(chunks[c].tokens.size());
      if (chunks[c].outputs == OutputRows::None) continue;
      int32_t next;
      if (argmax_only || device_sample) {
        next = argmax_only ? ids[out_row] : sampled[out_row].id;
        // The sampler's rule for a row it cannot choose from.
        if (next < 0) throw InvalidArgument("sampler: all logits are -inf/NaN");
        // A draw the device did not need (the tiny-temperature rule) goes back to the stream.
        if (device_sample && !r.request->sampling.greedy() && sampled[out_row].drew == 0)
          r.sampler->unuse_uniform();
      } else {
        const std::span<float> row(logits.data() + out_row * static_cast<size_t>(info.vocab),
                                   static_cast<size_t>(info.vocab));
        next = r.sampler->sample(row, r.request->prompt, r.result.tokens);
      }
      ++out_row;
      r.result.tokens.push_back(next);
      if (r.phase == Phase::Prefill) {
        r.phase = Phase::Decode;
        r.first_token = Clock::now();
        r.result.stats.prefill_seconds = seconds_between(r.admitted, r.first_token);
      }
      const auto generated = static_cast<int64_t>(r.result.tokens.size());
      const auto& stops = r.request->stop_ids;
      if (on_token && !on_token(chunk_run[c], next))
        finish(r, "cancelled");
      else if (std::find(stops.begin(), stops.end(), next) != stops.end())
        finish(r, "stop");
      else if (generated >= r.request->max_new_tokens ||
               static_cast<int64_t>(r.request->prompt.size()) + generated > r.need)
        finish(r, "length");  // the token limit, or the context is full
    }
  }
  std::vector<GenerationResult> results;
  results.reserve(n);
  for (Running& r : runs) results.push_back(std::move(r.result));
  return results;
}

}  // namespace infera
