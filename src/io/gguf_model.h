// A Qwen3 GGUF file (as llama.cpp's convert_hf_to_gguf.py or `infera quantize` writes it) seen as
// what the model loader reads from a Hugging Face folder: weights under Hugging Face tensor names
// (mmapped in place, quantized blocks included), a config.json equivalent, the tokenizer as
// tokenizer.json text, the chat template and the stop tokens.
//
// Wiring: load_causal_lm (src/model) reads any regular file given as the model through this, and
// the CLI's load_model (tools/infera/model_options.cpp) also takes the tokenizer and stop ids from
// it. Qwen3's tensor table and shape checks then apply unchanged.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "io/gguf.h"
#include "io/hf_config.h"
#include "io/weight_store.h"

namespace infera::io {

struct GgufModel {
  std::string architecture;  // general.architecture ("qwen3")
  HfConfig config;           // config.json keys: model_type, hidden_size, ... (see .cpp)
  WeightStore weights;       // Hugging Face names: model.layers.0.self_attn.q_proj.weight, ...
  std::string tokenizer_json;
  std::optional<std::string> chat_template;  // tokenizer.chat_template
  GenerationDefaults generation;             // stop ids, bos, sampling defaults when present
  std::string file_type;  // general.file_type as llama.cpp names it ("Q4_K_M"); empty if absent
};

// True when `path` is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& path);

// Opens (mmap) and validates the file; FormatError naming the file and the key or tensor.
GgufModel load_gguf_model(const std::filesystem::path& path);

// Qwen3 tensor names, GGUF <-> Hugging Face ("blk.3.attn_q.weight" <->
// "model.layers.3.self_attn.q_proj.weight"). nullopt for a name outside the Qwen3 table.
std::optional<std::string> qwen3_hf_tensor_name(const std::string& gguf_name);
std::optional<std::string> qwen3_gguf_tensor_name(const std::string& hf_name);

}  // namespace infera::io
