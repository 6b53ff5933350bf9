// The JSON-lines requests of `infera tokenize` and `infera detokenize`, one per stdin line. Kept
// apart from the commands so that the fuzz target (tests/fuzz) runs the same parsing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infera::cli {

// Lines of spaces, tabs and carriage returns carry no request and are skipped.
bool is_blank_line(std::string_view line);

struct TextRequest {
  std::string text;
  std::optional<std::string> text_pair;  // a second sequence (BERT-style pairs)
};

// {"text": "..."} or {"text": "...", "text_pair": "..."} (not yet checked for UTF-8: the
// tokenizer does that). Throws InvalidArgument starting "stdin line N: " for bad JSON (nesting
// capped) or a wrong shape.
TextRequest parse_text_request(std::string_view line, std::size_t line_no);

// {"ids": [1, 2, 3]} -> the ids; each must be an integer that fits int32 (the tokenizer then
// checks it against its vocabulary). Same errors as parse_text_request.
std::vector<int32_t> parse_ids_request(std::string_view line, std::size_t line_no);

}  // namespace infera::cli
