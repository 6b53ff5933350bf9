// tokenizer.json `pre_tokenizer`: Split (regex or literal, all five delimiter behaviors, invert),
// ByteLevel (optional GPT-2 regex split and prefix space), Metaspace, BertPreTokenizer,
// Whitespace, WhitespaceSplit and Sequence. Pieces stay in raw UTF-8;
// ByteLevel only records that the model must see bytes through the GPT-2 alphabet, which the BPE
// model does per byte without building the mapped string (it is the same mapping, done later).
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"

namespace infera::tok {

struct SplitContext {
  // New text (e.g. a prefix space) goes here; elements keep their address as the deque grows.
  std::deque<std::string>& storage;
  // Where the text being encoded starts, if this segment starts it (tokenizers' "original offset
  // 0", which Metaspace's prepend_scheme "first" asks about); nullptr otherwise.
  const char* sequence_start;
};

class PreTokenizerStep {
 public:
  virtual ~PreTokenizerStep() = default;
  // Appends the non-empty sub-pieces of `piece`.
  virtual void split(std::string_view piece, std::vector<std::string_view>& out,
                     SplitContext& ctx) const = 0;
};

// Metaspace's prepend scheme ("always", "first" or "never") from its JSON, with the legacy
// add_prefix_space checked as tokenizers does. Shared by the pre-tokenizer and the decoder.
std::string metaspace_prepend_scheme(const json& j, std::string_view where);

class PreTokenizer {
 public:
  // Null JSON is the identity. Unknown types throw FormatError naming the type.
  static PreTokenizer from_json(const json& j);

  PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits `text` (valid UTF-8) into the pieces the model encodes one by one. `at_start`: the
  // text begins the sequence being encoded (it is not preceded by an added token).
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& storage, bool at_start = true) const;

  bool byte_level() const { return byte_level_; }

 private:
  void add(const json& j);
  std::vector<std::unique_ptr<PreTokenizerStep>> steps_;
  bool byte_level_ = false;
};

}  // namespace infera::tok
