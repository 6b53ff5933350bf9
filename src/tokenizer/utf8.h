// UTF-8 helpers shared by the tokenizer stages. Validation follows Unicode Table 3-7 exactly, and
// the lossy conversion reproduces Rust's String::from_utf8_lossy (one U+FFFD per maximal invalid
// subpart), because Hugging Face `tokenizers` decodes byte-level tokens with it and we want parity.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace infera::tok {

// Result of examining one sequence at the start of `s`.
struct Utf8Seq {
  enum class Kind { kValid, kInvalid, kTruncated } kind;
  std::size_t length;   // kValid: bytes of the code point; otherwise: the maximal subpart (>= 1)
  char32_t code_point;  // only for kValid
};

Utf8Seq next_utf8(std::string_view s);

// Byte offset of the first byte that does not start a valid sequence, or nullopt if `s` is valid.
std::optional<std::size_t> first_invalid_utf8(std::string_view s);

// Appends `bytes` to `out`, replacing each maximal invalid subpart with U+FFFD (Rust semantics).
void append_utf8_lossy(std::string_view bytes, std::string& out);

// Streaming variant: appends every complete or definitely-invalid sequence of `bytes` to `out` and
// returns how many bytes were consumed; a trailing prefix that may still become valid is left.
std::size_t append_utf8_lossy_prefix(std::string_view bytes, std::string& out);

void append_utf8(char32_t cp, std::string& out);

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool is_unicode_whitespace(char32_t cp);
// Rust regex `\w`: letters, marks, decimal/letter numbers, connector punctuation, joiners.
bool is_word_char(char32_t cp);

// GPT-2 byte-level alphabet: every byte maps to one printable code point, and back.
struct ByteLevelAlphabet {
  std::array<char32_t, 256> byte_to_cp;
  std::array<std::string, 256> byte_to_utf8;
  std::array<int16_t, 324> cp_to_byte;  // -1 for code points outside the alphabet
  static const ByteLevelAlphabet& get();
};

}  // namespace infera::tok
