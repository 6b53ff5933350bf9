// Loads tokenizer.json into the pipeline tokenizers runs: added tokens (raw) -> normalizer -> added
// tokens (normalized) -> pre-tokenizer -> BPE, and decoder for the way back.
#include "infera/tokenizer.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "core/json_limits.h"
#include "infera/error.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace infera {

using tok::json;

struct Tokenizer::Impl {
  std::unique_ptr<tok::Normalizer> normalizer;
  tok::PreTokenizer pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  std::unordered_map<std::string, int32_t> added_ids;
  tok::AddedTokenMatcher raw_matcher, normalized_matcher;
  std::unique_ptr<tok::Decoder> decoder;
  std::vector<const std::string*> tokens;  // id -> content; added tokens override the vocab
  std::vector<bool> special;
  std::vector<tok::AddedToken> added;

  void encode_normalized(std::string_view text, std::vector<int32_t>& ids) const;
  void encode_raw_segment(std::string_view text, std::vector<int32_t>& ids) const;
  const std::string& token(int32_t id) const;
};

namespace {

void check_post_processor(const json& j) {
  if (j.is_null()) return;
  const std::string type = tok::component_type(j, "post_processor");
  // encode() never adds special tokens, so these only need to be recognised, not applied.
  static const char* const kKnown[] = {"ByteLevel", "TemplateProcessing", "RobertaProcessing",
                                       "BertProcessing"};
  for (const char* k : kKnown) {
    if (type == k) return;
  }
  if (type == "Sequence") {
    const json& list = tok::require_field(j, "processors", "post_processor Sequence");
    if (!list.is_array())
      throw FormatError("post_processor Sequence: 'processors' must be an array");
    for (const json& p : list) check_post_processor(p);
    return;
  }
  throw FormatError("post_processor: unsupported type '" + type + "'");
}

std::shared_ptr<Tokenizer::Impl> build(const json& root) {
  if (!root.is_object()) throw FormatError("top level must be a JSON object");
  auto impl = std::make_shared<Tokenizer::Impl>();
  auto field = [&](const char* key) -> const json& {
    static const json kNull;
    auto it = root.find(key);
    return it == root.end() ? kNull : *it;
  };
  impl->normalizer = tok::make_normalizer(field("normalizer"));
  impl->pre_tokenizer = tok::PreTokenizer::from_json(field("pre_tokenizer"));
  check_post_processor(field("post_processor"));
  impl->decoder = tok::make_decoder(field("decoder"));

  const json& model = tok::require_field(root, "model", "tokenizer.json");
  if (!model.is_object()) throw FormatError("model: must be an object");
  // Old files omit the type; tokenizers then recognises BPE by its merges.
  const std::string type = model.contains("type")     ? tok::component_type(model, "model")
                           : model.contains("merges") ? "BPE"
                                                      : "";
  if (type != "BPE")
    throw FormatError("model: unsupported type '" + type + "' (only BPE is implemented)");
  impl->model = std::make_unique<tok::BpeModel>(model);

  impl->added = tok::parse_added_tokens(field("added_tokens"));
  impl->raw_matcher = tok::AddedTokenMatcher(impl->added, /*normalized=*/false);
  impl->normalized_matcher = tok::AddedTokenMatcher(impl->added, /*normalized=*/true);

  int32_t bound = impl->model->id_bound();
  for (const auto& t : impl->added) bound = std::max(bound, t.id + 1);
  // The model checked its own ids; its bound is within a constant factor of its vocab.
  tok::check_id_density(bound - 1,
                        static_cast<std::size_t>(impl->model->id_bound()) + impl->added.size(),
                        "added_tokens");
  impl->tokens.assign(bound, nullptr);
  impl->special.assign(bound, false);
  for (int32_t id = 0; id < impl->model->id_bound(); ++id)
    impl->tokens[id] = impl->model->id_to_token(id);
  for (const auto& t : impl->added) {
    impl->tokens[t.id] = &t.content;
    impl->special[t.id] = t.special;
    impl->added_ids.emplace(t.content, t.id);
  }
  return impl;
}

}  // namespace

Tokenizer Tokenizer::from_json_text(std::string_view json_text, std::string_view source) {
  const std::string where(source);
  // Depth capped while parsing: component lists (Sequence normalizers, pre-tokenizers, decoders,
  // post-processors) are read recursively.
  const json root = parse_json_capped<json>(json_text, where);
  try {
    return Tokenizer(build(root));
  } catch (const FormatError& e) {
    throw FormatError(where + ": " + e.what());
  } catch (const json::exception& e) {
    throw FormatError(where + ": unexpected structure: " + e.what());
  }
}

Tokenizer Tokenizer::load(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) file /= "tokenizer.json";
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError("cannot open tokenizer file " + file.string());
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw IoError("cannot read tokenizer file " + file.string());
  return from_json_text(buf.str(), file.string());
}

void Tokenizer::Impl::encode_raw_segment(std::string_view text, std::vector<int32_t>& ids) const {
  thread_local std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pre_tokenizer.split(text, pieces, storage);
  for (std::string_view piece : pieces) model->encode_piece(piece, pre_tokenizer.byte_level(), ids);
}

void Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<int32_t>& ids) const {
  if (normalized_matcher.empty()) {
    encode_raw_segment(text, ids);
    return;
  }
  std::vector<tok::Segment> segments;
  normalized_matcher.split(text, segments);
  for (const auto& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_raw_segment(text.substr(s.begin, s.end - s.begin), ids);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (auto bad = tok::first_invalid_utf8(text)) {
    throw InvalidArgument("tokenizer: input text is not valid UTF-8 (byte offset " +
                          std::to_string(*bad) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::Segment> segments;
  if (impl_->raw_matcher.empty()) {
    segments.push_back({0, text.size(), -1});
  } else {
    impl_->raw_matcher.split(text, segments);
  }
  for (const auto& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string_view plain = text.substr(s.begin, s.end - s.begin);
    if (impl_->normalizer) {
      impl_->encode_normalized(impl_->normalizer->normalize(plain), ids);
    } else {
      impl_->encode_normalized(plain, ids);
    }
  }
  return ids;
}

const std::string& Tokenizer::Impl::token(int32_t id) const {
  if (id < 0 || id >= static_cast<int32_t>(tokens.size())) {
    throw InvalidArgument("token id " + std::to_string(id) + " is out of range [0, " +
                          std::to_string(tokens.size()) + ")");
  }
  if (!tokens[id])
    throw InvalidArgument("token id " + std::to_string(id) + " has no token in the vocab");
  return *tokens[id];
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    const std::string& t = impl_->token(id);  // validates every id, skipped or not
    if (skip_special_tokens && impl_->special[id]) continue;
    impl_->decoder->append_token(t, first, bytes);
    first = false;
  }
  std::string text;
  impl_->decoder->finish(bytes, text);
  return text;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->tokens.size()); }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_ids.find(std::string(token)); it != impl_->added_ids.end()) {
    return it->second;
  }
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const { return impl_->token(id); }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->special[id];
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string StreamDecoder::push(int32_t id) {
  const auto& impl = *tokenizer_.impl_;
  const std::string& t = impl.token(id);
  if (skip_special_tokens_ && impl.special[id]) return {};
  impl.decoder->append_token(t, first_, pending_);
  first_ = false;
  // Every decoder's finish() is a lossy UTF-8 conversion of the collected bytes, so emitting the
  // settled prefix now and the rest later concatenates to exactly what decode() returns.
  std::string out;
  const std::size_t used = tok::append_utf8_lossy_prefix(pending_, out);
  pending_.erase(0, used);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  tokenizer_.impl_->decoder->finish(pending_, out);
  pending_.clear();
  first_ = true;
  return out;
}

}  // namespace infera
