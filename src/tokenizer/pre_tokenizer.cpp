#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "tokenizer/regex.h"

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
  explicit SplitStep(const json& j) {
    const json& pattern = require_field(j, "pattern", "pre_tokenizer Split");
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      regex_ = std::make_unique<Regex>(pattern["Regex"].get<std::string>(), "pre_tokenizer Split");
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      literal_ = pattern["String"].get<std::string>();
    } else {
      throw FormatError(
          "pre_tokenizer Split: 'pattern' must be {\"Regex\": ...} or {\"String\": ...}");
    }
    behavior_ = parse_behavior(require_string(j, "behavior", "pre_tokenizer Split"));
    invert_ = optional_bool(j, "invert", false, "pre_tokenizer Split");
  }

  void split(std::string_view piece, std::vector<std::string_view>& out,
             std::deque<std::string>&) const override {
    thread_local std::vector<Span> matches;
    matches.clear();
    if (regex_) {
      regex_->find_all(piece, matches);
    } else if (!literal_.empty()) {
      for (std::size_t pos = piece.find(literal_); pos != std::string_view::npos;
           pos = piece.find(literal_, pos + literal_.size())) {
        matches.emplace_back(pos, pos + literal_.size());
      }
    }
    apply_behavior(piece, matches, invert_, behavior_, out);
  }

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
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
             std::deque<std::string>& storage) const override {
    if (add_prefix_space_ && (piece.empty() || piece.front() != ' ')) {
      std::string& prefixed = storage.emplace_back();
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

}  // namespace

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
  } else if (type == "ByteLevel") {
    steps_.push_back(std::make_unique<ByteLevelStep>(j));
    byte_level_ = true;
  } else {
    throw FormatError("pre_tokenizer: unsupported type '" + type + "'");
  }
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces,
                         std::deque<std::string>& storage) const {
  pieces.clear();
  if (text.empty()) return;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& step : steps_) {
    next.clear();
    for (std::string_view piece : pieces) step->split(piece, next, storage);
    pieces.swap(next);
  }
}

}  // namespace infera::tok
