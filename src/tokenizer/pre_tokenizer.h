// tokenizer.json `pre_tokenizer`: Split (regex or literal, all five delimiter behaviors, invert),
// ByteLevel (optional GPT-2 regex split and prefix space) and Sequence. Pieces stay in raw UTF-8;
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

class PreTokenizerStep {
 public:
  virtual ~PreTokenizerStep() = default;
  // Appends the non-empty sub-pieces of `piece`. New text (e.g. a prefix space) goes in `storage`,
  // whose elements keep their address while the deque grows at the back.
  virtual void split(std::string_view piece, std::vector<std::string_view>& out,
                     std::deque<std::string>& storage) const = 0;
};

class PreTokenizer {
 public:
  // Null JSON is the identity. Unknown types throw FormatError naming the type.
  static PreTokenizer from_json(const json& j);

  PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Splits `text` (valid UTF-8) into the pieces the model encodes one by one.
  void split(std::string_view text, std::vector<std::string_view>& pieces,
             std::deque<std::string>& storage) const;

  bool byte_level() const { return byte_level_; }

 private:
  void add(const json& j);
  std::vector<std::unique_ptr<PreTokenizerStep>> steps_;
  bool byte_level_ = false;
};

}  // namespace infera::tok
