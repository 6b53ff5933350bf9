// tokenizer.json `model` of type WordPiece (BERT): greedy longest-match-first over each word, later
// pieces looked up with the continuing-subword prefix ("##"); a word that cannot be covered, or is
// longer than max_input_chars_per_word characters, becomes the unk token.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/model.h"

namespace infera::tok {

class WordPieceModel final : public Model {
 public:
  // `j` is the "model" object. Throws FormatError naming the bad entry.
  explicit WordPieceModel(const json& j);

  void encode_piece(std::string_view piece, bool byte_level,
                    std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  const std::string* id_to_token(int32_t id) const override;
  int32_t id_bound() const override { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  int32_t unk_id() const;

  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::string unk_token_;
  std::string prefix_;
  std::size_t max_input_chars_ = 100;
  std::size_t max_token_bytes_ = 0;  // no vocab entry is longer, so no longer match is tried
};

}  // namespace infera::tok
