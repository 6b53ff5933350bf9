#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "tokenizer/regex.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

using Span = Regex::Span;

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior parse_behavior(const std::string& s) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  throw FormatError("pre_tokenizer Split: unsupported behavior '" + s + "'");
}

struct Part {
  Span span;
  bool is_match;
};

// Mirrors tokenizers' NormalizedString::split: turn matches into a cover of the text, then group
// the parts according to the behavior. Empty parts are dropped afterwards, as PreTokenizedString
// does.
void apply_behavior(std::string_view piece, const std::vector<Span>& matches, bool invert,
                    Behavior behavior, std::vector<std::string_view>& out) {
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  std::size_t prev = 0;
  for (const Span& m : matches) {
    if (prev != m.first) parts.push_back({{prev, m.first}, invert});
    parts.push_back({m, !invert});
    prev = m.second;
  }
  if (prev != piece.size()) parts.push_back({{prev, piece.size()}, invert});

  std::vector<Span> grouped;
  grouped.reserve(parts.size());
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      for (const Part& p : parts) grouped.push_back(p.span);
      break;
    case Behavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) grouped.push_back(p.span);
      }
      break;
    case Behavior::kContiguous:
      for (const Part& p : parts) {
        if (p.is_match == previous_match && !grouped.empty()) {
          grouped.back().second = p.span.second;
        } else {
          grouped.push_back(p.span);
        }
        previous_match = p.is_match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !grouped.empty()) {
          grouped.back().second = p.span.second;
        } else {
          grouped.push_back(p.span);
        }
        previous_match = p.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !grouped.empty()) {
          grouped.back().first = it->span.first;
        } else {
          grouped.push_back(it->span);
        }
        previous_match = it->is_match;
      }
      std::reverse(grouped.begin(), grouped.end());
      break;
  }
  for (const Span& s : grouped) {
    if (s.second > s.first) out.push_back(piece.substr(s.first, s.second - s.first));
  }
}

class SplitStep final : public PreTokenizerStep {
 public:
  explicit SplitStep(const json& j)
      : pattern_(require_field(j, "pattern", "pre_tokenizer Split"), "pre_tokenizer Split") {
    behavior_ = parse_behavior(require_string(j, "behavior", "pre_tokenizer Split"));
    invert_ = optional_bool(j, "invert", false, "pre_tokenizer Split");
  }

  void split(std::string_view piece, std::vector<std::string_view>& out,
             SplitContext&) const override {
    thread_local std::vector<Span> matches;
    matches.clear();
    pattern_.find_all(piece, matches);
    apply_behavior(piece, matches, invert_, behavior_, out);
  }

 private:
  Pattern pattern_;
  Behavior behavior_ = Behavior::kIsolated;
  bool invert_ = false;
};

// The GPT-2 split that ByteLevel applies when use_regex is true (tokenizers' byte_level.rs).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelStep final : public PreTokenizerStep {
 public:
  explicit ByteLevelStep(const json& j) {
    add_prefix_space_ = optional_bool(j, "add_prefix_space", true, "pre_tokenizer ByteLevel");
    if (optional_bool(j, "use_regex", true, "pre_tokenizer ByteLevel")) {
      regex_ = std::make_unique<Regex>(kGpt2Pattern, "pre_tokenizer ByteLevel");
    }
  }

  void split(std::string_view piece, std::vector<std::string_view>& out,
             SplitContext& ctx) const override {
    if (add_prefix_space_ && (piece.empty() || piece.front() != ' ')) {
      std::string& prefixed = ctx.storage.emplace_back();
      prefixed.reserve(piece.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(piece);
      piece = prefixed;
    }
    if (!regex_) {
      if (!piece.empty()) out.push_back(piece);
      return;
    }
    thread_local std::vector<Span> matches;
    matches.clear();
    regex_->find_all(piece, matches);
    apply_behavior(piece, matches, false, Behavior::kIsolated, out);
  }

 private:
  bool add_prefix_space_ = true;
  std::unique_ptr<Regex> regex_;
};

// Spaces become the replacement character (default U+2581), which is prepended as the scheme says,
// and with `split` every piece starts at one (MergedWithNext), as tokenizers' Metaspace does.
class MetaspaceStep final : public PreTokenizerStep {
 public:
  explicit MetaspaceStep(const json& j) {
    const char* where = "pre_tokenizer Metaspace";
    const std::string r = require_string(j, "replacement", where);
    if (r.empty() || next_utf8(r).length != r.size())
      throw FormatError(std::string(where) + ": field 'replacement' must be a single character");
    replacement_ = r;
    const std::string scheme = metaspace_prepend_scheme(j, where);
    always_ = scheme == "always";
    first_ = scheme == "first";
    split_ = optional_bool(j, "split", true, where);
  }

  void split(std::string_view piece, std::vector<std::string_view>& out,
             SplitContext& ctx) const override {
    std::string& s = ctx.storage.emplace_back();
    s.reserve(piece.size() + 8);
    const bool starts_with_replacement = piece.starts_with(' ') || piece.starts_with(replacement_);
    if (!starts_with_replacement && (always_ || (first_ && piece.data() == ctx.sequence_start))) {
      s.append(replacement_);
    }
    for (char c : piece) {
      if (c == ' ') {
        s.append(replacement_);
      } else {
        s.push_back(c);
      }
    }
    if (!split_) {
      out.push_back(s);
      return;
    }
    thread_local std::vector<Span> matches;
    matches.clear();
    for (std::size_t pos = s.find(replacement_); pos != std::string::npos;
         pos = s.find(replacement_, pos + replacement_.size())) {
      matches.emplace_back(pos, pos + replacement_.size());
    }
    apply_behavior(s, matches, false, Behavior::kMergedWithNext, out);
  }

 private:
  std::string replacement_;
  bool always_ = true, first_ = false, split_ = true;
};

// Splits `piece` where `kind` changes: runs of kind 0 are dropped, other kinds are kept, and
// `isolate` kinds give one piece per character. Used by the BERT and whitespace pre-tokenizers,
// whose classes are Rust char predicates rather than regexes.
template <typename Classify>
void split_by_class(std::string_view piece, std::vector<std::string_view>& out, Classify kind,
                    int isolate) {
  std::size_t start = 0;
  int run = -1;
  for (std::size_t i = 0; i < piece.size();) {
    const Utf8Seq seq = next_utf8(piece.substr(i));
    const int k = kind(seq.code_point);
    if (k != run || k == isolate) {
      if (run > 0 && i > start) out.push_back(piece.substr(start, i - start));
      start = i;
      run = k;
    }
    i += seq.length;
  }
  if (run > 0 && piece.size() > start) out.push_back(piece.substr(start));
}

// Whitespace removed, then every punctuation character on its own.
class BertStep final : public PreTokenizerStep {
 public:
  void split(std::string_view piece, std::vector<std::string_view>& out,
             SplitContext&) const override {
    split_by_class(
        piece, out,
        [](char32_t cp) { return is_unicode_whitespace(cp) ? 0
                                 : is_bert_punctuation(cp) ? 2
                                                           : 1; },
        2);
  }
};

// Whitespace: runs of word characters (Rust regex \w) and runs of other non-space characters.
// WhitespaceSplit: whatever is between whitespace.
class WhitespaceStep final : public PreTokenizerStep {
 public:
  explicit WhitespaceStep(bool split_words) : split_words_(split_words) {}
  void split(std::string_view piece, std::vector<std::string_view>& out,
             SplitContext&) const override {
    if (split_words_) {
      split_by_class(
          piece, out,
          [](char32_t cp) { return is_word_char(cp)            ? 1
                                   : is_unicode_whitespace(cp) ? 0
                                                               : 2; }, -1);
    } else {
      split_by_class(
          piece, out, [](char32_t cp) { return is_unicode_whitespace(cp) ? 0 : 1; }, -1);
    }
  }

 private:
  bool split_words_;
};

}  // namespace

std::string metaspace_prepend_scheme(const json& j, std::string_view where) {
  std::string scheme = "always";
  if (auto it = j.find("prepend_scheme"); it != j.end()) {
    if (!it->is_string())
      throw FormatError(std::string(where) + ": 'prepend_scheme' must be a string");
    scheme = it->get<std::string>();
    if (scheme != "always" && scheme != "first" && scheme != "never")
      throw FormatError(std::string(where) + ": unsupported prepend_scheme '" + scheme + "'");
  }
  if (!optional_bool(j, "add_prefix_space", true, where)) {
    if (scheme != "never") {
      throw FormatError(std::string(where) +
                        ": add_prefix_space does not match declared prepend_scheme");
    }
  }
  return scheme;
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

PreTokenizer PreTokenizer::from_json(const json& j) {
  PreTokenizer p;
  if (!j.is_null()) p.add(j);
  return p;
}

void PreTokenizer::add(const json& j) {
  const std::string type = component_type(j, "pre_tokenizer");
  if (byte_level_) {
    // Steps after ByteLevel would see the mapped alphabet; we keep raw bytes, so refuse loudly.
    throw FormatError("pre_tokenizer: '" + type + "' after ByteLevel is not supported");
  }
  if (type == "Sequence") {
    const json& list = require_field(j, "pretokenizers", "pre_tokenizer Sequence");
    if (!list.is_array())
      throw FormatError("pre_tokenizer Sequence: 'pretokenizers' must be an array");
    for (const json& item : list) add(item);
  } else if (type == "Split") {
    steps_.push_back(std::make_unique<SplitStep>(j));
  } else if (type == "Metaspace") {
    steps_.push_back(std::make_unique<MetaspaceStep>(j));
  } else if (type == "BertPreTokenizer") {
    steps_.push_back(std::make_unique<BertStep>());
  } else if (type == "Whitespace") {
    steps_.push_back(std::make_unique<WhitespaceStep>(true));
  } else if (type == "WhitespaceSplit") {
    steps_.push_back(std::make_unique<WhitespaceStep>(false));
  } else if (type == "ByteLevel") {
    steps_.push_back(std::make_unique<ByteLevelStep>(j));
    byte_level_ = true;
  } else {
    throw FormatError("pre_tokenizer: unsupported type '" + type + "'");
  }
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& storage, bool at_start) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back(text);
  SplitContext ctx{storage, at_start ? text.data() : nullptr};
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) step->split(piece, next, ctx);
    pieces.swap(next);
  }
}

}  // namespace infera::tok
