// Bounded, thread-safe cache of BPE results keyed by the raw pre-tokenized piece. Real text repeats
// a small set of words, so most pieces skip the merge loop entirely. Sharded so that concurrent
// encoders rarely contend; a full shard is cleared (cheap, and it adapts to a new text domain).
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace infera::tok {

class PieceCache {
 public:
  explicit PieceCache(std::size_t capacity) : shard_capacity_(capacity / kShards + 1) {}

  // Appends the cached ids for `piece` to `out` and returns true, or returns false.
  bool lookup(std::string_view piece, std::size_t hash, std::vector<int32_t>& out) const {
    const Shard& s = shards_[hash % kShards];
    std::shared_lock lock(s.mu);
    auto it = s.map.find(piece);
    if (it == s.map.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
  }

  void insert(std::string_view piece, std::size_t hash, const int32_t* ids, std::size_t n) {
    Shard& s = shards_[hash % kShards];
    std::unique_lock lock(s.mu);
    if (s.map.size() >= shard_capacity_) s.map.clear();
    s.map.try_emplace(std::string(piece), ids, ids + n);
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::shared_mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  static constexpr std::size_t kShards = 16;
  std::size_t shard_capacity_;
  std::array<Shard, kShards> shards_;
};

}  // namespace infera::tok
