// tokenizer.json `model` of type BPE: vocab, ranked merges (string "a b" or pair ["a","b"] form),
// optional unk token / byte fallback / ignore_merges. Merging follows tokenizers' word.rs: a
// min-heap of candidate pairs ordered by (rank, position), so a piece of n symbols costs
// O(n log n) and never rebuilds strings. Results are cached per piece (see piece_cache.h).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/model.h"
#include "tokenizer/piece_cache.h"

namespace infera::tok {

class BpeModel final : public Model {
 public:
  // `j` is the "model" object. Throws FormatError for malformed vocab or merges (naming the entry).
  explicit BpeModel(const json& j);

  // Appends the ids of one pre-tokenized piece (raw UTF-8). With `byte_level`, the piece is seen
  // through the GPT-2 byte alphabet, i.e. each byte starts as the symbol of its mapped character.
  void encode_piece(std::string_view piece, bool byte_level,
                    std::vector<int32_t>& out) const override;

  std::optional<int32_t> token_to_id(std::string_view token) const override;
  // nullptr when no token has this id (holes are allowed in a vocab).
  const std::string* id_to_token(int32_t id) const override;
  int32_t id_bound() const override { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  // Open-addressing map (a, b) -> Merge; std::unordered_map's node chasing dominated profiles.
  class MergeMap {
   public:
    void reserve(std::size_t n);
    void insert_or_assign(int32_t a, int32_t b, Merge m);
    const Merge* find(int32_t a, int32_t b) const;

   private:
    struct Slot {
      uint64_t key;
      Merge merge;
    };
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    std::vector<Slot> slots_;
    std::size_t size_ = 0;
    std::size_t mask_ = 0;
  };
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void initial_symbols(std::string_view piece, bool byte_level, std::vector<int32_t>& ids) const;
  void merge(std::vector<int32_t>& ids) const;

  std::unordered_map<std::string, int32_t, Hash, std::equal_to<>> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  MergeMap merges_;
  std::array<int32_t, 256> byte_ids_{};  // vocab id of each byte's GPT-2 character, or -1
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  mutable std::unique_ptr<PieceCache> cache_;
};

}  // namespace infera::tok
