#include "decision/prepare.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "infera/error.h"

namespace infera::decision {
namespace {

bool iequal_at(std::string_view text, size_t at, std::string_view lit) {
  if (at + lit.size() > text.size()) return false;
  for (size_t i = 0; i < lit.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[at + i])) !=
        std::tolower(static_cast<unsigned char>(lit[i])))
      return false;
  return true;
}

}  // namespace

std::string serialize_state(const nlohmann::json& state) {
  if (state.is_string()) return state.get<std::string>();
  // nlohmann's object is an ordered std::map: dump() writes keys sorted, without whitespace.
  return state.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
}

std::string neutralise_special_text(std::string_view text,
                                    const std::vector<std::string>& literals) {
  std::string out(text);
  // Inserting spaces inside a literal cannot create a new occurrence of any literal that has no
  // space in it, so one pass per literal suffices; loop anyway until none is left.
  for (bool changed = true; changed;) {
    changed = false;
    for (const std::string& lit : literals) {
      if (lit.size() < 2) continue;
      std::string next;
      for (size_t i = 0; i < out.size();) {
        if (iequal_at(out, i, lit)) {
          next += out[i];
          next += ' ';
          next.append(out, i + 1, lit.size() - 2);
          next += ' ';
          next += out[i + lit.size() - 1];
          i += lit.size();
          changed = true;
        } else {
          next += out[i++];
        }
      }
      out.swap(next);
    }
  }
  return out;
}

std::string tokenizer_identity_of_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw IoError("cannot read " + file.string());
  uint64_t h = 1469598103934665603ull;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 1099511628211ull;
    }
  }
  std::ostringstream s;
  s << std::hex << h;
  return s.str();
}

Preparer::Preparer(const DecisionConfig& config, const Tokenizer& tokenizer, std::string identity,
                   size_t cache_capacity)
    : config_(config),
      tokenizer_(tokenizer),
      identity_(std::move(identity)),
      capacity_(std::max<size_t>(1, cache_capacity)) {
  literals_ = {"[MASK]", "[CLS]", "[SEP]", "[PAD]"};
  // The tokenizer's own spelling of the runtime's special ids ("<mask>" in RoBERTa-style files).
  for (int32_t id :
       {config.marker_token_id, config.cls_token_id, config.sep_token_id, config.pad_token_id}) {
    if (id >= tokenizer.vocab_size()) continue;
    const std::string t = tokenizer.id_to_token(id);
    if (t.size() >= 2 && std::find(literals_.begin(), literals_.end(), t) == literals_.end())
      literals_.push_back(t);
  }
}

std::vector<int32_t> Preparer::encode_piece(std::string_view text) const {
  std::vector<int32_t> ids = tokenizer_.encode(neutralise_special_text(text, literals_));
  // Whatever the tokenizer does, a piece never carries the runtime's own special ids: only the
  // layout places markers and separators.
  std::erase_if(ids, [&](int32_t id) {
    return id == config_.marker_token_id || id == config_.cls_token_id ||
           id == config_.sep_token_id || id == config_.pad_token_id;
  });
  return ids;
}

const std::vector<int32_t>& Preparer::prefix(const Question& q, size_t index, bool& hit) {
  nlohmann::json key_parts = {
      identity_, kInstructionFormat, config_.max_length, question_type_name(q.qtype),
      q.text,    q.criteria};
  for (const Option& o : q.options) key_parts.push_back(o.label);
  const std::string key = key_parts.dump();
  if (const auto it = index_.find(key); it != index_.end()) {
    hit = true;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  hit = false;
  std::vector<int32_t> ids = {config_.cls_token_id};
  auto append = [&](const std::vector<int32_t>& piece) {
    ids.insert(ids.end(), piece.begin(), piece.end());
  };
  append(encode_piece(question_type_name(q.qtype)));
  ids.push_back(config_.sep_token_id);
  append(encode_piece(q.text));
  if (!q.criteria.empty()) {
    append(encode_piece("criteria:"));
    for (size_t k = 0; k < q.criteria.size(); ++k)
      append(encode_piece(std::to_string(k + 1) + ". " + q.criteria[k]));
  }
  ids.push_back(config_.sep_token_id);
  for (const Option& o : q.options) {
    ids.push_back(config_.marker_token_id);
    append(encode_piece(o.label));
  }
  ids.push_back(config_.sep_token_id);
  // The state needs at least the closing [SEP] after the prefix.
  if (static_cast<int64_t>(ids.size()) + 1 > config_.max_length)
    throw InvalidArgument("decision request: questions[" + std::to_string(index) +
                          "]: its question, criteria and options take " +
                          std::to_string(ids.size()) + " tokens, which with the closing [SEP] " +
                          "exceeds max_length " + std::to_string(config_.max_length));
  lru_.emplace_front(key, std::move(ids));
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return lru_.front().second;
}

std::vector<PreparedQuestion> Preparer::prepare(const Request& request, int64_t& cache_hits) {
  // Once per request: serialize, sanitize and tokenize the state.
  const std::vector<int32_t> state = encode_piece(serialize_state(request.state));
  last_state_tokens_ = static_cast<int64_t>(state.size());
  std::vector<PreparedQuestion> out;
  out.reserve(request.questions.size());
  for (size_t i = 0; i < request.questions.size(); ++i) {
    bool hit = false;
    const std::vector<int32_t>& head = prefix(request.questions[i], i, hit);
    cache_hits += hit;
    PreparedQuestion p;
    const int64_t room = config_.max_length - static_cast<int64_t>(head.size()) - 1;
    p.state_tokens = std::min<int64_t>(room, static_cast<int64_t>(state.size()));
    p.state_truncated = p.state_tokens < static_cast<int64_t>(state.size());
    p.ids.reserve(head.size() + static_cast<size_t>(p.state_tokens) + 1);
    p.ids = head;
    p.ids.insert(p.ids.end(), state.begin(), state.begin() + p.state_tokens);
    p.ids.push_back(config_.sep_token_id);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace infera::decision
