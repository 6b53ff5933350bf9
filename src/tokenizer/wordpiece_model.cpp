#include "tokenizer/wordpiece_model.h"

#include <algorithm>

#include "tokenizer/json_util.h"
#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

// Same bound as the BPE model: ids above it would make the id tables huge.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

}  // namespace

WordPieceModel::WordPieceModel(const json& j) {
  const char* where = "model WordPiece";
  unk_token_ = j.contains("unk_token") ? require_string(j, "unk_token", where) : "[UNK]";
  prefix_ = j.contains("continuing_subword_prefix")
                ? require_string(j, "continuing_subword_prefix", where)
                : "##";
  if (auto it = j.find("max_input_chars_per_word"); it != j.end()) {
    if (!it->is_number_unsigned())
      throw FormatError(
          "model WordPiece: 'max_input_chars_per_word' must be a non-negative integer");
    max_input_chars_ = it->get<std::size_t>();
  }
  const json& vocab = require_field(j, "vocab", where);
  if (!vocab.is_object()) throw FormatError("model WordPiece: 'vocab' must be an object");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > kMaxTokenId) {
      throw FormatError("model WordPiece: vocab entry '" + it.key() + "' has an invalid id " +
                        it.value().dump());
    }
    const int64_t id = it.value().get<int64_t>();
    vocab_.emplace(it.key(), static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
    max_token_bytes_ = std::max(max_token_bytes_, it.key().size());
  }
  // Tables sized by what the file holds, not by its largest id (a sparse id would allocate).
  check_id_density(max_id, vocab_.size(), "model WordPiece: vocab");
  id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  has_id_.assign(id_to_token_.size(), false);
  for (const auto& [token, id] : vocab_) {
    if (!has_id_[id]) id_to_token_[id] = token;
    has_id_[id] = true;
  }
}

std::optional<int32_t> WordPieceModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* WordPieceModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_bound() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

int32_t WordPieceModel::unk_id() const {
  auto it = vocab_.find(unk_token_);
  // tokenizers fails the encode the same way (MissingUnkToken) when the unk token is needed.
  if (it == vocab_.end()) {
    throw InvalidArgument("tokenizer: WordPiece unk_token '" + unk_token_ +
                          "' is not in the vocab, and this text needs it");
  }
  return it->second;
}

void WordPieceModel::encode_piece(std::string_view piece, bool byte_level,
                                  std::vector<int32_t>& out) const {
  std::string mapped;
  if (byte_level) {
    for (unsigned char c : piece) mapped += ByteLevelAlphabet::get().byte_to_utf8[c];
    piece = mapped;
  }
  std::size_t chars = 0;
  for (std::size_t i = 0; i < piece.size(); i += next_utf8(piece.substr(i)).length) ++chars;
  if (chars > max_input_chars_) {
    out.push_back(unk_id());
    return;
  }
  const std::size_t mark = out.size();
  std::string key;
  for (std::size_t start = 0; start < piece.size();) {
    // The longest candidate worth looking up ends max_token_bytes_ on, at a character boundary.
    std::size_t end = std::min(piece.size(), start + max_token_bytes_);
    while (end > start && end < piece.size() &&
           (static_cast<unsigned char>(piece[end]) & 0xC0) == 0x80) {
      --end;
    }
    int32_t found = -1;
    std::size_t found_end = 0;
    while (end > start) {
      key.assign(start > 0 ? prefix_ : std::string());
      key.append(piece.substr(start, end - start));
      if (auto it = vocab_.find(key); it != vocab_.end()) {
        found = it->second;
        found_end = end;
        break;
      }
      do {
        --end;
      } while (end > start && (static_cast<unsigned char>(piece[end]) & 0xC0) == 0x80);
    }
    if (found < 0) {
      out.resize(mark);
      out.push_back(unk_id());
      return;
    }
    out.push_back(found);
    start = found_end;
  }
}

}  // namespace infera::tok
