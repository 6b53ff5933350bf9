// Tokenizer for Hugging Face tokenizer.json files, with exact parity to the `tokenizers` library:
// byte-level BPE (Qwen2/Qwen3, GPT-2, RoBERTa, ModernBERT/OLMo), BPE with byte fallback and the
// Metaspace / Replace pieces (Gemma, mmBERT, Llama), and WordPiece (BERT); post-processors
// (TemplateProcessing, BertProcessing, RobertaProcessing) add special tokens when asked.
//
// Invalid-UTF-8 policy (applied everywhere):
//  - encode() rejects text that is not valid UTF-8 with InvalidArgument naming the byte offset of
//    the first bad byte. Nothing is guessed or silently replaced on the way in.
//  - decode() and StreamDecoder may meet byte-level tokens whose bytes do not form valid UTF-8
//    (a generation stopped mid-character, or ids in an odd order). Each maximal invalid subpart
//    becomes U+FFFD, exactly as tokenizers' `decode` does (Rust from_utf8_lossy); the result is
//    always valid UTF-8.
//  - decode() and StreamDecoder skip ids that have no token (outside [0, vocab_size()), or a hole
//    in the vocab), as tokenizers' decode does: a model whose embedding has more rows than the
//    tokenizer has tokens (Qwen3 pads 151,669 tokens to 151,936 rows) may generate them, and a
//    stream must not abort. id_to_token() still throws InvalidArgument for them.
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

namespace tok {
class DecodeRun;
}

// The result of encoding a text or a pair of texts: ids and, for each, its type id (segment):
// 0 for the first text, 1 for the pair, or whatever the post-processor's template says.
struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
};

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
  // tokenizers' `encode(text, add_special_tokens=...)`: with add_special_tokens the file's
  // post-processor adds its tokens (e.g. [CLS] ... [SEP]); files without one (Qwen3) give the
  // same ids either way.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;
  // tokenizers' `encode(text, text_pair, add_special_tokens=...)`: each text is encoded on its
  // own, then the post-processor joins them (single or pair template) and assigns type ids.
  Encoding encode(std::string_view text, std::optional<std::string_view> text_pair,
                  bool add_special_tokens) const;
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
//
// Text is emitted as soon as the file's decoder has made it final: at once for byte-level and
// WordPiece tokenizers (an incomplete character waits for its remaining bytes); a run of <0xAB>
// byte-fallback tokens waits for the next ordinary token, because tokenizers decodes the run as a
// whole (it becomes U+FFFD per byte if it is not valid UTF-8). Movable, not copyable.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens = false);
  ~StreamDecoder();
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;
  std::string push(int32_t id);
  std::string flush();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::unique_ptr<tok::DecodeRun> run_;  // the decoder's state for the current stream
};

}  // namespace infera
