// tokenizer.json `decoder`: ByteLevel, WordPiece, Metaspace, Replace, ByteFallback, Fuse, Strip and
// Sequence of those.
//
// tokenizers decodes a list of tokens by passing the whole list through each decoder in turn
// (decode_chain) and joining the result. We run the same chain as a stream of events instead:
// every stage receives tokens (begin, text, end) and passes its output tokens to the next stage, so
// that one code path serves decode() and StreamDecoder: a streamed decode emits, after each token,
// exactly the text that the chain has made final, and the pieces add up to decode() by
// construction. Stages that fuse tokens (ByteLevel, Fuse) continue one output token for the rest of
// the stream; a stage that needs the whole of such a token (Replace, Strip with stop > 0, ...)
// holds it back until the stream ends, which is what the batch semantics require.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"

namespace infera::tok {

// One stage of a running decode (mutable, owned by one decode or one stream).
class DecodeStage {
 public:
  virtual ~DecodeStage() = default;
  virtual void begin_token() = 0;
  virtual void append(std::string_view text) = 0;  // valid UTF-8, whole characters
  virtual void end_token() = 0;
  virtual void finish() = 0;  // end of the stream; the stage is not used afterwards
};

using Stages = std::vector<std::unique_ptr<DecodeStage>>;

// Immutable description from tokenizer.json, shared by every decode.
class Decoder {
 public:
  virtual ~Decoder() = default;
  // Builds this decoder's stage(s) in front of `next`, stores them in `keep`, returns the first.
  virtual DecodeStage* build(DecodeStage* next, Stages& keep) const = 0;
};

// Null JSON yields nullptr: tokenizers then joins the tokens with a space. Unknown types throw
// FormatError naming the type.
std::unique_ptr<Decoder> make_decoder(const json& j);

// A running decode: feed whole tokens, take the text that has become final. Movable.
class DecodeRun {
 public:
  explicit DecodeRun(const Decoder* decoder);  // nullptr: tokens joined by a space
  void push_token(std::string_view token);
  void finish();       // end of the stream; call once
  std::string take();  // text made final since the last take()

 private:
  Stages stages_;
  DecodeStage* head_ = nullptr;
  std::string* text_ = nullptr;  // owned by the last stage
};

}  // namespace infera::tok
