#include "tokenizer/utf8.h"

#include <utf8proc.h>

namespace infera::tok {

Utf8Seq next_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {Utf8Seq::Kind::kValid, 1, b0};
  // Expected length and the allowed range of the second byte (Unicode Table 3-7).
  std::size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {Utf8Seq::Kind::kInvalid, 1, 0};
  }
  char32_t cp = b0 & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (std::size_t i = 1; i < len; ++i) {
    if (i >= s.size()) return {Utf8Seq::Kind::kTruncated, i, 0};
    const unsigned char b = p[i];
    if (b < lo || b > hi) return {Utf8Seq::Kind::kInvalid, i, 0};
    lo = 0x80;
    hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  return {Utf8Seq::Kind::kValid, len, cp};
}

std::optional<std::size_t> first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path: most text is ASCII, eight bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const Utf8Seq seq = next_utf8(s.substr(i));
    if (seq.kind != Utf8Seq::Kind::kValid) return i;
    i += seq.length;
  }
  return std::nullopt;
}

std::size_t append_utf8_lossy_prefix(std::string_view bytes, std::string& out) {
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Utf8Seq seq = next_utf8(bytes.substr(i));
    if (seq.kind == Utf8Seq::Kind::kTruncated) return i;
    if (seq.kind == Utf8Seq::Kind::kValid) {
      out.append(bytes.data() + i, seq.length);
    } else {
      out.append("\xEF\xBF\xBD");
    }
    i += seq.length;
  }
  return i;
}

void append_utf8_lossy(std::string_view bytes, std::string& out) {
  const std::size_t used = append_utf8_lossy_prefix(bytes, out);
  // A truncated tail is a single maximal subpart, so it becomes one replacement character.
  if (used < bytes.size()) out.append("\xEF\xBF\xBD");
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

const ByteLevelAlphabet& ByteLevelAlphabet::get() {
  static const ByteLevelAlphabet alphabet = [] {
    ByteLevelAlphabet a{};
    a.cp_to_byte.fill(-1);
    // Printable Latin-1 bytes map to themselves; the rest are shifted to 256.. in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      a.byte_to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(a.byte_to_cp[b], a.byte_to_utf8[b]);
      a.cp_to_byte[a.byte_to_cp[b]] = static_cast<int16_t>(b);
    }
    return a;
  }();
  return alphabet;
}

}  // namespace infera::tok
