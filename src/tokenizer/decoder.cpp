#include "tokenizer/decoder.h"

#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

// Base for stages that pass their output to a next stage.
class Stage : public DecodeStage {
 public:
  explicit Stage(DecodeStage* next) : next_(next) {}

 protected:
  void emit_token(std::string_view text) {
    next_->begin_token();
    next_->append(text);
    next_->end_token();
  }
  DecodeStage* next_;
};

// Base for decoders that map each token on its own, knowing its index in the stage's input: the
// token is collected and mapped when it ends.
class PerTokenStage : public Stage {
 public:
  using Stage::Stage;
  void begin_token() override { token_.clear(); }
  void append(std::string_view text) override { token_.append(text); }
  void end_token() override {
    emit_token(map(token_, index_ == 0));
    ++index_;
  }
  void finish() override { next_->finish(); }

 protected:
  virtual std::string map(const std::string& token, bool first) const = 0;

 private:
  std::string token_;
  std::size_t index_ = 0;
};

// The last stage: joins the tokens with `separator_` (tokenizers joins the decoders' output with
// "" and, without a decoder, the raw tokens with " ").
class JoinSink final : public DecodeStage {
 public:
  explicit JoinSink(std::string_view separator) : separator_(separator) {}
  void begin_token() override {
    if (count_++ > 0) text.append(separator_);
  }
  void append(std::string_view t) override { text.append(t); }
  void end_token() override {}
  void finish() override {}
  std::string text;

 private:
  std::string separator_;
  std::size_t count_ = 0;
};

// GPT-2 byte-level: map each character back to its byte. A token containing a character outside
// the alphabet (e.g. an added token with a plain space) contributes its UTF-8 bytes unchanged,
// exactly like tokenizers' ByteLevel::decode_chain, whose output is one string: the lossy UTF-8
// conversion (U+FFFD per maximal invalid subpart) of all the bytes. Complete characters are passed
// on as soon as they are known; an incomplete tail waits for more bytes or the end.
class ByteLevelStage final : public Stage {
 public:
  using Stage::Stage;
  void begin_token() override {
    if (!started_) next_->begin_token();
    started_ = true;
    token_.clear();
  }
  void append(std::string_view text) override { token_.append(text); }
  void end_token() override {
    append_bytes(token_);
    std::string out;
    bytes_.erase(0, append_utf8_lossy_prefix(bytes_, out));
    if (!out.empty()) next_->append(out);
  }
  void finish() override {
    if (!started_) next_->begin_token();  // no tokens: tokenizers still yields one empty string
    std::string out;
    append_utf8_lossy(bytes_, out);
    if (!out.empty()) next_->append(out);
    next_->end_token();
    next_->finish();
  }

 private:
  void append_bytes(std::string_view token) {
    const auto& alphabet = ByteLevelAlphabet::get();
    const std::size_t mark = bytes_.size();
    std::size_t i = 0;
    while (i < token.size()) {
      const Utf8Seq seq = next_utf8(token.substr(i));
      const int16_t b =
          seq.kind == Utf8Seq::Kind::kValid && seq.code_point < alphabet.cp_to_byte.size()
              ? alphabet.cp_to_byte[seq.code_point]
              : int16_t{-1};
      if (b < 0) {
        bytes_.resize(mark);
        bytes_.append(token);
        return;
      }
      bytes_.push_back(static_cast<char>(b));
      i += seq.length;
    }
  }
  bool started_ = false;
  std::string token_;
  std::string bytes_;  // not yet passed on: an incomplete UTF-8 sequence at most
};

// Tokens like <0x41> become bytes; a run of them becomes one string if it is valid UTF-8, else one
// U+FFFD per byte (tokenizers' ByteFallback, which uses String::from_utf8, not the lossy form).
class ByteFallbackStage final : public Stage {
 public:
  using Stage::Stage;
  void begin_token() override { token_.clear(); }
  void append(std::string_view text) override { token_.append(text); }
  void end_token() override {
    if (const int byte = byte_token_value(token_); byte >= 0) {
      run_.push_back(static_cast<char>(byte));
      return;
    }
    flush_run();
    emit_token(token_);
  }
  void finish() override {
    flush_run();
    next_->finish();
  }

 private:
  // Mirrors `token.len() == 6 && starts_with("<0x") && ends_with('>')` and then Rust's
  // u8::from_str_radix(&token[3..5], 16), which also accepts a leading '+'.
  static int byte_token_value(std::string_view t) {
    if (t.size() != 6 || t.substr(0, 3) != "<0x" || t[5] != '>') return -1;
    const auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    const int hi = hex(t[3]), lo = hex(t[4]);
    if (t[3] == '+') return lo;
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
  }
  void flush_run() {
    if (run_.empty()) return;
    if (!first_invalid_utf8(run_)) {
      emit_token(run_);
    } else {
      for (std::size_t k = 0; k < run_.size(); ++k) emit_token("\xEF\xBF\xBD");
    }
    run_.clear();
  }
  std::string token_, run_;
};

// All tokens become one.
class FuseStage final : public Stage {
 public:
  using Stage::Stage;
  void begin_token() override {
    if (!started_) next_->begin_token();
    started_ = true;
  }
  void append(std::string_view text) override { next_->append(text); }
  void end_token() override {}
  void finish() override {
    if (!started_) next_->begin_token();  // joining no tokens still gives one (empty) string
    next_->end_token();
    next_->finish();
  }

 private:
  bool started_ = false;
};

// Removes up to `start` leading and `stop` trailing `content` characters from each token. Leading
// ones are dropped as they arrive; a trailing run is held back until the token goes on or ends.
class StripStage final : public Stage {
 public:
  StripStage(DecodeStage* next, char32_t content, std::size_t start, std::size_t stop)
      : Stage(next), content_(content), start_(start), stop_(stop) {}
  void begin_token() override {
    next_->begin_token();
    leading_ = 0;
    in_leading_ = true;
    held_.clear();
    held_count_ = 0;
  }
  void append(std::string_view text) override {
    std::string out;
    std::size_t i = 0;
    while (i < text.size()) {
      const Utf8Seq seq = next_utf8(text.substr(i));
      const std::string_view ch = text.substr(i, seq.length);
      i += seq.length;
      const bool is_content = seq.kind == Utf8Seq::Kind::kValid && seq.code_point == content_;
      if (in_leading_ && leading_ < start_ && is_content) {
        ++leading_;
        continue;
      }
      in_leading_ = false;
      if (is_content && stop_ > 0) {
        held_.append(ch);
        if (++held_count_ > stop_) {  // only the last `stop` of a run can be stripped
          const std::size_t len = next_utf8(held_).length;
          out.append(held_, 0, len);
          held_.erase(0, len);
          --held_count_;
        }
        continue;
      }
      out.append(held_);
      held_.clear();
      held_count_ = 0;
      out.append(ch);
    }
    if (!out.empty()) next_->append(out);
  }
  void end_token() override { next_->end_token(); }
  void finish() override { next_->finish(); }

 private:
  char32_t content_;
  std::size_t start_, stop_;
  std::size_t leading_ = 0;
  bool in_leading_ = true;
  std::string held_;
  std::size_t held_count_ = 0;
};

// Metaspace: the replacement character becomes a space, and disappears from the first token unless
// the prepend scheme is "never" (tokenizers removes every one in that token, not only the first).
class MetaspaceStage final : public Stage {
 public:
  MetaspaceStage(DecodeStage* next, std::string replacement, bool strip_first)
      : Stage(next), replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void begin_token() override { next_->begin_token(); }
  void append(std::string_view text) override {
    std::string out;
    out.reserve(text.size());
    for (std::size_t pos = 0;;) {
      const std::size_t hit = text.find(replacement_, pos);
      out.append(text.substr(pos, hit - pos));
      if (hit == std::string_view::npos) break;
      if (!(first_ && strip_first_)) out.push_back(' ');
      pos = hit + replacement_.size();
    }
    next_->append(out);
  }
  void end_token() override {
    next_->end_token();
    first_ = false;
  }
  void finish() override { next_->finish(); }

 private:
  std::string replacement_;
  bool strip_first_;
  bool first_ = true;
};

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos);
  return out;
}

class WordPieceStage final : public PerTokenStage {
 public:
  WordPieceStage(DecodeStage* next, std::string prefix, bool cleanup)
      : PerTokenStage(next), prefix_(std::move(prefix)), cleanup_(cleanup) {}

 protected:
  std::string map(const std::string& token, bool first) const override {
    std::string t = token;
    if (!first) t = t.starts_with(prefix_) ? t.substr(prefix_.size()) : " " + t;
    if (!cleanup_) return t;
    // tokenizers' wordpiece::cleanup, in its order.
    static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
        {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
        {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
        {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules) t = replace_all(std::move(t), from, to);
    return t;
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class ReplaceStage final : public PerTokenStage {
 public:
  ReplaceStage(DecodeStage* next, const Pattern* pattern, std::string content)
      : PerTokenStage(next), pattern_(pattern), content_(std::move(content)) {}

 protected:
  std::string map(const std::string& token, bool) const override {
    thread_local std::vector<Regex::Span> matches;
    matches.clear();
    pattern_->find_all(token, matches);
    std::string out;
    std::size_t pos = 0;
    for (const auto& [b, e] : matches) {
      out.append(token, pos, b - pos);
      out.append(content_);
      pos = e;
    }
    out.append(token, pos);
    return out;
  }

 private:
  const Pattern* pattern_;
  std::string content_;
};

// ---- Decoder descriptions (immutable) ----

template <typename S, typename... Args>
DecodeStage* keep_stage(Stages& keep, Args&&... args) {
  keep.push_back(std::make_unique<S>(std::forward<Args>(args)...));
  return keep.back().get();
}

class ByteLevelDecoder final : public Decoder {
 public:
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<ByteLevelStage>(keep, next);
  }
};

class ByteFallbackDecoder final : public Decoder {
 public:
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<ByteFallbackStage>(keep, next);
  }
};

class FuseDecoder final : public Decoder {
 public:
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<FuseStage>(keep, next);
  }
};

// A JSON "char": a string of exactly one code point.
char32_t json_char(const json& j, const char* key, std::string_view where) {
  const std::string s = require_string(j, key, where);
  const Utf8Seq seq = s.empty() ? Utf8Seq{Utf8Seq::Kind::kInvalid, 0, 0} : next_utf8(s);
  if (seq.kind != Utf8Seq::Kind::kValid || seq.length != s.size()) {
    throw FormatError(std::string(where) + ": field '" + key + "' must be a single character");
  }
  return seq.code_point;
}

std::size_t json_count(const json& j, const char* key, std::string_view where) {
  const json& v = require_field(j, key, where);
  if (!v.is_number_unsigned()) {
    throw FormatError(std::string(where) + ": field '" + key + "' must be a non-negative integer");
  }
  return v.get<std::size_t>();
}

class StripDecoder final : public Decoder {
 public:
  explicit StripDecoder(const json& j)
      : content_(json_char(j, "content", "decoder Strip")),
        start_(json_count(j, "start", "decoder Strip")),
        stop_(json_count(j, "stop", "decoder Strip")) {}
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<StripStage>(keep, next, content_, start_, stop_);
  }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  explicit MetaspaceDecoder(const json& j) {
    replacement_.clear();
    append_utf8(json_char(j, "replacement", "decoder Metaspace"), replacement_);
    strip_first_ = metaspace_prepend_scheme(j, "decoder Metaspace") != "never";
  }
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<MetaspaceStage>(keep, next, replacement_, strip_first_);
  }

 private:
  std::string replacement_;
  bool strip_first_ = true;
};

class WordPieceDecoder final : public Decoder {
 public:
  explicit WordPieceDecoder(const json& j)
      : prefix_(require_string(j, "prefix", "decoder WordPiece")),
        cleanup_(optional_bool(j, "cleanup", true, "decoder WordPiece")) {}
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<WordPieceStage>(keep, next, prefix_, cleanup_);
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class ReplaceDecoder final : public Decoder {
 public:
  explicit ReplaceDecoder(const json& j)
      : pattern_(replace_pattern(j, "decoder Replace")),
        content_(require_string(j, "content", "decoder Replace")) {}
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    return keep_stage<ReplaceStage>(keep, next, &pattern_, content_);
  }

 private:
  Pattern pattern_;
  std::string content_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  DecodeStage* build(DecodeStage* next, Stages& keep) const override {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) next = (*it)->build(next, keep);
    return next;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "decoder");
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") return std::make_unique<StripDecoder>(j);
  if (type == "Metaspace") return std::make_unique<MetaspaceDecoder>(j);
  if (type == "WordPiece") return std::make_unique<WordPieceDecoder>(j);
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j);
  if (type == "Sequence") {
    const json& list = require_field(j, "decoders", "decoder Sequence");
    if (!list.is_array()) throw FormatError("decoder Sequence: 'decoders' must be an array");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (const json& item : list) {
      auto step = make_decoder(item);
      if (!step) throw FormatError("decoder Sequence: entries must not be null");
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  throw FormatError("decoder: unsupported type '" + type + "'");
}

DecodeRun::DecodeRun(const Decoder* decoder) {
  auto sink = std::make_unique<JoinSink>(decoder ? "" : " ");
  text_ = &sink->text;
  head_ = sink.get();
  stages_.push_back(std::move(sink));
  if (decoder) head_ = decoder->build(head_, stages_);
}

void DecodeRun::push_token(std::string_view token) {
  head_->begin_token();
  head_->append(token);
  head_->end_token();
}

void DecodeRun::finish() { head_->finish(); }

std::string DecodeRun::take() {
  std::string out = std::move(*text_);
  text_->clear();
  return out;
}

}  // namespace infera::tok
