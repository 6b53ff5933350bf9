#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

// Last code point of `s` (valid UTF-8, non-empty).
char32_t last_code_point(std::string_view s) {
  std::size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return next_utf8(s.substr(i)).code_point;
}

// Start of the run of whitespace at the end of `s`.
std::size_t trailing_space_start(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t i = end - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    if (!is_unicode_whitespace(next_utf8(s.substr(i, end - i)).code_point)) break;
    end = i;
  }
  return end;
}

// Length of the run of whitespace at the start of `s`.
std::size_t leading_space_length(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const Utf8Seq seq = next_utf8(s.substr(i));
    if (!is_unicode_whitespace(seq.code_point)) break;
    i += seq.length;
  }
  return i;
}

}  // namespace

std::vector<AddedToken> parse_added_tokens(const json& j) {
  std::vector<AddedToken> tokens;
  if (j.is_null()) return tokens;
  if (!j.is_array()) throw FormatError("added_tokens: must be an array");
  for (std::size_t k = 0; k < j.size(); ++k) {
    const std::string where = "added_tokens[" + std::to_string(k) + "]";
    const json& e = j[k];
    AddedToken t;
    const json& id = require_field(e, "id", where);
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (1 << 24)) {
      throw FormatError(where + ": invalid id " + id.dump());
    }
    t.id = id.get<int32_t>();
    t.content = require_string(e, "content", where);
    if (t.content.empty()) throw FormatError(where + ": empty content");
    if (first_invalid_utf8(t.content)) throw FormatError(where + ": content is not valid UTF-8");
    t.single_word = optional_bool(e, "single_word", false, where);
    t.lstrip = optional_bool(e, "lstrip", false, where);
    t.rstrip = optional_bool(e, "rstrip", false, where);
    t.special = optional_bool(e, "special", false, where);
    t.normalized = optional_bool(e, "normalized", !t.special, where);
    tokens.push_back(std::move(t));
  }
  return tokens;
}

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized) {
  trie_.emplace_back();
  for (const AddedToken& t : tokens) {
    if (t.normalized != normalized) continue;
    int32_t node = 0;
    for (unsigned char c : t.content) {
      auto& kids = trie_[node].children;
      auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& p) { return p.first == c; });
      if (it != kids.end()) {
        node = it->second;
      } else {
        const int32_t child = static_cast<int32_t>(trie_.size());
        trie_[node].children.emplace_back(c, child);
        trie_.emplace_back();
        node = child;
      }
    }
    // The same content twice: the first entry wins, consistently.
    if (trie_[node].token < 0) {
      trie_[node].token = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(t);
    }
    first_byte_[static_cast<unsigned char>(t.content[0])] = true;
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, std::size_t pos,
                                      std::size_t& length) const {
  int32_t node = 0, best = -1;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto& kids = trie_[node].children;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    auto it = std::find_if(kids.begin(), kids.end(), [c](const auto& p) { return p.first == c; });
    if (it == kids.end()) break;
    node = it->second;
    if (trie_[node].token >= 0) {
      best = trie_[node].token;
      length = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  std::size_t start_offset = 0;  // end of the last emitted segment
  std::size_t pos = 0;           // where the next search starts (aho-corasick's find_iter)
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    std::size_t length = 0;
    const int32_t k = longest_at(text, pos, length);
    if (k < 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = tokens_[k];
    std::size_t start = pos, stop = pos + length;
    pos = stop;  // a rejected match still consumes its text, as in tokenizers
    if (start < start_offset) continue;  // inside whitespace an rstrip token already absorbed
    if (t.single_word) {
      const bool word_before = start > 0 && is_word_char(last_code_point(text.substr(0, start)));
      const bool word_after =
          stop < text.size() && is_word_char(next_utf8(text.substr(stop)).code_point);
      if (word_before || word_after) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (t.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, t.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace infera::tok
