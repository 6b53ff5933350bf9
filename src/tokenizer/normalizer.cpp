#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

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

class LowercaseNormalizer final : public Normalizer {
 public:
  std::string normalize(std::string_view text) const override {
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
      const Utf8Seq seq = next_utf8(text.substr(i));
      append_utf8(
          static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(seq.code_point))),
          out);
      i += seq.length;
    }
    return out;
  }
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
