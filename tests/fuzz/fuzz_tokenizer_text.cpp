// Text through the released Qwen3 tokenizer (NFC normalizer, byte-level BPE, special tokens).
// The first byte picks what the rest is:
//  - even: text. Invalid UTF-8 must be refused with InvalidArgument. Valid text must round-trip:
//    decode(encode(t)) == t whenever t is already NFC (utf8proc decides that independently), since
//    NFC is the only change this tokenizer makes; and stream decoding must equal decode().
//  - odd: token ids (3 bytes each, little-endian, modulo vocab_size + 16 so that out-of-range ids
//    occur): decode() and a StreamDecoder must agree and give valid UTF-8 (ids that split
//    characters become U+FFFD), or both refuse an unknown id with InvalidArgument.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "infera/error.h"

using namespace infera;

namespace {

void text_case(const Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(text);
  } catch (const InvalidArgument&) {
    fuzz::check(!fuzz::valid_utf8(text), "encode() refused valid UTF-8");
    return;
  }
  fuzz::check(fuzz::valid_utf8(text), "encode() accepted invalid UTF-8");
  const std::string back = tok.decode(ids);
  if (fuzz::nfc(text) == text) fuzz::check(back == text, "decode(encode(t)) != t for NFC text");
  fuzz::check_decoders_agree(tok, ids, false);
  fuzz::check_decoders_agree(tok, ids, true);
}

void ids_case(const Tokenizer& tok, std::string_view bytes) {
  std::vector<int32_t> ids;
  const uint32_t range = static_cast<uint32_t>(tok.vocab_size()) + 16;
  for (size_t i = 0; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = static_cast<uint8_t>(bytes[i]) | static_cast<uint8_t>(bytes[i + 1]) << 8 |
                       static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 2])) << 16;
    ids.push_back(static_cast<int32_t>(v % range));
  }
  bool known = true;
  for (int32_t id : ids) {
    try {
      tok.id_to_token(id);
    } catch (const InvalidArgument&) {
      known = false;
    }
  }
  if (known) {
    fuzz::check_decoders_agree(tok, ids, false);
    fuzz::check_decoders_agree(tok, ids, true);
  } else {
    try {
      tok.decode(ids);
      fuzz::fail("decode() accepted an id id_to_token() refused");
    } catch (const InvalidArgument&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::qwen3_tokenizer();  // load once, outside the timed runs
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    text_case(fuzz::qwen3_tokenizer(), rest);
  } else {
    ids_case(fuzz::qwen3_tokenizer(), rest);
  }
  return 0;
}
