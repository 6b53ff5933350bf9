// The tokenizer as GGUF carries it (llama.cpp's `tokenizer.ggml.*` keys) <-> Hugging Face
// tokenizer.json, for byte-level BPE models with the Qwen2 pre-tokenizer (Qwen2, Qwen2.5, Qwen3).
//   tokenizer.ggml.model = "gpt2", .pre = "qwen2", .tokens[id], .token_type[id] (1 normal,
//   3 control, 4 user-defined, 5 unused padding), .merges ("a b"), .bos/eos/padding_token_id.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"

namespace infera::io {

// tokenizer.json text equivalent to the file's tokenizer metadata, for Tokenizer::from_json_text:
// normal tokens form the BPE vocab, control and user-defined tokens become added tokens (control
// ones special), unused padding entries are left out. FormatError naming the key when a key is
// missing or malformed, or the model / pre-tokenizer is not one we implement.
std::string tokenizer_json_from_gguf(const GgufFile& file, const std::string& origin);

// Token ids generation stops at: eos and eot ids, plus the control tokens llama.cpp also treats as
// end of generation (<|endoftext|>, <|im_end|>, <|eot_id|>, <|end|>) when present.
std::vector<int32_t> gguf_stop_token_ids(const GgufFile& file, const std::string& origin);

struct TokenizerMetadataSource {
  const nlohmann::json* tokenizer = nullptr;         // tokenizer.json (required)
  const nlohmann::json* tokenizer_config = nullptr;  // tokenizer_config.json (optional)
  int64_t vocab_size = 0;                            // embedding rows: tokens are padded to it
  std::optional<int64_t> bos_token_id;  // config.json's, when tokenizer_config has none
};

// Adds the tokenizer.ggml.* keys (and tokenizer.chat_template) the way llama.cpp's
// convert_hf_to_gguf.py writes them for a Qwen2-style tokenizer: ids padded with "[PAD<id>]"
// unused tokens up to vocab_size; added tokens that are special, or look special (<|...|>), are
// control tokens, the others user-defined.
void add_tokenizer_metadata(GgufWriter& writer, const TokenizerMetadataSource& source,
                            const std::string& origin);

}  // namespace infera::io
