// Hugging Face config.json and generation_config.json, in both the transformers 4 style
// (`rope_theta`, `torch_dtype`) and the transformers 5 style (`rope_parameters`, `dtype`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "infera/tensor.h"

namespace infera::io {

// A parsed config.json with typed, checked accessors. Errors name the file and the key:
// "config.json: key hidden_size: expected a positive integer".
class HfConfig {
 public:
  static HfConfig load(const std::filesystem::path& file);
  static HfConfig parse(const std::string& text, const std::string& origin);

  const nlohmann::json& json() const { return json_; }
  const std::string& origin() const { return origin_; }

  // A key whose value is JSON null counts as absent (transformers writes `"pad_token_id": null`).
  bool has(const std::string& key) const;
  // Integers must be JSON integers (not 2.0) in [1, 2^31-1]: every config count (sizes, heads,
  // layers, vocab) fits, and model code can multiply two of them in int64 without overflow.
  int64_t get_int(const std::string& key) const;                       // required, > 0 unless noted
  int64_t get_int_or(const std::string& key, int64_t fallback) const;  // present => same checks
  // Any integer in [lo, hi] (token ids: 0 allowed; sentinels such as -100); fallback when absent,
  // FormatError "... missing" when absent and no fallback.
  int64_t get_int_in(const std::string& key, int64_t lo, int64_t hi,
                     std::optional<int64_t> fallback = std::nullopt) const;
  double get_float(const std::string& key) const;  // any finite JSON number (integers too)
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_string_or(const std::string& key, const std::string& fallback) const;

  std::string model_type() const;  // "qwen3"
  // rope_theta from `rope_theta` (v4) or `rope_parameters.rope_theta` (v5); fallback when absent.
  // When rope_parameters is keyed by layer type (v5 ModernBERT), this is the full_attention one.
  double rope_theta(double fallback) const;
  // rope_theta of one layer type ("full_attention", "sliding_attention"): v5
  // `rope_parameters.<type>.rope_theta`, v4 ModernBERT `global_rope_theta` / `local_rope_theta`,
  // else rope_theta(fallback).
  double rope_theta_for(const std::string& layer_type, double fallback) const;
  // `rope_parameters.rope_type` (v5) or `rope_scaling.rope_type|type` (v4); "default" when absent.
  std::string rope_type() const;
  // Weight dtype from `torch_dtype` (v4) or `dtype` (v5): bfloat16 / float16 / float32.
  std::optional<DType> weight_dtype() const;

 private:
  nlohmann::json json_;
  std::string origin_;
};

// Defaults from generation_config.json. Absent file => all fields empty.
struct GenerationDefaults {
  std::vector<int32_t> eos_token_ids;  // `eos_token_id`: an int or a list
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> pad_token_id;
  std::optional<bool> do_sample;
  std::optional<float> temperature;
  std::optional<int32_t> top_k;
  std::optional<float> top_p;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<int32_t> max_new_tokens;
};

// Reads `dir/generation_config.json` when present; otherwise returns defaults.
GenerationDefaults load_generation_defaults(const std::filesystem::path& dir);
// The same from an already parsed generation_config.json (errors name config.origin()).
GenerationDefaults generation_defaults(const HfConfig& config);

}  // namespace infera::io
