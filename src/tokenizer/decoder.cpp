#include "tokenizer/decoder.h"

#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

// GPT-2 byte-level: map each character back to its byte. A token containing a character outside
// the alphabet (e.g. an added token with a plain space) contributes its UTF-8 bytes unchanged,
// exactly like tokenizers' ByteLevel::decode_chain. Invalid UTF-8 becomes U+FFFD (from_utf8_lossy).
class ByteLevelDecoder final : public Decoder {
 public:
  void append_token(std::string_view token, bool, std::string& bytes) const override {
    const auto& alphabet = ByteLevelAlphabet::get();
    const std::size_t mark = bytes.size();
    std::size_t i = 0;
    while (i < token.size()) {
      const Utf8Seq seq = next_utf8(token.substr(i));
      const int16_t b =
          seq.kind == Utf8Seq::Kind::kValid && seq.code_point < alphabet.cp_to_byte.size()
              ? alphabet.cp_to_byte[seq.code_point]
              : int16_t{-1};
      if (b < 0) {
        bytes.resize(mark);
        bytes.append(token);
        return;
      }
      bytes.push_back(static_cast<char>(b));
      i += seq.length;
    }
  }
  void finish(std::string_view bytes, std::string& out) const override {
    append_utf8_lossy(bytes, out);
  }
};

// No decoder in the file: tokenizers joins the tokens with a single space.
class JoinDecoder final : public Decoder {
 public:
  void append_token(std::string_view token, bool first, std::string& bytes) const override {
    if (!first) bytes.push_back(' ');
    bytes.append(token);
  }
  void finish(std::string_view bytes, std::string& out) const override {
    append_utf8_lossy(bytes, out);
  }
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return std::make_unique<JoinDecoder>();
  const std::string type = component_type(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  throw FormatError("decoder: unsupported type '" + type + "'");
}

}  // namespace infera::tok
