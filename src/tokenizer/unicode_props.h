// Unicode character properties exactly as Hugging Face `tokenizers` sees them, for the BERT
// normalizer and pre-tokenizer and for lowercasing. tokenizers takes general categories from the
// `unicode_categories` crate (an older Unicode version) and lowercasing from Rust's std (a newer
// one); we take them from utf8proc (Unicode 15) and correct the code points where the versions
// disagree. The test UnicodeProps.MatchTokenizersOnEveryCodePoint compares all of them with
// tables recorded from tokenizers (tests/data/make_tokenizer_parity.py), so a new utf8proc that
// moves a character shows up as a failing test, not as a silent difference.
#pragma once

#include <string>

namespace infera::tok {

// BertNormalizer clean_text drops these: general category Cc, Cf or Co, except \t \n \r.
bool is_bert_control(char32_t cp);
// BertPreTokenizer isolates these: ASCII punctuation, or general category P*.
bool is_bert_punctuation(char32_t cp);
// General category Mn (BertNormalizer strip_accents drops them after NFD).
bool is_nonspacing_mark(char32_t cp);
// The CJK ideograph blocks BertNormalizer surrounds with spaces (handle_chinese_chars).
bool is_cjk_ideograph(char32_t cp);
// Rust's char::to_lowercase: the full mapping (U+0130 becomes two characters).
void append_lowercase(char32_t cp, std::string& out);

}  // namespace infera::tok
