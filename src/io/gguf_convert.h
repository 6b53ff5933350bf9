// Hugging Face Qwen3 folder -> GGUF file (what `infera quantize` runs), with llama.cpp's tensor
// names, metadata keys and tokenizer keys, so llama.cpp loads the result as one of its own.
//
// Which type each tensor gets (llama.cpp's llama_tensor_get_type, without an importance matrix):
//  - vectors (norm weights): F32, always;
//  - F32 / F16 / BF16 / Q8_0: every matrix in that type;
//  - Q4_0: matrices Q4_0, except the output matrix (output.weight, or token_embd.weight when the
//    embeddings are tied) which is Q6_K, as llama.cpp does for every 4-bit type;
//  - Q4_K_M: matrices Q4_K, except the output matrix (Q6_K) and, of attn_v and ffn_down, the
//    layers where llama.cpp's use_more_bits(i, n) holds (Q6_K): i < n/8, i >= 7n/8, or
//    (i - n/8) % 3 == 2, i.e. about half of them, weighted to the first and last layers;
//  - a matrix whose rows are not whole blocks of its type falls back: Q4_K and Q6_K to Q8_0
//    (llama.cpp uses Q5_0 for Q4_K, a type we do not run), anything else to F16.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "infera/tensor.h"
#include "io/weight_store.h"

namespace infera::io {

enum class GgufFileType { F32, F16, BF16, Q8_0, Q4_0, Q4_K_M };

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m" (InvalidArgument naming the accepted ones).
GgufFileType parse_gguf_file_type(const std::string& name);
const char* gguf_file_type_name(GgufFileType type);

// The type a Qwen3 tensor gets (rules above). `layer` / `layers` locate attn_v and ffn_down;
// `tied` says the embeddings double as the output matrix.
DType gguf_tensor_type(GgufFileType type, const std::string& gguf_name, const Shape& shape,
                       int64_t layer, int64_t layers, bool tied);

struct ConvertedTensor {
  std::string gguf_name;
  DType dtype;
  Shape shape;
};

struct ConvertOptions {
  // Folder with tokenizer.json (+ optional tokenizer_config.json); empty: the model folder.
  std::filesystem::path tokenizer_dir;
  int threads = 0;  // rows quantized in parallel (0: one per core)
  std::function<void(const ConvertedTensor&)> progress;  // optional, after each tensor
  // Weights to write instead of the folder's safetensors (dummy weights of the config's shapes,
  // for speed comparisons on a real shape); not owned.
  const WeightStore* weights = nullptr;
};

// Converts `hf_dir` (config.json, safetensors, optional generation_config.json) to `out`.
// Returns what was written, in file order.
std::vector<ConvertedTensor> convert_qwen3_to_gguf(const std::filesystem::path& hf_dir,
                                                   GgufFileType type,
                                                   const std::filesystem::path& out,
                                                   const ConvertOptions& options = {});

}  // namespace infera::io
