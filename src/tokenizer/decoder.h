// tokenizer.json `decoder`. Decoding is split in two so that streaming and batch decoding share one
// code path: append_token() turns each token into bytes (in order), finish() turns the collected
// bytes into text. A streaming decoder can then emit every complete UTF-8 prefix as it grows.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/json_util.h"

namespace infera::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // `first` is true for the first token of the output (some decoders treat it specially).
  virtual void append_token(std::string_view token, bool first, std::string& bytes) const = 0;
  // Appends the text for `bytes` (which may be invalid UTF-8) to `out`.
  virtual void finish(std::string_view bytes, std::string& out) const = 0;
};

// Null JSON yields the tokenizers default (tokens joined by a space). Unknown types throw
// FormatError naming the type.
std::unique_ptr<Decoder> make_decoder(const json& j);

}  // namespace infera::tok
