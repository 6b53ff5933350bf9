// Tokenizer for Hugging Face tokenizer.json files of the byte-level BPE family (Qwen2/Qwen3, GPT-2
// style, ModernBERT/OLMo style), with exact parity to the `tokenizers` library.
//
// Invalid-UTF-8 policy (applied everywhere):
//  - encode() rejects text that is not valid UTF-8 with InvalidArgument naming the byte offset of
//    the first bad byte. Nothing is guessed or silently replaced on the way in.
//  - decode() and StreamDecoder may meet byte-level tokens whose bytes do not form valid UTF-8
//    (a generation stopped mid-character, or ids in an odd order). Each maximal invalid subpart
//    becomes U+FFFD, exactly as tokenizers' `decode` does (Rust from_utf8_lossy); the result is
//    always valid UTF-8.
//  - Token ids outside [0, vocab_size()) or without a token throw InvalidArgument naming the id.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace infera {

class Tokenizer {
 public:
  // Accepts a tokenizer.json file or a model folder containing one. Throws IoError if it cannot be
  // read and FormatError (naming the file and the component) if it is malformed or uses a
  // component type this implementation does not support.
  static Tokenizer load(const std::filesystem::path& tokenizer_json_or_model_dir);
  // Same, from the JSON text itself; `source` names it in error messages.
  static Tokenizer from_json_text(std::string_view json_text,
                                  std::string_view source = "tokenizer.json");

  // Token ids for `text`; added/special tokens written in the text are recognised. No BOS/EOS or
  // post-processor tokens are added. Thread-safe.
  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  int32_t vocab_size() const;  // max id + 1, added tokens included
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // the raw vocab string (byte-level alphabet)
  bool is_special(int32_t id) const;          // added token flagged special; false for other ids

  struct Impl;

 private:
  friend class StreamDecoder;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // immutable after load, so copies share it freely
};

// Incremental decoding for generation: push() returns the text that became final with this token
// and never a partial UTF-8 sequence (incomplete bytes are held back). flush() returns what is left
// (an incomplete tail becomes U+FFFD) and resets the decoder for a new stream. The concatenation of
// all pieces equals Tokenizer::decode of all ids. One StreamDecoder per stream; not thread-safe.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  std::string push(int32_t id);
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  bool first_ = true;
  std::string pending_;  // bytes not yet emitted (an incomplete UTF-8 sequence, at most 3 bytes)
};

}  // namespace infera
