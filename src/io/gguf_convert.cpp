#include "io/gguf_convert.h"

#include <algorithm>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "infera/error.h"
#include "io/gguf_model.h"
#include "io/gguf_tokenizer.h"
#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "io/weight_store.h"
#include "quant/quantize.h"

namespace infera::io {

namespace {

using nlohmann::json;

bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

json read_json(const std::filesystem::path& path, bool required) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (required) throw IoError(path.string() + ": cannot open");
    return json();
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    throw FormatError(path.string() + ": not valid JSON: " + e.what());
  }
}

uint32_t llama_file_type(GgufFileType t) {  // llama.cpp's LLAMA_FTYPE_* ids
  switch (t) {
    case GgufFileType::F32:
      return 0;
    case GgufFileType::F16:
      return 1;
    case GgufFileType::Q4_0:
      return 2;
    case GgufFileType::Q8_0:
      return 7;
    case GgufFileType::Q4_K_M:
      return 15;
    case GgufFileType::BF16:
      return 32;
  }
  return 0;
}

// Converts rows [begin, end) of `src` (any float dtype) to `dtype` at `dst`.
void convert_rows(const Tensor& src, DType dtype, int64_t begin, int64_t end, uint8_t* dst) {
  const int64_t k = src.dim(src.rank() - 1);
  const size_t src_row = dtype_bytes(src.dtype(), static_cast<size_t>(k));
  const size_t dst_row = dtype_bytes(dtype, static_cast<size_t>(k));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = begin; r < end; ++r) {
    quant::dequantize_row(src.dtype(), static_cast<const uint8_t*>(src.data()) + src_row * r, k,
                          row.data());
    quant::quantize_row(dtype, row.data(), k, dst + dst_row * r);
  }
}

}  // namespace

GgufFileType parse_gguf_file_type(const std::string& name) {
  for (GgufFileType t : {GgufFileType::F32, GgufFileType::F16, GgufFileType::BF16,
                         GgufFileType::Q8_0, GgufFileType::Q4_0, GgufFileType::Q4_K_M})
    if (name == gguf_file_type_name(t)) return t;
  throw InvalidArgument("unknown type '" + name +
                        "' (expected f32, f16, bf16, q8_0, q4_0, q4_k_m)");
}

const char* gguf_file_type_name(GgufFileType t) {
  switch (t) {
    case GgufFileType::F32:
      return "f32";
    case GgufFileType::F16:
      return "f16";
    case GgufFileType::BF16:
      return "bf16";
    case GgufFileType::Q8_0:
      return "q8_0";
    case GgufFileType::Q4_0:
      return "q4_0";
    case GgufFileType::Q4_K_M:
      return "q4_k_m";
  }
  return "?";
}

DType gguf_tensor_type(GgufFileType type, const std::string& name, const Shape& shape,
                       int64_t layer, int64_t layers, bool tied) {
  if (shape.rank < 2) return DType::F32;
  DType t = DType::F32;
  switch (type) {
    case GgufFileType::F32:
      return DType::F32;
    case GgufFileType::F16:
      t = DType::F16;
      break;
    case GgufFileType::BF16:
      t = DType::BF16;
      break;
    case GgufFileType::Q8_0:
      t = DType::Q8_0;
      break;
    case GgufFileType::Q4_0:
      t = DType::Q4_0;
      break;
    case GgufFileType::Q4_K_M:
      t = DType::Q4_K;
      break;
  }
  const bool output = name == "output.weight" || (tied && name == "token_embd.weight");
  const bool four_bit = type == GgufFileType::Q4_0 || type == GgufFileType::Q4_K_M;
  if (four_bit && output) t = DType::Q6_K;
  if (type == GgufFileType::Q4_K_M && use_more_bits(layer, layers) &&
      (name.find(".attn_v.weight") != std::string::npos ||
       name.find(".ffn_down.weight") != std::string::npos))
    t = DType::Q6_K;
  const int64_t k = shape[shape.rank - 1];
  if (k % dtype_block_size(t) != 0) t = (t == DType::Q4_K || t == DType::Q6_K) ? DType::Q8_0 : t;
  if (k % dtype_block_size(t) != 0) t = DType::F16;
  return t;
}

std::vector<ConvertedTensor> convert_qwen3_to_gguf(const std::filesystem::path& dir,
                                                   GgufFileType type,
                                                   const std::filesystem::path& out,
                                                   const ConvertOptions& options) {
  const int threads = options.threads;
  const auto& progress = options.progress;
  const std::filesystem::path tok_dir = options.tokenizer_dir.empty() ? dir : options.tokenizer_dir;
  const HfConfig config = HfConfig::load(dir / "config.json");
  if (config.model_type() != "qwen3")
    throw FormatError((dir / "config.json").string() + ": model_type '" + config.model_type() +
                      "' cannot be converted (only qwen3)");
  std::optional<WeightStore> opened;
  if (!options.weights) opened = WeightStore::open_folder(dir);
  const WeightStore& store = options.weights ? *options.weights : *opened;
  const json tokenizer = read_json(tok_dir / "tokenizer.json", true);
  const json tokenizer_config = read_json(tok_dir / "tokenizer_config.json", false);
  const json generation = read_json(dir / "generation_config.json", false);

  const int64_t hidden = config.get_int("hidden_size");
  const int64_t heads = config.get_int("num_attention_heads");
  const int64_t layers = config.get_int("num_hidden_layers");
  const int64_t vocab = config.get_int("vocab_size");
  const bool tied = config.get_bool_or("tie_word_embeddings", false);
  const int64_t head_dim = config.get_int_or("head_dim", hidden / heads);

  GgufWriter w;
  auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  w.set("general.architecture", GgufValue::string("qwen3"));
  w.set("general.type", GgufValue::string("model"));
  w.set("general.name", GgufValue::string(std::filesystem::absolute(dir).filename().string()));
  w.set("general.file_type", GgufValue::u32(llama_file_type(type)));
  if (type != GgufFileType::F32 && type != GgufFileType::F16 && type != GgufFileType::BF16)
    w.set("general.quantization_version", GgufValue::u32(2));
  w.set("qwen3.block_count", u32(layers));
  w.set("qwen3.context_length", u32(config.get_int_or("max_position_embeddings", 40960)));
  w.set("qwen3.embedding_length", u32(hidden));
  w.set("qwen3.feed_forward_length", u32(config.get_int("intermediate_size")));
  w.set("qwen3.attention.head_count", u32(heads));
  w.set("qwen3.attention.head_count_kv", u32(config.get_int_or("num_key_value_heads", heads)));
  w.set("qwen3.rope.freq_base", GgufValue::f32(static_cast<float>(config.rope_theta(1e6))));
  w.set("qwen3.attention.layer_norm_rms_epsilon",
        GgufValue::f32(static_cast<float>(config.get_float_or("rms_norm_eps", 1e-6))));
  w.set("qwen3.attention.key_length", u32(head_dim));
  w.set("qwen3.attention.value_length", u32(head_dim));
  if (generation.is_object()) {
    if (generation.contains("top_k") && generation["top_k"].is_number_integer())
      w.set("general.sampling.top_k", GgufValue::i32(generation["top_k"].get<int32_t>()));
    for (const auto& [key, gguf_key] : {std::pair{"top_p", "general.sampling.top_p"},
                                        std::pair{"temperature", "general.sampling.temp"},
                                        std::pair{"min_p", "general.sampling.min_p"}})
      if (generation.contains(key) && generation[key].is_number())
        w.set(gguf_key, GgufValue::f32(generation[key].get<float>()));
  }
  TokenizerMetadataSource src;
  src.tokenizer = &tokenizer;
  src.tokenizer_config = tokenizer_config.is_object() ? &tokenizer_config : nullptr;
  src.vocab_size = vocab;
  if (config.has("bos_token_id"))
    src.bos_token_id = config.get_int_in("bos_token_id", 0, vocab - 1);
  add_tokenizer_metadata(w, src, (tok_dir / "tokenizer.json").string());

  // Tensors in llama.cpp's order: embeddings, then each layer, then the final norm and output.
  std::vector<std::pair<std::string, std::string>> order;  // (gguf, hf)
  std::vector<std::string> names = store.names();
  for (const std::string& hf : names) {
    const auto g = qwen3_gguf_tensor_name(hf);
    if (!g) throw FormatError(dir.string() + ": tensor " + hf + " is not part of a Qwen3 model");
    order.emplace_back(*g, hf);
  }
  auto rank = [](const std::string& g) -> std::pair<int64_t, std::string> {
    if (g == "token_embd.weight") return {-1, g};
    if (g.rfind("blk.", 0) == 0) return {std::stoll(g.substr(4)), g};
    return {1 << 30, g == "output_norm.weight" ? "0" : g};
  };
  std::sort(order.begin(), order.end(),
            [&](const auto& a, const auto& b) { return rank(a.first) < rank(b.first); });

  const int n_threads =
      threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<ConvertedTensor> written;
  for (const auto& [gname, hf] : order) {
    const Tensor& src_t = store.get(hf);
    if (src_t.dtype() != DType::F32 && src_t.dtype() != DType::F16 && src_t.dtype() != DType::BF16)
      throw FormatError(dir.string() + ": tensor " + hf + " has dtype " +
                        std::string(dtype_name(src_t.dtype())) + ", expected F32, F16 or BF16");
    const int64_t layer = gname.rfind("blk.", 0) == 0 ? std::stoll(gname.substr(4)) : 0;
    const DType dtype = gguf_tensor_type(type, gname, src_t.shape(), layer, layers, tied);
    ConvertedTensor info{gname, dtype, src_t.shape()};
    written.push_back(info);
    w.add_tensor(gname, dtype, src_t.shape(),
                 [&src_t, dtype, n_threads, info, &progress](std::vector<uint8_t>& bytes) {
                   const int64_t rows = src_t.numel() / src_t.dim(src_t.rank() - 1);
                   const int64_t per = (rows + n_threads - 1) / n_threads;
                   std::vector<std::thread> pool;
                   std::vector<std::exception_ptr> errors(static_cast<size_t>(n_threads));
                   for (int64_t b = 0, t = 0; b < rows; b += per, ++t)
                     pool.emplace_back([&, b, t] {
                       try {  // an exception must not escape a std::thread (terminate)
                         convert_rows(src_t, dtype, b, std::min(rows, b + per), bytes.data());
                       } catch (...) {
                         errors[static_cast<size_t>(t)] = std::current_exception();
                       }
                     });
                   for (auto& t : pool) t.join();
                   for (const auto& e : errors)
                     if (e) std::rethrow_exception(e);
                   if (progress) progress(info);
                 });
  }
  w.write(out);
  return written;
}

}  // namespace infera::io
