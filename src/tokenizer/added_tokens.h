// tokenizer.json `added_tokens`: tokens matched in the text before the model sees it. Like
// tokenizers' AddedVocabulary, tokens with normalized=false are found in the raw text and tokens
// with normalized=true in the normalized text; matching is leftmost-longest, non-overlapping, and
// honours single_word (no word character on either side), lstrip and rstrip (absorb whitespace).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"

namespace infera::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// Parses the "added_tokens" array (null or absent means none). Throws FormatError naming the entry.
std::vector<AddedToken> parse_added_tokens(const json& j);

// A text segment: either an added token (`id` >= 0) or plain text to tokenize further (`id` < 0).
struct Segment {
  std::size_t begin, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // Keeps the tokens whose `normalized` flag equals `normalized`.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized);

  bool empty() const { return tokens_.empty(); }
  // Appends the segments covering `text` (valid UTF-8) in order; plain segments are non-empty.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node index
    int32_t token = -1;                                       // index into tokens_
  };
  // Longest token starting at `pos`, as an index into tokens_, or -1.
  int32_t longest_at(std::string_view text, std::size_t pos, std::size_t& length) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace infera::tok
