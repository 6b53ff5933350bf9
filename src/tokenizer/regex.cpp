#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "infera/error.h"
#include "tokenizer/utf8.h"

namespace infera::tok {

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

namespace {

std::string pcre2_message(int rc) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(rc, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Match data is per thread so that a shared Tokenizer can encode from many threads at once.
struct MatchData {
  pcre2_match_data* data = pcre2_match_data_create(8, nullptr);
  ~MatchData() { pcre2_match_data_free(data); }
};

// Oniguruma's \s is Unicode White_Space; PCRE2's UCP \s also matches U+180E (through \h).
// tokenizers compiles these patterns with Oniguruma, so spell \s out as White_Space. \S inside
// a class cannot be rewritten without class subtraction and is left as is (no known file uses it).
constexpr const char* kWhiteSpace =
    R"(\t\n\x0B\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string oniguruma_compatible(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char d = p[++i];
      if (d == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (d == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += d;
      }
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ] is a literal
    } else if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      const std::size_t end = p.find(":]", i + 2);  // POSIX class such as [:alpha:]
      if (end != std::string::npos) {
        out.append(p, i + 1, end + 2 - (i + 1));
        i = end + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

}  // namespace

Regex::Regex(const std::string& pattern, std::string_view where)
    : code_(std::make_unique<Code>()), where_(where) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  const std::string compiled = oniguruma_compatible(pattern);
  code_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                              PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (!code_->code) {
    throw FormatError(std::string(where) + ": regex /" + pattern +
                      "/ does not compile: " + pcre2_message(err));
  }
  // JIT is an optimization only: without it pcre2_match gives the same results.
  jit_ = pcre2_jit_compile(code_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() = default;

void Regex::find_all(std::string_view subject, std::vector<Span>& matches) const {
  thread_local MatchData md;
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  std::size_t pos = 0;
  while (pos <= subject.size()) {
    const int rc = jit_ ? pcre2_jit_match(code_->code, s, subject.size(), pos, 0, md.data, nullptr)
                        : pcre2_match(code_->code, s, subject.size(), pos, PCRE2_NO_UTF_CHECK,
                                      md.data, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      throw InvalidArgument(std::string(where_) + ": regex match failed: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.data);
    const std::size_t begin = ov[0], end = ov[1];
    matches.emplace_back(begin, end);
    if (end > begin) {
      pos = end;
    } else {
      // Empty match: step over one character, as Oniguruma's find_iter does.
      if (end >= subject.size()) return;
      pos = end + next_utf8(subject.substr(end)).length;
    }
  }
}

Pattern::Pattern(const json& j, std::string_view where) {
  if (j.is_object() && j.contains("Regex") && j["Regex"].is_string()) {
    regex_ = std::make_unique<Regex>(j["Regex"].get<std::string>(), where);
  } else if (j.is_object() && j.contains("String") && j["String"].is_string()) {
    literal_ = j["String"].get<std::string>();
  } else {
    throw FormatError(std::string(where) +
                      ": 'pattern' must be {\"Regex\": ...} or {\"String\": ...}");
  }
}

void Pattern::find_all(std::string_view subject, std::vector<Regex::Span>& matches) const {
  if (regex_) {
    regex_->find_all(subject, matches);
    return;
  }
  if (literal_.empty()) return;
  for (std::size_t pos = subject.find(literal_); pos != std::string_view::npos;
       pos = subject.find(literal_, pos + literal_.size())) {
    matches.emplace_back(pos, pos + literal_.size());
  }
}

Pattern replace_pattern(const json& j, std::string_view where) {
  Pattern p(require_field(j, "pattern", where), where);
  if (p.empty_literal()) throw FormatError(std::string(where) + ": empty pattern");
  return p;
}

}  // namespace infera::tok
