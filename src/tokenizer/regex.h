// PCRE2 (UTF + UCP, JIT when available) wrapper for the pre-tokenizer patterns. tokenizer.json
// patterns are written for Oniguruma; PCRE2 accepts the same syntax for the constructs they use
// (\p{L}, \p{N}, (?i:...), lookahead), and UCP makes \s match Unicode White_Space as Onig does.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/json_util.h"

namespace infera::tok {

class Regex {
 public:
  // Throws FormatError naming `where` if the pattern does not compile.
  Regex(const std::string& pattern, std::string_view where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  using Span = std::pair<std::size_t, std::size_t>;  // [begin, end) byte offsets
  // Appends each non-overlapping match, left to right. `subject` must be valid UTF-8 (we skip
  // PCRE2's per-call check, which would make a scan of a long text quadratic).
  void find_all(std::string_view subject, std::vector<Span>& matches) const;

  bool jit() const { return jit_; }

 private:
  struct Code;
  std::unique_ptr<Code> code_;
  bool jit_ = false;
  std::string where_;
};

// A tokenizer.json pattern object, {"String": literal} or {"Regex": pattern}, as Split and Replace
// use it. Literals are searched as bytes (no regex needed); an empty literal matches nothing.
class Pattern {
 public:
  Pattern(const json& j, std::string_view where);  // `j` is the pattern object itself
  void find_all(std::string_view subject, std::vector<Regex::Span>& matches) const;
  bool empty_literal() const { return !regex_ && literal_.empty(); }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
};

// The pattern of a Replace normalizer or decoder (`j` is the component); an empty literal, which
// would match between every character, is refused.
Pattern replace_pattern(const json& j, std::string_view where);

}  // namespace infera::tok
