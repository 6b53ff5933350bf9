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

}  // namespace infera::tok
