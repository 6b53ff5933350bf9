// Shared pieces of the libFuzzer targets. Each target feeds one parser or decoder of untrusted
// input and checks two things: it returns or throws an infera::Error (any other exception
// escapes, aborts, and is reported as a crash), and the properties stated in the target hold
// (a violated one calls fail(), which aborts too). ASan, UBSan and LeakSanitizer catch the rest.
#pragma once

#include <utf8proc.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "infera/tokenizer.h"

namespace infera::fuzz {

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz property violated: %s\n", what.c_str());
  std::abort();
}

inline void check(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// Valid UTF-8 by utf8proc, an implementation independent of ours.
inline bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t i = 0;
  const auto n = static_cast<utf8proc_ssize_t>(s.size());
  while (i < n) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &cp);
    if (len <= 0 || cp < 0) return false;
    i += len;
  }
  return true;
}

// NFC of valid UTF-8 by utf8proc over the whole string (the tokenizer's normalizer only passes
// the neighbourhood of characters that can change, so this checks that shortcut too).
inline std::string nfc(std::string_view s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                              static_cast<utf8proc_ssize_t>(s.size()), &out,
                              static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("utf8proc_map failed on text the caller checked to be valid UTF-8");
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

inline std::filesystem::path shared_dir() {
  if (const char* env = std::getenv("INFERA_SHARED_DIR"); env && *env) return env;
  return std::filesystem::path(INFERA_SOURCE_DIR) / ".." / "shared";
}

// The released Qwen3 tokenizer (151,669 tokens, NFC, byte-level BPE, special tokens), loaded once.
inline const Tokenizer& qwen3_tokenizer() {
  static const Tokenizer tok = [] {
    const auto path = shared_dir() / "models" / "qwen3-0.6b" / "tokenizer.json";
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "fuzz: %s not found (set INFERA_SHARED_DIR)\n", path.c_str());
      std::exit(2);
    }
    return Tokenizer::load(path);
  }();
  return tok;
}

// Splits `data` at every occurrence of `sep` (the dictionaries list the separators, so mutations
// can add and remove parts).
inline std::vector<std::string_view> split(std::string_view data, std::string_view sep) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t at = data.find(sep);
    if (at == std::string_view::npos) break;
    parts.push_back(data.substr(0, at));
    data.remove_prefix(at + sep.size());
  }
  parts.push_back(data);
  return parts;
}

// decode() and a StreamDecoder fed the same ids must agree, and both must give valid UTF-8.
inline void check_decoders_agree(const Tokenizer& tok, const std::vector<int32_t>& ids,
                                 bool skip_special) {
  const std::string whole = tok.decode(ids, skip_special);
  check(valid_utf8(whole), "decode() returned invalid UTF-8");
  StreamDecoder stream(tok, skip_special);
  std::string pieces;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    check(valid_utf8(piece), "StreamDecoder::push returned invalid UTF-8");
    pieces += piece;
  }
  pieces += stream.flush();
  check(pieces == whole, "stream decode differs from decode()");
}

}  // namespace infera::fuzz
