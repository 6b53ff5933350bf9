// tokenizer.json loading: Tokenizer::from_json_text on the first part of the input (parts are
// split at "\n--text--\n"); when it loads, the later parts (and a few fixed strings) are encoded.
// Every id encode() returns must be one decode() accepts, and decode() and a StreamDecoder must
// agree on valid UTF-8 text, with and without special tokens.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "infera/error.h"
#include "infera/tokenizer.h"

using namespace infera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto parts =
      fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), "\n--text--\n");
  std::optional<Tokenizer> loaded;
  try {
    loaded = Tokenizer::from_json_text(parts[0], "fuzz.json");
  } catch (const FormatError&) {
    return 0;
  }
  const Tokenizer& tok = *loaded;
  std::vector<std::string_view> texts(parts.begin() + 1, parts.end());
  for (const char* fixed : {"Hello world", "  a  b\n\n\tc ", "h\xC3\xA9llo \xF0\x9F\x91\x8B 123"})
    texts.emplace_back(fixed);
  for (std::string_view text : texts) {
    std::vector<int32_t> ids;
    try {
      ids = tok.encode(text);
    } catch (const InvalidArgument&) {
      fuzz::check(!fuzz::valid_utf8(text), "encode() refused valid UTF-8");
      continue;
    }
    fuzz::check(fuzz::valid_utf8(text), "encode() accepted invalid UTF-8");
    for (int32_t id : ids) {
      fuzz::check(id >= 0 && id < tok.vocab_size(), "encode() returned an id outside the vocab");
      tok.id_to_token(id);  // throws (and so aborts) if the id has no token
    }
    fuzz::check_decoders_agree(tok, ids, false);
    fuzz::check_decoders_agree(tok, ids, true);
  }
  // The first ids, known or holes: id_to_token either accepts one or throws InvalidArgument, and
  // out-of-range ids are always refused.
  std::vector<int32_t> all;
  for (int32_t id = -1; id <= std::min(tok.vocab_size(), 300); ++id) {
    try {
      tok.id_to_token(id);
      fuzz::check(id >= 0 && id < tok.vocab_size(), "id_to_token accepted an out-of-range id");
      all.push_back(id);
    } catch (const InvalidArgument&) {
    }
  }
  fuzz::check_decoders_agree(tok, all, false);
  fuzz::check_decoders_agree(tok, all, true);
  return 0;
}
