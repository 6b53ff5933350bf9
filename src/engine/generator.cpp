#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "infera/error.h"

namespace infera {
namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

double GenerationStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0.0;
}
double GenerationStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(decode_steps) / decode_seconds : 0.0;
}

GenerationResult Generator::generate(const GenerationRequest& request,
                                     const std::function<bool(int32_t)>& on_token) {
  const ModelInfo& info = model_.info();
  const auto prompt_len = static_cast<int64_t>(request.prompt.size());
  if (prompt_len == 0) throw InvalidArgument("the prompt has no tokens");
  if (request.max_new_tokens < 0) throw InvalidArgument("max tokens must not be negative");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= info.vocab)
      throw InvalidArgument("prompt token id " + std::to_string(id) +
                            " is outside the vocabulary [0, " + std::to_string(info.vocab) + ")");
  if (prompt_len >= info.max_positions)
    throw InvalidArgument("the prompt has " + std::to_string(prompt_len) +
                          " tokens; the model's context is " + std::to_string(info.max_positions));
  request.sampling.validate();

  const int64_t capacity =
      std::min(info.max_positions, prompt_len + std::max<int64_t>(request.max_new_tokens, 1));
  KvCache cache = model_.new_cache(capacity);
  Sampler sampler(request.sampling);
  GenerationResult result;
  result.stats.prompt_tokens = prompt_len;
  std::vector<float> logits(static_cast<size_t>(info.vocab));

  auto start = std::chrono::steady_clock::now();
  const int64_t chunk = std::max<int64_t>(request.prefill_chunk, 1);
  for (int64_t begin = 0; begin < prompt_len; begin += chunk) {
    const int64_t n = std::min(chunk, prompt_len - begin);
    const bool last = begin + n == prompt_len;
    const int64_t last_row = n - 1;
    model_.forward(std::span<const int32_t>(request.prompt)
                       .subspan(static_cast<size_t>(begin), static_cast<size_t>(n)),
                   cache,
                   last ? std::span<const int64_t>(&last_row, 1) : std::span<const int64_t>(),
                   last ? std::span<float>(logits) : std::span<float>());
  }
  result.finish_reason = "length";
  for (int64_t step = 0; step < request.max_new_tokens; ++step) {
    if (step > 0) {
      // Feed the previous token; its logits give the next one.
      const int64_t row = 0;
      model_.forward(std::span<const int32_t>(&result.tokens.back(), 1), cache,
                     std::span<const int64_t>(&row, 1), logits);
      ++result.stats.decode_steps;
    }
    const int32_t next = sampler.sample(logits, request.prompt, result.tokens);
    result.tokens.push_back(next);
    if (step == 0) {
      result.stats.prefill_seconds = seconds_since(start);
      start = std::chrono::steady_clock::now();
    }
    if (on_token && !on_token(next)) {
      result.finish_reason = "cancelled";
      break;
    }
    if (std::find(request.stop_ids.begin(), request.stop_ids.end(), next) !=
        request.stop_ids.end()) {
      result.finish_reason = "stop";
      break;
    }
    if (cache.length >= cache.capacity) break;  // context full: "length"
  }
  if (result.tokens.empty())
    result.stats.prefill_seconds = seconds_since(start);
  else
    result.stats.decode_seconds = seconds_since(start);
  result.stats.generated_tokens = static_cast<int64_t>(result.tokens.size());
  return result;
}

}  // namespace infera
