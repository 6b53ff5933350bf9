// The `model` of tokenizer.json: turns one pre-tokenized piece into ids (BPE, WordPiece).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace infera::tok {

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of one pre-tokenized piece (raw UTF-8). With `byte_level`, the piece is seen
  // through the GPT-2 byte alphabet (the ByteLevel pre-tokenizer's mapping). Thread-safe.
  virtual void encode_piece(std::string_view piece, bool byte_level,
                            std::vector<int32_t>& out) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  // nullptr when no token has this id (holes are allowed in a vocab).
  virtual const std::string* id_to_token(int32_t id) const = 0;
  virtual int32_t id_bound() const = 0;  // max id + 1
};

}  // namespace infera::tok
