// Sampling and length options of `run` and `chat`. Unset options fall back to the model's
// generation_config.json, as transformers' generate() does.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "engine/generator.h"
#include "io/hf_config.h"

namespace infera::cli {

struct GenerationOptions {
  std::optional<int64_t> max_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  float presence_penalty = 0.0f, frequency_penalty = 0.0f;
  uint64_t seed = 0;
  bool greedy = false;
  bool ignore_eos = false;

  void add_to(CLI::App& cmd);
  GenerationRequest to_request(const io::GenerationDefaults& defaults) const;
};

// The KV cache storage that `kv_dtype` (auto, f32, bf16, f16) names for a model whose matmuls
// run at `matmul_precision`: auto is bf16 where they run in bf16 (run, chat and bench by default:
// the keys and values then hold bf16 products anyway, and decode at long contexts reads half the
// bytes; vLLM keeps the model's dtype, llama.cpp f16), f32 where they run in f32.
DType resolve_kv_dtype(const std::string& kv_dtype, const std::string& matmul_precision);

// How the engine runs requests: KV cache storage and the per-step token budget.
struct EngineOptions {
  std::string kv_dtype = "auto";
  int64_t block_size = 32;
  int64_t max_batch_tokens = 512;
  int64_t kv_memory_mb = 8192;

  void add_to(CLI::App& cmd);
  GeneratorOptions to_generator_options(const std::string& matmul_precision) const;
};

}  // namespace infera::cli
