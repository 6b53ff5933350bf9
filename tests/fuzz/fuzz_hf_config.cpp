// config.json and generation_config.json: HfConfig::parse and every accessor the models and the
// CLI call, on the keys they read, plus the generation defaults. Each accessor returns a value in
// its documented range or throws FormatError.
#include <cmath>
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "infera/error.h"
#include "io/hf_config.h"

using namespace infera;

namespace {

// The keys today's models read (Qwen3, ModernBERT), and a few that no model reads.
const char* const kIntKeys[] = {"vocab_size",
                                "hidden_size",
                                "intermediate_size",
                                "num_hidden_layers",
                                "num_attention_heads",
                                "num_key_value_heads",
                                "head_dim",
                                "max_position_embeddings",
                                "pad_token_id",
                                "global_attn_every_n_layers",
                                "local_attention",
                                "x"};

template <typename F>
void guarded(F&& f) {
  try {
    f();
  } catch (const FormatError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<io::HfConfig> parsed;
  try {
    parsed = io::HfConfig::parse(text, "config.json");
  } catch (const FormatError&) {
    return 0;
  }
  const io::HfConfig& c = *parsed;
  for (const char* key : kIntKeys) {
    guarded([&] {
      const int64_t v = c.get_int(key);
      fuzz::check(v >= 1 && v <= INT32_MAX, "get_int out of range");
    });
    guarded([&] {
      const int64_t v = c.get_int_in(key, -100, 1000, 7);
      fuzz::check(v >= -100 && v <= 1000, "get_int_in out of range");
    });
    guarded([&] { fuzz::check(std::isfinite(c.get_float_or(key, 0.5)), "get_float not finite"); });
    guarded([&] { c.get_bool_or(key, false); });
    guarded([&] { c.get_string_or(key, ""); });
    c.has(key);
  }
  guarded([&] { fuzz::check(std::isfinite(c.get_float_or("rms_norm_eps", 1e-6)), "eps"); });
  guarded([&] { c.model_type(); });
  guarded([&] { c.rope_type(); });
  guarded([&] { c.weight_dtype(); });
  guarded([&] {
    const double t = c.rope_theta(1e6);
    fuzz::check(std::isfinite(t) && t > 0, "rope_theta not positive and finite");
  });
  for (const char* type : {"full_attention", "sliding_attention", "other"})
    guarded([&] {
      const double t = c.rope_theta_for(type, 1e4);
      fuzz::check(std::isfinite(t) && t > 0, "rope_theta_for not positive and finite");
    });
  guarded([&] {
    const io::GenerationDefaults g = io::generation_defaults(c);
    for (int32_t id : g.eos_token_ids) fuzz::check(id >= 0, "negative eos id");
    if (g.temperature) fuzz::check(std::isfinite(*g.temperature) && *g.temperature >= 0, "temp");
    if (g.top_p) fuzz::check(*g.top_p >= 0 && *g.top_p <= 1, "top_p");
    if (g.min_p) fuzz::check(*g.min_p >= 0 && *g.min_p <= 1, "min_p");
    if (g.top_k) fuzz::check(*g.top_k >= 0, "top_k");
    if (g.repetition_penalty)
      fuzz::check(std::isfinite(*g.repetition_penalty) && *g.repetition_penalty > 0, "penalty");
    if (g.max_new_tokens) fuzz::check(*g.max_new_tokens >= 1, "max_new_tokens");
  });
  return 0;
}
