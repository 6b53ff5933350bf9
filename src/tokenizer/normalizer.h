// tokenizer.json `normalizer`: Unicode normalization forms, lowercasing, and Sequence of those.
// Applied to the text between added tokens that are matched on raw text (as Hugging Face does).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/json_util.h"

namespace infera::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8 (checked by the caller).
  virtual std::string normalize(std::string_view text) const = 0;
};

// Null JSON yields nullptr (no normalization). Unknown types throw FormatError naming the type.
std::unique_ptr<Normalizer> make_normalizer(const json& j);

}  // namespace infera::tok
