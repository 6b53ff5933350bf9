#include "generation_options.h"

namespace infera::cli {

void GenerationOptions::add_to(CLI::App& cmd) {
  cmd.add_option("-n,--max-tokens", max_tokens, "Most tokens to generate (default 256)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd.add_option("--temperature", temperature,
                 "Sampling temperature; 0 = greedy (default: generation_config.json, else greedy)");
  cmd.add_option("--top-k", top_k, "Keep the k most likely tokens (0 = off)");
  cmd.add_option("--top-p", top_p, "Nucleus sampling: keep the smallest set with this mass");
  cmd.add_option("--min-p", min_p, "Drop tokens less likely than min-p x the top probability");
  cmd.add_option("--repetition-penalty", repetition_penalty,
                 "Penalise tokens already seen (> 1 discourages repeats; HF semantics)");
  cmd.add_option("--presence-penalty", presence_penalty, "OpenAI-style presence penalty");
  cmd.add_option("--frequency-penalty", frequency_penalty, "OpenAI-style frequency penalty");
  cmd.add_option("--seed", seed, "Random seed; the same seed gives the same output")
      ->capture_default_str();
  cmd.add_flag("--greedy", greedy, "Always pick the most likely token (temperature 0)");
  cmd.add_flag("--ignore-eos", ignore_eos, "Do not stop at end-of-sequence tokens");
}

GenerationRequest GenerationOptions::to_request(const io::GenerationDefaults& d) const {
  GenerationRequest r;
  r.max_new_tokens = max_tokens.value_or(d.max_new_tokens.value_or(256));
  SamplingParams& s = r.sampling;
  // transformers: sampling only when do_sample is true; then its defaults are temperature 1,
  // top_k 50, top_p 1.
  const bool sample = d.do_sample.value_or(false);
  s.temperature = temperature.value_or(sample ? d.temperature.value_or(1.0f) : 0.0f);
  s.top_k = top_k.value_or(sample ? d.top_k.value_or(50) : 0);
  s.top_p = top_p.value_or(sample ? d.top_p.value_or(1.0f) : 1.0f);
  s.min_p = min_p.value_or(sample ? d.min_p.value_or(0.0f) : 0.0f);
  s.repetition_penalty = repetition_penalty.value_or(d.repetition_penalty.value_or(1.0f));
  s.presence_penalty = presence_penalty;
  s.frequency_penalty = frequency_penalty;
  s.seed = seed;
  if (greedy) s.temperature = 0.0f;
  if (!ignore_eos) r.stop_ids = d.eos_token_ids;
  return r;
}

DType resolve_kv_dtype(const std::string& kv_dtype, const std::string& matmul_precision) {
  if (kv_dtype == "auto") return matmul_precision == "bf16" ? DType::BF16 : DType::F32;
  return kv_dtype == "bf16" ? DType::BF16 : kv_dtype == "f16" ? DType::F16 : DType::F32;
}

void EngineOptions::add_to(CLI::App& cmd) {
  cmd.add_option("--kv-dtype", kv_dtype,
                 "KV cache storage: auto (bf16 where matmuls run in bf16, else f32), f32, bf16 "
                 "or f16")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd.add_option("--kv-block-size", block_size, "KV cache tokens per block")
      ->check(CLI::Range(int64_t{1}, int64_t{4096}))
      ->capture_default_str();
  cmd.add_option("--max-batch-tokens", max_batch_tokens,
                 "Most tokens in one forward pass (decode rows + prompt chunks)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  cmd.add_option("--kv-memory-mb", kv_memory_mb,
                 "Most memory for the KV cache; requests beyond it wait their turn")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
}

GeneratorOptions EngineOptions::to_generator_options(const std::string& matmul_precision) const {
  GeneratorOptions g;
  g.kv_dtype = resolve_kv_dtype(kv_dtype, matmul_precision);
  g.block_size = block_size;
  g.max_batch_tokens = max_batch_tokens;
  g.max_kv_bytes = kv_memory_mb << 20;
  return g;
}

}  // namespace infera::cli
