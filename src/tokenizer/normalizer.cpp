#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

bool require_bool(const json& j, const char* key, std::string_view where) {
  const json& v = require_field(j, key, where);
  if (!v.is_boolean())
    throw FormatError(std::string(where) + ": field '" + key + "' must be a boolean");
  return v.get<bool>();
}

enum class Form { kNFC, kNFD, kNFKC, kNFKD };

class UnicodeNormalizer final : public Normalizer {
 public:
  explicit UnicodeNormalizer(Form form) : form_(form) {}

  // Only the neighbourhood of characters that can change is passed to utf8proc. A boundary just
  // before an ASCII character is safe: ASCII has combining class 0 (it stops canonical
  // reordering) and is never the second half of a composition. Characters below the first one a
  // form can change are copied as is: U+0300 for NFC (lead byte 0xCC), U+00C0 for NFD (0xC3),
  // U+00A0 for the compatibility forms (0xC2).
  std::string normalize(std::string_view text) const override {
    const unsigned char threshold = form_ == Form::kNFC ? 0xCC : form_ == Form::kNFD ? 0xC3 : 0xC2;
    std::string out;
    out.reserve(text.size());
    std::size_t done = 0;
    while (done < text.size()) {
      std::size_t p = done;
      while (p < text.size() && static_cast<unsigned char>(text[p]) < threshold) ++p;
      if (p == text.size()) break;
      std::size_t s = p;
      while (s > done && static_cast<unsigned char>(text[s - 1]) >= 0x80) --s;
      if (s > done) --s;  // include the ASCII character: it may compose with what follows
      std::size_t e = p + 1;
      while (e < text.size() && static_cast<unsigned char>(text[e]) >= 0x80) ++e;
      out.append(text.substr(done, s - done));
      map_chunk(text.substr(s, e - s), out);
      done = e;
    }
    out.append(text.substr(done));
    return out;
  }

 private:
  void map_chunk(std::string_view chunk, std::string& out) const {
    int options = UTF8PROC_STABLE;
    switch (form_) {
      case Form::kNFC:
        options |= UTF8PROC_COMPOSE;
        break;
      case Form::kNFD:
        options |= UTF8PROC_DECOMPOSE;
        break;
      case Form::kNFKC:
        options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
        break;
      case Form::kNFKD:
        options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
        break;
    }
    utf8proc_uint8_t* mapped = nullptr;
    const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(chunk.data()),
                                static_cast<utf8proc_ssize_t>(chunk.size()), &mapped,
                                static_cast<utf8proc_option_t>(options));
    if (n < 0) {
      throw InvalidArgument(std::string("normalizer: utf8proc failed: ") + utf8proc_errmsg(n));
    }
    out.append(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(n));
    std::free(mapped);
  }

  Form form_;
};

// Rust's char::to_lowercase per character, as NormalizedString::lowercase does (so no final-sigma
// rule, and U+0130 becomes two characters).
std::string lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Seq seq = next_utf8(text.substr(i));
    append_lowercase(seq.code_point, out);
    i += seq.length;
  }
  return out;
}

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override { return lowercase(text); }
};

// Every match of the pattern becomes `content`.
class ReplaceNormalizer final : public Normalizer {
 public:
  explicit ReplaceNormalizer(const json& j)
      : pattern_(replace_pattern(j, "normalizer Replace")),
        content_(require_string(j, "content", "normalizer Replace")) {}
  std::string normalize(std::string_view text) const override {
    thread_local std::vector<Regex::Span> matches;
    matches.clear();
    pattern_.find_all(text, matches);
    std::string out;
    out.reserve(text.size() + matches.size() * content_.size());
    std::size_t pos = 0;
    for (const auto& [b, e] : matches) {
      out.append(text.substr(pos, b - pos));
      out.append(content_);
      pos = e;
    }
    out.append(text.substr(pos));
    return out;
  }

 private:
  Pattern pattern_;
  std::string content_;
};

// Adds `prepend` in front of any non-empty text.
class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(const json& j)
      : prepend_(require_string(j, "prepend", "normalizer Prepend")) {}
  std::string normalize(std::string_view text) const override {
    return text.empty() ? std::string() : prepend_ + std::string(text);
  }

 private:
  std::string prepend_;
};

// Removes leading and/or trailing White_Space.
class StripNormalizer final : public Normalizer {
 public:
  explicit StripNormalizer(const json& j)
      : left_(require_bool(j, "strip_left", "normalizer Strip")),
        right_(require_bool(j, "strip_right", "normalizer Strip")) {}
  std::string normalize(std::string_view text) const override {
    std::size_t b = 0, e = text.size();
    if (left_) {
      while (b < e) {
        const Utf8Seq seq = next_utf8(text.substr(b));
        if (!is_unicode_whitespace(seq.code_point)) break;
        b += seq.length;
      }
    }
    if (right_) {
      while (e > b) {
        std::size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        if (!is_unicode_whitespace(next_utf8(text.substr(k, e - k)).code_point)) break;
        e = k;
      }
    }
    return std::string(text.substr(b, e - b));
  }

 private:
  bool left_, right_;
};

// BERT's basic cleaning, in tokenizers' order: drop control characters (and NUL, U+FFFD), turn
// whitespace into ' ', put spaces around CJK ideographs, strip accents (NFD, then drop Mn),
// lowercase. strip_accents defaults to the lowercase setting.
class BertNormalizer final : public Normalizer {
 public:
  explicit BertNormalizer(const json& j) {
    const char* where = "normalizer BertNormalizer";
    clean_text_ = optional_bool(j, "clean_text", true, where);
    handle_chinese_chars_ = optional_bool(j, "handle_chinese_chars", true, where);
    lowercase_ = optional_bool(j, "lowercase", true, where);
    strip_accents_ = optional_bool(j, "strip_accents", lowercase_, where);
  }
  std::string normalize(std::string_view text) const override {
    std::string cur;
    cur.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
      const Utf8Seq seq = next_utf8(text.substr(i));
      const char32_t cp = seq.code_point;
      i += seq.length;
      if (clean_text_) {
        if (cp == 0 || cp == 0xFFFD || is_bert_control(cp)) continue;
        if (is_unicode_whitespace(cp)) {  // includes \t \n \r
          cur.push_back(' ');
          continue;
        }
      }
      const bool cjk = handle_chinese_chars_ && is_cjk_ideograph(cp);
      if (cjk) cur.push_back(' ');
      append_utf8(cp, cur);
      if (cjk) cur.push_back(' ');
    }
    if (strip_accents_) {
      const std::string decomposed = nfd_.normalize(cur);
      cur.clear();
      for (std::size_t i = 0; i < decomposed.size();) {
        const Utf8Seq seq = next_utf8(std::string_view(decomposed).substr(i));
        if (!is_nonspacing_mark(seq.code_point)) cur.append(decomposed, i, seq.length);
        i += seq.length;
      }
    }
    return lowercase_ ? lowercase(cur) : cur;
  }

 private:
  UnicodeNormalizer nfd_{Form::kNFD};
  bool clean_text_ = true, handle_chinese_chars_ = true, lowercase_ = true, strip_accents_ = true;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const override {
    std::string cur(text);
    for (const auto& s : steps_) cur = s->normalize(cur);
    return cur;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "normalizer");
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(Form::kNFC);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(Form::kNFD);
  if (type == "NFKC") return std::make_unique<UnicodeNormalizer>(Form::kNFKC);
  if (type == "NFKD") return std::make_unique<UnicodeNormalizer>(Form::kNFKD);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(j);
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(j);
  if (type == "Strip") return std::make_unique<StripNormalizer>(j);
  if (type == "BertNormalizer") return std::make_unique<BertNormalizer>(j);
  if (type == "Sequence") {
    const json& list = require_field(j, "normalizers", "normalizer Sequence");
    if (!list.is_array()) throw FormatError("normalizer Sequence: 'normalizers' must be an array");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (const json& item : list) {
      if (auto step = make_normalizer(item)) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  throw FormatError("normalizer: unsupported type '" + type + "'");
}

}  // namespace infera::tok
