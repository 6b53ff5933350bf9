// Loads tokenizer.json into the pipeline tokenizers runs: added tokens (raw) -> normalizer -> added
// tokens (normalized) -> pre-tokenizer -> model (BPE or WordPiece) -> post-processor, and the
// decoder for the way back.
#include "infera/tokenizer.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/json_limits.h"
#include "infera/error.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/wordpiece_model.h"

namespace infera {

using tok::json;

struct Tokenizer::Impl {
  std::unique_ptr<tok::Normalizer> normalizer;
  tok::PreTokenizer pre_tokenizer;
  std::unique_ptr<tok::Model> model;
  std::unique_ptr<tok::PostProcessor> post_processor;  // nullptr: parts are only concatenated
  std::unordered_map<std::string, int32_t> added_ids;
  tok::AddedTokenMatcher raw_matcher, normalized_matcher;
  std::unique_ptr<tok::Decoder> decoder;   // nullptr: tokens joined by a space
  std::vector<const std::string*> tokens;  // id -> content; added tokens override the vocab
  std::vector<bool> special;
  std::vector<tok::AddedToken> added;

  // Ids of one text, no post-processing (tokenizers' encode_single_sequence).
  std::vector<int32_t> encode_sequence(std::string_view text) const;
  void encode_normalized(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
  void encode_raw_segment(std::string_view text, bool at_start, std::vector<int32_t>& ids) const;
  // The token of `id`, or nullptr if it has none.
  const std::string* find_token(int32_t id) const {
    return id >= 0 && id < static_cast<int32_t>(tokens.size()) ? tokens[id] : nullptr;
  }
  const std::string& token(int32_t id) const;
};

namespace {

std::unique_ptr<tok::Model> make_model(const json& model) {
  if (!model.is_object()) throw FormatError("model: must be an object");
  // Old files omit the type; tokenizers then recognises BPE by its merges.
  const std::string type = model.contains("type")     ? tok::component_type(model, "model")
                           : model.contains("merges") ? "BPE"
                                                      : "";
  if (type == "BPE") return std::make_unique<tok::BpeModel>(model);
  if (type == "WordPiece") return std::make_unique<tok::WordPieceModel>(model);
  throw FormatError("model: unsupported type '" + type + "' (BPE and WordPiece are implemented)");
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
  impl->post_processor = tok::make_post_processor(field("post_processor"));
  impl->decoder = tok::make_decoder(field("decoder"));
  impl->model = make_model(tok::require_field(root, "model", "tokenizer.json"));

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
  std::unordered_set<std::string_view> special_contents;
  for (const auto& t : impl->added) {
    impl->tokens[t.id] = &t.content;
    impl->added_ids.emplace(t.content, t.id);
    if (t.special) special_contents.insert(t.content);
  }
  // tokenizers skips a token when its content is a special token's, whatever its id.
  if (!special_contents.empty()) {
    for (int32_t id = 0; id < bound; ++id) {
      impl->special[id] = impl->tokens[id] && special_contents.count(*impl->tokens[id]) > 0;
    }
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

void Tokenizer::Impl::encode_raw_segment(std::string_view text, bool at_start,
                                         std::vector<int32_t>& ids) const {
  thread_local std::vector<std::string_view> pieces;
  std::deque<std::string> storage;
  pre_tokenizer.split(text, pieces, storage, at_start);
  for (std::string_view piece : pieces) model->encode_piece(piece, pre_tokenizer.byte_level(), ids);
}

void Tokenizer::Impl::encode_normalized(std::string_view text, bool at_start,
                                        std::vector<int32_t>& ids) const {
  if (normalized_matcher.empty()) {
    encode_raw_segment(text, at_start, ids);
    return;
  }
  std::vector<tok::Segment> segments;
  normalized_matcher.split(text, segments);
  for (const auto& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_raw_segment(text.substr(s.begin, s.end - s.begin), at_start && s.begin == 0, ids);
    }
  }
}

std::vector<int32_t> Tokenizer::Impl::encode_sequence(std::string_view text) const {
  if (auto bad = tok::first_invalid_utf8(text)) {
    throw InvalidArgument("tokenizer: input text is not valid UTF-8 (byte offset " +
                          std::to_string(*bad) + ")");
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<tok::Segment> segments;
  if (raw_matcher.empty()) {
    segments.push_back({0, text.size(), -1});
  } else {
    raw_matcher.split(text, segments);
  }
  for (const auto& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
      continue;
    }
    const std::string_view plain = text.substr(s.begin, s.end - s.begin);
    // Metaspace's "first" scheme asks whether a piece starts the text; a normalizer that deletes
    // leading characters (tokenizers then reports a later original offset) is not modelled.
    const bool at_start = s.begin == 0;
    if (normalizer) {
      encode_normalized(normalizer->normalize(plain), at_start, ids);
    } else {
      encode_normalized(plain, at_start, ids);
    }
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  return impl_->encode_sequence(text);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return encode(text, std::nullopt, add_special_tokens).ids;
}

Encoding Tokenizer::encode(std::string_view text, std::optional<std::string_view> text_pair,
                           bool add_special_tokens) const {
  std::vector<tok::EncodingPart> parts;
  parts.push_back({impl_->encode_sequence(text), {}});
  if (text_pair) parts.push_back({impl_->encode_sequence(*text_pair), {}});
  for (std::size_t i = 0; i < parts.size(); ++i) {
    parts[i].type_ids.assign(parts[i].ids.size(), static_cast<int32_t>(i));
  }
  if (impl_->post_processor) impl_->post_processor->process(parts, add_special_tokens);
  Encoding out;
  for (auto& p : parts) {
    out.ids.insert(out.ids.end(), p.ids.begin(), p.ids.end());
    out.type_ids.insert(out.type_ids.end(), p.type_ids.begin(), p.type_ids.end());
  }
  return out;
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
  tok::DecodeRun run(impl_->decoder.get());
  for (int32_t id : ids) {
    const std::string* t = impl_->find_token(id);
    if (!t || (skip_special_tokens && impl_->special[id])) continue;
    run.push_token(*t);
  }
  run.finish();
  return run.take();
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
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      run_(std::make_unique<tok::DecodeRun>(tokenizer_.impl_->decoder.get())) {}

StreamDecoder::~StreamDecoder() = default;
StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;

std::string StreamDecoder::push(int32_t id) {
  const auto& impl = *tokenizer_.impl_;
  const std::string* t = impl.find_token(id);
  if (!t || (skip_special_tokens_ && impl.special[id])) return {};
  run_->push_token(*t);
  return run_->take();
}

std::string StreamDecoder::flush() {
  run_->finish();
  std::string out = run_->take();
  run_ = std::make_unique<tok::DecodeRun>(tokenizer_.impl_->decoder.get());
  return out;
}

}  // namespace infera
