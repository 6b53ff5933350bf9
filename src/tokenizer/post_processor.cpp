#include "tokenizer/post_processor.h"

#include <map>
#include <string>

namespace infera::tok {
namespace {

constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;

int32_t parse_id(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxId)
    throw FormatError(where + ": invalid token id " + v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

uint32_t parse_type_id(const json& v, const std::string& where) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > 0xFFFFFFFFu)
    throw FormatError(where + ": 'type_id' must be a non-negative 32-bit integer");
  return static_cast<uint32_t>(v.get<uint64_t>());
}

void prepend(EncodingPart& p, int32_t id, int32_t type_id) {
  p.ids.insert(p.ids.begin(), id);
  p.type_ids.insert(p.type_ids.begin(), type_id);
}

void append(EncodingPart& p, int32_t id, int32_t type_id) {
  p.ids.push_back(id);
  p.type_ids.push_back(type_id);
}

void set_type_ids(EncodingPart& p, int32_t type_id) { p.type_ids.assign(p.ids.size(), type_id); }

// ("[SEP]", 102) as tokenizers serializes it: a two-element array.
int32_t pair_id(const json& j, const char* key, const std::string& where) {
  const json& v = require_field(j, key, where);
  if (!v.is_array() || v.size() != 2 || !v[0].is_string())
    throw FormatError(where + ": '" + key + "' must be [token, id]");
  return parse_id(v[1], where + " " + key);
}

// [CLS] A [SEP] (B [SEP]); type ids 0 for the first text and its tokens, 1 for the pair's.
class BertProcessor final : public PostProcessor {
 public:
  explicit BertProcessor(const json& j)
      : sep_(pair_id(j, "sep", "post_processor BertProcessing")),
        cls_(pair_id(j, "cls", "post_processor BertProcessing")) {}
  void process(std::vector<EncodingPart>& parts, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (i == 0) {
        prepend(parts[i], cls_, 0);
        append(parts[i], sep_, 0);
      } else {
        append(parts[i], sep_, 1);
      }
    }
  }

 private:
  int32_t sep_, cls_;
};

// <s> A </s> (</s> B </s>); every type id is 0, with or without special tokens.
class RobertaProcessor final : public PostProcessor {
 public:
  explicit RobertaProcessor(const json& j)
      : sep_(pair_id(j, "sep", "post_processor RobertaProcessing")),
        cls_(pair_id(j, "cls", "post_processor RobertaProcessing")) {}
  void process(std::vector<EncodingPart>& parts, bool add_special_tokens) const override {
    for (auto& p : parts) set_type_ids(p, 0);
    if (!add_special_tokens) return;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      prepend(parts[i], i == 0 ? cls_ : sep_, 0);
      append(parts[i], sep_, 0);
    }
  }

 private:
  int32_t sep_, cls_;
};

// Offsets only (trim_offsets); the ids stay as they are.
class ByteLevelProcessor final : public PostProcessor {
 public:
  void process(std::vector<EncodingPart>&, bool) const override {}
};

// Pieces like {"SpecialToken": {"id": "[CLS]", "type_id": 0}} and {"Sequence": {"id": "A",
// "type_id": 0}}; special tokens resolve to their id list. Sequences are placed (with the piece's
// type id) even without special tokens, as tokenizers does.
class TemplateProcessor final : public PostProcessor {
 public:
  explicit TemplateProcessor(const json& j) {
    const std::string where = "post_processor TemplateProcessing";
    const json& specials = require_field(j, "special_tokens", where);
    if (!specials.is_object()) throw FormatError(where + ": 'special_tokens' must be an object");
    std::map<std::string, std::vector<int32_t>> ids;
    for (auto it = specials.begin(); it != specials.end(); ++it) {
      const std::string at = where + " special token '" + it.key() + "'";
      const json& list = require_field(it.value(), "ids", at);
      if (!list.is_array()) throw FormatError(at + ": 'ids' must be an array");
      auto& v = ids[it.key()];
      for (const json& id : list) v.push_back(parse_id(id, at));
    }
    single_ = parse_template(require_field(j, "single", where), ids, where + " single", false);
    pair_ = parse_template(require_field(j, "pair", where), ids, where + " pair", true);
  }

  void process(std::vector<EncodingPart>& parts, bool add_special_tokens) const override {
    if (parts.size() != 1 && parts.size() != 2) {
      throw InvalidArgument("TemplateProcessing: expected 1 or 2 encodings, got " +
                            std::to_string(parts.size()));
    }
    const auto& tmpl = parts.size() == 2 ? pair_ : single_;
    std::vector<EncodingPart> out;
    for (const Piece& p : tmpl) {
      if (p.sequence >= 0) {
        EncodingPart part = parts[p.sequence];
        set_type_ids(part, p.type_id);
        out.push_back(std::move(part));
      } else if (add_special_tokens) {
        EncodingPart part;
        part.ids = p.special_ids;
        part.type_ids.assign(part.ids.size(), p.type_id);
        out.push_back(std::move(part));
      }
    }
    parts = std::move(out);
  }

 private:
  struct Piece {
    int sequence = -1;  // 0 = A, 1 = B, -1 = special token
    int32_t type_id = 0;
    std::vector<int32_t> special_ids;
  };

  static std::vector<Piece> parse_template(const json& t,
                                           const std::map<std::string, std::vector<int32_t>>& ids,
                                           const std::string& where, bool pair) {
    if (!t.is_array()) throw FormatError(where + ": must be an array of pieces");
    std::vector<Piece> pieces;
    for (const json& item : t) {
      if (!item.is_object() || item.size() != 1)
        throw FormatError(where +
                          ": each piece must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      Piece p;
      if (item.contains("Sequence")) {
        const json& s = item["Sequence"];
        const std::string id = require_string(s, "id", where);
        if (id != "A" && id != "B") throw FormatError(where + ": unknown sequence '" + id + "'");
        p.sequence = id == "A" ? 0 : 1;
        if (p.sequence == 1 && !pair)
          throw FormatError(where + ": a single-text template cannot use sequence B");
        p.type_id = static_cast<int32_t>(parse_type_id(require_field(s, "type_id", where), where));
      } else if (item.contains("SpecialToken")) {
        const json& s = item["SpecialToken"];
        const std::string id = require_string(s, "id", where);
        auto it = ids.find(id);
        if (it == ids.end())
          throw FormatError(where + ": special token '" + id + "' is not in 'special_tokens'");
        p.special_ids = it->second;
        p.type_id = static_cast<int32_t>(parse_type_id(require_field(s, "type_id", where), where));
      } else {
        throw FormatError(where +
                          ": each piece must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
      pieces.push_back(std::move(p));
    }
    return pieces;
  }

  std::vector<Piece> single_, pair_;
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> steps)
      : steps_(std::move(steps)) {}
  void process(std::vector<EncodingPart>& parts, bool add_special_tokens) const override {
    for (const auto& s : steps_) s->process(parts, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string type = component_type(j, "post_processor");
  if (type == "TemplateProcessing") return std::make_unique<TemplateProcessor>(j);
  if (type == "BertProcessing") return std::make_unique<BertProcessor>(j);
  if (type == "RobertaProcessing") return std::make_unique<RobertaProcessor>(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevelProcessor>();
  if (type == "Sequence") {
    const json& list = require_field(j, "processors", "post_processor Sequence");
    if (!list.is_array())
      throw FormatError("post_processor Sequence: 'processors' must be an array");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (const json& p : list) {
      auto step = make_post_processor(p);
      if (!step) throw FormatError("post_processor Sequence: entries must not be null");
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceProcessor>(std::move(steps));
  }
  throw FormatError("post_processor: unsupported type '" + type + "'");
}

}  // namespace infera::tok
