#include "io/hf_config.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <system_error>

#include "core/json_limits.h"
#include "infera/error.h"

namespace infera::io {

namespace {

namespace fs = std::filesystem;
// Not `json`: HfConfig has a member function of that name, which would hide the type.
using Json = nlohmann::json;

constexpr int64_t kMaxConfigInt = std::numeric_limits<int32_t>::max();
// Config files are a few KB; the cap only stops a hostile "config" from being read whole.
constexpr uintmax_t kMaxConfigBytes = 16ull * 1024 * 1024;

// The offending value, shortened: a hostile file may put megabytes in one string.
std::string shown(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

[[noreturn]] void bad_key(const std::string& origin, const std::string& key,
                          const std::string& expected, const Json* value) {
  std::string msg = origin + ": key " + key + ": ";
  msg += value ? "expected " + expected + ", got " + shown(*value)
               : "missing (expected " + expected + ")";
  throw FormatError(msg);
}

// nullptr when absent or null.
const Json* find(const Json& obj, const std::string& key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<int64_t> as_int(const Json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

int64_t checked_int(const Json& v, const std::string& origin, const std::string& key, int64_t lo,
                    int64_t hi, const std::string& expected) {
  const auto i = as_int(v);
  if (!i || *i < lo || *i > hi) bad_key(origin, key, expected, &v);
  return *i;
}

double checked_float(const Json& v, const std::string& origin, const std::string& key, double lo,
                     double hi, const std::string& expected) {
  if (!v.is_number()) bad_key(origin, key, expected, &v);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) bad_key(origin, key, expected, &v);
  return d;
}

const char* kPositiveInt = "a positive integer (at most 2147483647)";

std::string read_text(const fs::path& file) {
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(file, ec);
  if (ec) throw IoError(file.string() + ": cannot open: " + ec.message());
  if (bytes > kMaxConfigBytes)
    throw FormatError(file.string() + ": " + std::to_string(bytes) +
                      " bytes, too large for a config");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError(file.string() + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw IoError(file.string() + ": read failed");
  return text.str();
}

double positive_theta(const Json& v, const std::string& origin, const std::string& key) {
  return checked_float(v, origin, key, std::numeric_limits<double>::min(),
                       std::numeric_limits<double>::max(), "a positive number");
}

// The RoPE type named in a rope object (`rope_type`, or the older `type`); "default" when absent.
std::string rope_type_of(const Json& params, const std::string& origin, const std::string& key) {
  if (!params.is_object()) bad_key(origin, key, "an object or null", &params);
  for (const char* field : {"rope_type", "type"}) {
    if (const Json* t = find(params, field)) {
      if (!t->is_string()) bad_key(origin, key + "." + field, "a string", t);
      return t->get<std::string>();
    }
  }
  return "default";
}

// Only plain RoPE is implemented. A scaled one (linear, dynamic, yarn, longrope, llama3) changes
// every position's angles, so loading it as plain RoPE would run with wrong positions silently.
// transformers 4 says so in `rope_scaling`, transformers 5 in `rope_parameters.rope_type` (per
// layer type for models such as ModernBERT): both are checked wherever a theta is read.
void require_default_rope(const Json* params, const std::string& origin, const std::string& key) {
  if (params == nullptr) return;
  const std::string type = rope_type_of(*params, origin, key);
  if (type != "default")
    throw FormatError(origin + ": " + key + ".rope_type '" + type +
                      "' is not supported yet (only default RoPE is implemented)");
}

}  // namespace

HfConfig HfConfig::load(const fs::path& file) { return parse(read_text(file), file.string()); }

HfConfig HfConfig::parse(const std::string& text, const std::string& origin) {
  HfConfig config;
  config.origin_ = origin;
  config.json_ = parse_json_capped<Json>(text, origin);
  if (!config.json_.is_object()) throw FormatError(origin + ": not a JSON object");
  return config;
}

bool HfConfig::has(const std::string& key) const { return find(json_, key) != nullptr; }

int64_t HfConfig::get_int(const std::string& key) const {
  const Json* v = find(json_, key);
  if (!v) bad_key(origin_, key, kPositiveInt, nullptr);
  return checked_int(*v, origin_, key, 1, kMaxConfigInt, kPositiveInt);
}

int64_t HfConfig::get_int_or(const std::string& key, int64_t fallback) const {
  const Json* v = find(json_, key);
  if (!v) return fallback;
  return checked_int(*v, origin_, key, 1, kMaxConfigInt, kPositiveInt);
}

int64_t HfConfig::get_int_in(const std::string& key, int64_t lo, int64_t hi,
                             std::optional<int64_t> fallback) const {
  const std::string expected =
      "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  const Json* v = find(json_, key);
  if (!v) {
    if (fallback) return *fallback;
    bad_key(origin_, key, expected, nullptr);
  }
  return checked_int(*v, origin_, key, lo, hi, expected);
}

double HfConfig::get_float(const std::string& key) const {
  const Json* v = find(json_, key);
  if (!v) bad_key(origin_, key, "a number", nullptr);
  return checked_float(*v, origin_, key, -std::numeric_limits<double>::max(),
                       std::numeric_limits<double>::max(), "a finite number");
}

double HfConfig::get_float_or(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool HfConfig::get_bool_or(const std::string& key, bool fallback) const {
  const Json* v = find(json_, key);
  if (!v) return fallback;
  if (!v->is_boolean()) bad_key(origin_, key, "true or false", v);
  return v->get<bool>();
}

std::string HfConfig::get_string_or(const std::string& key, const std::string& fallback) const {
  const Json* v = find(json_, key);
  if (!v) return fallback;
  if (!v->is_string()) bad_key(origin_, key, "a string", v);
  return v->get<std::string>();
}

std::string HfConfig::model_type() const {
  const Json* v = find(json_, "model_type");
  if (!v || !v->is_string()) bad_key(origin_, "model_type", "a string", v);
  return v->get<std::string>();
}

double HfConfig::rope_theta(double fallback) const {
  require_default_rope(find(json_, "rope_scaling"), origin_, "rope_scaling");
  require_default_rope(find(json_, "rope_parameters"), origin_, "rope_parameters");
  if (const Json* params = find(json_, "rope_parameters")) {
    if (!params->is_object()) bad_key(origin_, "rope_parameters", "an object", params);
    if (const Json* theta = find(*params, "rope_theta"))
      return positive_theta(*theta, origin_, "rope_parameters.rope_theta");
    // v5 configs with per-layer-type rope keep one object per type; full attention is the
    // model-wide default in those architectures.
    if (find(*params, "full_attention") != nullptr)
      return rope_theta_for("full_attention", fallback);
  }
  if (const Json* theta = find(json_, "rope_theta"))
    return positive_theta(*theta, origin_, "rope_theta");
  return fallback;
}

double HfConfig::rope_theta_for(const std::string& layer_type, double fallback) const {
  require_default_rope(find(json_, "rope_scaling"), origin_, "rope_scaling");
  require_default_rope(find(json_, "rope_parameters"), origin_, "rope_parameters");
  if (const Json* params = find(json_, "rope_parameters")) {
    if (const Json* per_type = find(*params, layer_type)) {
      const std::string key = "rope_parameters." + layer_type;
      if (!per_type->is_object()) bad_key(origin_, key, "an object", per_type);
      require_default_rope(per_type, origin_, key);
      if (const Json* theta = find(*per_type, "rope_theta"))
        return positive_theta(*theta, origin_, key + ".rope_theta");
    }
  }
  // transformers 4 ModernBERT spells the two thetas out as top-level keys.
  const char* v4_key = layer_type == "full_attention"      ? "global_rope_theta"
                       : layer_type == "sliding_attention" ? "local_rope_theta"
                                                           : nullptr;
  if (v4_key != nullptr)
    if (const Json* theta = find(json_, v4_key)) return positive_theta(*theta, origin_, v4_key);
  if (const Json* params = find(json_, "rope_parameters"); params && find(*params, "rope_theta"))
    return positive_theta(*find(*params, "rope_theta"), origin_, "rope_parameters.rope_theta");
  if (const Json* theta = find(json_, "rope_theta"))
    return positive_theta(*theta, origin_, "rope_theta");
  return fallback;
}

std::string HfConfig::rope_type() const {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const Json* params = find(json_, key);
    if (!params) continue;
    if (const std::string type = rope_type_of(*params, origin_, key); type != "default")
      return type;
  }
  return "default";
}

std::optional<DType> HfConfig::weight_dtype() const {
  // v5 renamed torch_dtype to dtype; a v5 file that still carries both means `dtype`.
  for (const char* key : {"dtype", "torch_dtype"}) {
    const Json* v = find(json_, key);
    if (!v) continue;
    if (!v->is_string()) bad_key(origin_, key, "a dtype string", v);
    std::string s = v->get<std::string>();
    if (s.rfind("torch.", 0) == 0) s = s.substr(6);
    if (s == "bfloat16") return DType::BF16;
    if (s == "float16" || s == "half") return DType::F16;
    if (s == "float32" || s == "float") return DType::F32;
    bad_key(origin_, key, "bfloat16, float16 or float32", v);
  }
  return std::nullopt;
}

GenerationDefaults load_generation_defaults(const fs::path& dir) {
  const fs::path file = dir / "generation_config.json";
  std::error_code ec;
  if (!fs::exists(file, ec)) return {};
  return generation_defaults(HfConfig::load(file));
}

GenerationDefaults generation_defaults(const HfConfig& config) {
  const Json& j = config.json();
  const std::string& origin = config.origin();
  const int64_t max_id = std::numeric_limits<int32_t>::max();

  GenerationDefaults out;
  if (const Json* eos = find(j, "eos_token_id")) {
    const char* expected = "a token id or a list of token ids";
    if (eos->is_array()) {
      for (const auto& id : *eos)
        out.eos_token_ids.push_back(
            static_cast<int32_t>(checked_int(id, origin, "eos_token_id", 0, max_id, expected)));
    } else {
      out.eos_token_ids.push_back(
          static_cast<int32_t>(checked_int(*eos, origin, "eos_token_id", 0, max_id, expected)));
    }
  }
  auto token = [&](const char* key) -> std::optional<int32_t> {
    if (const Json* v = find(j, key))
      return static_cast<int32_t>(checked_int(*v, origin, key, 0, max_id, "a token id"));
    return std::nullopt;
  };
  auto number = [&](const char* key, double lo, double hi,
                    const char* expected) -> std::optional<float> {
    if (const Json* v = find(j, key))
      return static_cast<float>(checked_float(*v, origin, key, lo, hi, expected));
    return std::nullopt;
  };
  out.bos_token_id = token("bos_token_id");
  out.pad_token_id = token("pad_token_id");
  if (const Json* v = find(j, "do_sample")) {
    if (!v->is_boolean()) bad_key(origin, "do_sample", "true or false", v);
    out.do_sample = v->get<bool>();
  }
  const double kMaxF = std::numeric_limits<float>::max();
  out.temperature = number("temperature", 0.0, kMaxF, "a number >= 0");
  if (const Json* v = find(j, "top_k"))
    out.top_k =
        static_cast<int32_t>(checked_int(*v, origin, "top_k", 0, max_id, "an integer >= 0"));
  out.top_p = number("top_p", 0.0, 1.0, "a number in [0, 1]");
  out.min_p = number("min_p", 0.0, 1.0, "a number in [0, 1]");
  out.repetition_penalty =
      number("repetition_penalty", std::numeric_limits<float>::min(), kMaxF, "a positive number");
  if (const Json* v = find(j, "max_new_tokens"))
    out.max_new_tokens =
        static_cast<int32_t>(checked_int(*v, origin, "max_new_tokens", 1, max_id, kPositiveInt));
  return out;
}

}  // namespace infera::io
