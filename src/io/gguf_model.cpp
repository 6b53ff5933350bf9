#include "io/gguf_model.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "infera/error.h"
#include "io/gguf_tokenizer.h"
#include "io/mapped_file.h"

namespace infera::io {

namespace {

using nlohmann::json;

// GGUF per-layer suffix <-> Hugging Face per-layer suffix (llama.cpp's tensor map for Qwen3).
const std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
};
const std::pair<const char*, const char*> kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// "<prefix><digits>.<rest>" -> (layer, rest); the layer must be a plain decimal below 2^20.
std::optional<std::pair<int, std::string>> split_layer(const std::string& name,
                                                       const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  size_t i = prefix.size();
  int layer = 0, digits = 0;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && digits < 7) {
    layer = layer * 10 + (name[i] - '0');
    ++i;
    ++digits;
  }
  if (digits == 0 || (digits > 1 && name[prefix.size()] == '0') || i >= name.size() ||
      name[i] != '.')
    return std::nullopt;
  return std::make_pair(layer, name.substr(i + 1));
}

[[noreturn]] void bad_key(const std::string& origin, const std::string& key,
                          const std::string& what) {
  throw FormatError(origin + ": metadata " + key + ": " + what);
}

int64_t count_key(const GgufFile& f, const std::string& origin, const std::string& key,
                  std::optional<int64_t> fallback = std::nullopt) {
  const GgufValue* v = f.find(key);
  if (!v) {
    if (fallback) return *fallback;
    bad_key(origin, key, "missing");
  }
  const auto i = v->as_int();
  if (!i || *i < 1 || *i > std::numeric_limits<int32_t>::max()) {
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict, bug 105329) on a + chain here.
    std::string what = "expected a positive integer, got a ";
    what += gguf_type_name(v->type);
    if (i) {
      what += ' ';
      what += std::to_string(*i);
    }
    bad_key(origin, key, what);
  }
  return *i;
}

std::optional<double> float_key(const GgufFile& f, const std::string& origin,
                                const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) return std::nullopt;
  const auto d = v->as_float();
  if (!d || !std::isfinite(*d) || *d <= 0) bad_key(origin, key, "expected a positive number");
  return d;
}

}  // namespace

std::optional<std::string> qwen3_hf_tensor_name(const std::string& gguf_name) {
  for (const auto& [g, h] : kGlobalNames)
    if (gguf_name == g) return std::string(h);
  if (const auto parts = split_layer(gguf_name, "blk."))
    for (const auto& [g, h] : kLayerNames)
      if (parts->second == g) return "model.layers." + std::to_string(parts->first) + "." + h;
  return std::nullopt;
}

std::optional<std::string> qwen3_gguf_tensor_name(const std::string& hf_name) {
  for (const auto& [g, h] : kGlobalNames)
    if (hf_name == h) return std::string(g);
  if (const auto parts = split_layer(hf_name, "model.layers."))
    for (const auto& [g, h] : kLayerNames)
      if (parts->second == h) return "blk." + std::to_string(parts->first) + "." + g;
  return std::nullopt;
}

bool is_gguf_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

GgufModel load_gguf_model(const std::filesystem::path& path) {
  const std::string origin = path.string();
  const std::shared_ptr<MappedFile> mapped = MappedFile::open(path);
  const GgufFile file = parse_gguf(mapped->data(), mapped->size(), origin);

  GgufModel model;
  const GgufValue* arch = file.find("general.architecture");
  if (!arch || arch->type != GgufType::STRING)
    bad_key(origin, "general.architecture", "missing or not a string");
  model.architecture = arch->str;
  if (model.architecture != "qwen3")
    bad_key(origin, "general.architecture",
            "'" + model.architecture + "' is not supported (only qwen3)");
  const std::string a = "qwen3.";

  // Tensors under their Hugging Face names; anything outside the Qwen3 table is an error, so
  // a file of another layout fails here with the tensor's name rather than computing nonsense.
  std::vector<Tensor> hf_tensors;
  int64_t embed_rows = 0;
  bool has_output = false;
  for (const Tensor& t : read_gguf_tensors(file, mapped->data(), mapped->size(), mapped)) {
    const auto hf = qwen3_hf_tensor_name(t.name());
    if (!hf) throw FormatError(origin + ": tensor " + t.name() + " is not part of a Qwen3 model");
    if (*hf == "model.embed_tokens.weight" && t.rank() == 2) embed_rows = t.dim(0);
    if (*hf == "lm_head.weight") has_output = true;
    hf_tensors.push_back(t.renamed(*hf));
  }
  model.weights = WeightStore::from_tensors(std::move(hf_tensors), origin);

  const int64_t hidden = count_key(file, origin, a + "embedding_length");
  const int64_t heads = count_key(file, origin, a + "attention.head_count");
  const int64_t head_dim =
      count_key(file, origin, a + "attention.key_length", hidden / std::max<int64_t>(heads, 1));
  if (const GgufValue* vl = file.find(a + "attention.value_length"))
    if (vl->as_int() != head_dim)
      bad_key(origin, a + "attention.value_length", "must equal attention.key_length");
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  const int64_t vocab =
      count_key(file, origin, a + "vocab_size",
                tokens && tokens->array_size() > 0 ? int64_t(tokens->array_size()) : embed_rows);
  if (embed_rows != 0 && embed_rows != vocab)
    throw FormatError(origin + ": token_embd.weight has " + std::to_string(embed_rows) +
                      " rows but the vocabulary has " + std::to_string(vocab) + " tokens");
  json cfg = {
      {"model_type", "qwen3"},
      {"architectures", {"Qwen3ForCausalLM"}},
      {"vocab_size", vocab},
      {"hidden_size", hidden},
      {"intermediate_size", count_key(file, origin, a + "feed_forward_length")},
      {"num_hidden_layers", count_key(file, origin, a + "block_count")},
      {"num_attention_heads", heads},
      {"num_key_value_heads", count_key(file, origin, a + "attention.head_count_kv", heads)},
      {"head_dim", head_dim},
      {"max_position_embeddings", count_key(file, origin, a + "context_length", 40960)},
      {"rms_norm_eps",
       float_key(file, origin, a + "attention.layer_norm_rms_epsilon").value_or(1e-6)},
      {"rope_theta", float_key(file, origin, a + "rope.freq_base").value_or(10000.0)},
      {"tie_word_embeddings", !has_output},
  };
  if (const GgufValue* scaling = file.find(a + "rope.scaling.type"))
    if (scaling->type != GgufType::STRING || scaling->str != "none")
      cfg["rope_scaling"] = {{"rope_type", scaling->type == GgufType::STRING ? scaling->str : "?"}};
  model.config = HfConfig::parse(cfg.dump(), origin + " (GGUF metadata)");

  if (const GgufValue* ft = file.find("general.file_type"); ft && ft->as_int()) {
    // llama.cpp's LLAMA_FTYPE_* ids of the types we run; others shown by number.
    static const std::pair<int64_t, const char*> kNames[] = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},  {7, "Q8_0"},
        {14, "Q4_K_S"}, {15, "Q4_K_M"}, {18, "Q6_K"}, {32, "BF16"}};
    model.file_type = "file type " + std::to_string(*ft->as_int());
    for (const auto& [id, name] : kNames)
      if (*ft->as_int() == id) model.file_type = name;
  }
  model.tokenizer_json = tokenizer_json_from_gguf(file, origin);
  if (const GgufValue* t = file.find("tokenizer.chat_template")) {
    if (t->type != GgufType::STRING) bad_key(origin, "tokenizer.chat_template", "not a string");
    model.chat_template = t->str;
  }
  model.generation.eos_token_ids = gguf_stop_token_ids(file, origin);
  const size_t n_tokens = tokens ? tokens->array_size() : 0;
  if (const GgufValue* bos = file.find("tokenizer.ggml.bos_token_id")) {
    const auto id = bos->as_int();
    if (!id || *id < 0 || static_cast<size_t>(*id) >= n_tokens)
      bad_key(origin, "tokenizer.ggml.bos_token_id", "not a token id");
    model.generation.bos_token_id = static_cast<int32_t>(*id);
  }
  if (const GgufValue* v = file.find("general.sampling.top_k");
      v && v->as_int() && *v->as_int() >= 0)
    model.generation.top_k = static_cast<int32_t>(std::min<int64_t>(*v->as_int(), 1 << 30));
  // Optional sampling defaults; values outside their range are ignored like absent ones.
  auto number = [&](const char* key, double hi) -> std::optional<float> {
    const GgufValue* v = file.find(key);
    if (!v || !v->as_float() || !(*v->as_float() >= 0.0 && *v->as_float() <= hi))
      return std::nullopt;
    return static_cast<float>(*v->as_float());
  };
  model.generation.top_p = number("general.sampling.top_p", 1.0);
  model.generation.min_p = number("general.sampling.min_p", 1.0);
  model.generation.temperature = number("general.sampling.temp", 1e6);
  if (model.generation.temperature) model.generation.do_sample = *model.generation.temperature > 0;
  return model;
}

}  // namespace infera::io
