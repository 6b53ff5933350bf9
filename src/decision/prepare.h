// Turning a request into token ids, in the spec's layout:
//   [CLS] qtype-text [SEP] question (+ criteria) [SEP] ([MASK] option-label) x K [SEP] state [SEP]
// Each piece is tokenized on its own and the ids concatenated (never a re-tokenized
// concatenation: sub-word boundaries would move). The state is serialized and sanitized once per
// request, tokenized once, and its ids are cut to the room each question leaves under max_length.
// Question prefixes (everything before the state) are kept in a bounded LRU cache keyed by
// everything they depend on: tokenizer identity, instruction format, max_length, qtype, text,
// criteria and labels.
#pragma once

#include <cstdint>
#include <filesystem>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "decision/decision_config.h"
#include "decision/request.h"
#include "infera/tokenizer.h"

namespace infera::decision {

// Version of the way questions and criteria are written into tokens; part of the cache key.
inline constexpr std::string_view kInstructionFormat = "decision-instructions/1";

// The state's text: a JSON string as is, any other value as canonical JSON (object keys sorted,
// no whitespace, UTF-8 kept).
std::string serialize_state(const nlohmann::json& state);
// `text` with every literal occurrence (ASCII case-insensitive) of a special-token text rewritten
// so that no tokenizer can read it as that token: "[MASK]" becomes "[ MASK ]".
std::string neutralise_special_text(std::string_view text,
                                    const std::vector<std::string>& literals);
// A short stable identity of a tokenizer file's bytes (FNV-1a 64, hex), for cache keys.
std::string tokenizer_identity_of_file(const std::filesystem::path& tokenizer_json);

struct PreparedQuestion {
  std::vector<int32_t> ids;
  int64_t state_tokens = 0;      // state ids kept
  bool state_truncated = false;  // state ids cut to the room under max_length
};

class Preparer {
 public:
  Preparer(const DecisionConfig& config, const Tokenizer& tokenizer, std::string identity,
           size_t cache_capacity);
  // All questions of `request` (already validated); InvalidArgument when a question's prefix
  // leaves no room under max_length. `cache_hits` counts prefix-cache hits of this call.
  std::vector<PreparedQuestion> prepare(const Request& request, int64_t& cache_hits);
  int64_t state_tokens_total() const { return last_state_tokens_; }
  size_t cache_size() const { return lru_.size(); }
  void clear_cache() {
    lru_.clear();
    index_.clear();
  }

 private:
  std::vector<int32_t> encode_piece(std::string_view text) const;
  const std::vector<int32_t>& prefix(const Question& q, size_t index, bool& hit);

  const DecisionConfig& config_;
  const Tokenizer& tokenizer_;
  std::string identity_;
  std::vector<std::string> literals_;  // special-token texts to neutralise
  size_t capacity_;
  std::list<std::pair<std::string, std::vector<int32_t>>> lru_;  // front: most recent
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
  int64_t last_state_tokens_ = 0;
};

}  // namespace infera::decision
