#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace infera::tok {
namespace {

// Ids above this are refused: they would make id tables huge and no real vocab comes close.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
// Longer pieces rarely repeat; caching them would only evict useful entries.
constexpr std::size_t kMaxCachedPiece = 256;
constexpr std::size_t kCacheCapacity = 1 << 16;

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void BpeModel::MergeMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Slot{kEmpty, {}});
  mask_ = cap - 1;
}

void BpeModel::MergeMap::insert_or_assign(int32_t a, int32_t b, Merge m) {
  const uint64_t key = pair_key(a, b);
  for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == kEmpty) {
      slots_[i] = {key, m};
      ++size_;
      return;
    }
    if (slots_[i].key == key) {
      // tokenizers collects merges into a HashMap, so a repeated pair keeps its last rank.
      slots_[i].merge = m;
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeMap::find(int32_t a, int32_t b) const {
  const uint64_t key = pair_key(a, b);
  for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return &slots_[i].merge;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

BpeModel::BpeModel(const json& j) {
  const char* where = "model BPE";
  if (auto it = j.find("dropout");
      it != j.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0.0)) {
    throw FormatError("model BPE: dropout is not supported (encoding must be deterministic)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto it = j.find(key);
        it != j.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      throw FormatError(std::string("model BPE: '") + key + "' is not supported yet");
    }
  }
  fuse_unk_ = optional_bool(j, "fuse_unk", false, where);
  byte_fallback_ = optional_bool(j, "byte_fallback", false, where);
  ignore_merges_ = optional_bool(j, "ignore_merges", false, where);

  const json& vocab = require_field(j, "vocab", where);
  if (!vocab.is_object()) throw FormatError("model BPE: 'vocab' must be an object");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > kMaxTokenId) {
      throw FormatError("model BPE: vocab entry '" + it.key() + "' has an invalid id " +
                        it.value().dump());
    }
    const int64_t id = it.value().get<int64_t>();
    vocab_.emplace(it.key(), static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  check_id_density(max_id, vocab_.size(), "model BPE: vocab");
  id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  has_id_.assign(id_to_token_.size(), false);
  for (const auto& [token, id] : vocab_) {
    if (!has_id_[id]) id_to_token_[id] = token;
    has_id_[id] = true;
  }

  const json& merges = require_field(j, "merges", where);
  if (!merges.is_array()) throw FormatError("model BPE: 'merges' must be an array");
  merges_.reserve(merges.size());
  std::string a, b;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    const std::string at = "model BPE: merge #" + std::to_string(rank);
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos)
        throw FormatError(at + " '" + s + "' is not of the form 'a b'");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      throw FormatError(at + " must be a string \"a b\" or a pair [\"a\", \"b\"]");
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
    if (ia == vocab_.end()) throw FormatError(at + ": token '" + a + "' is not in the vocab");
    if (ib == vocab_.end()) throw FormatError(at + ": token '" + b + "' is not in the vocab");
    if (iab == vocab_.end())
      throw FormatError(at + ": merged token '" + a + b + "' is not in the vocab");
    merges_.insert_or_assign(ia->second, ib->second, {static_cast<int32_t>(rank), iab->second});
  }

  if (auto it = j.find("unk_token"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) throw FormatError("model BPE: 'unk_token' must be a string or null");
    auto u = vocab_.find(it->get<std::string>());
    if (u == vocab_.end()) {
      throw FormatError("model BPE: unk_token '" + it->get<std::string>() +
                        "' is not in the vocab");
    }
    unk_id_ = u->second;
  }
  const auto& alphabet = ByteLevelAlphabet::get();
  for (int byte = 0; byte < 256; ++byte) {
    auto it = vocab_.find(alphabet.byte_to_utf8[byte]);
    byte_ids_[byte] = it == vocab_.end() ? -1 : it->second;
  }
  cache_ = std::make_unique<PieceCache>(kCacheCapacity);
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_bound() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

// tokenizers' BPE::merge_word: a character missing from the vocab becomes its <0xAB> byte tokens
// (byte_fallback, when all of them exist), else the unk token. An unk is held back until the next
// character found in the vocab (byte-fallback characters do not release it, so it can land after
// them, exactly as in tokenizers); with fuse_unk consecutive unknown characters share one unk.
void BpeModel::initial_symbols(std::string_view piece, bool byte_level,
                               std::vector<int32_t>& ids) const {
  const auto& alphabet = ByteLevelAlphabet::get();
  bool pending_unk = false;
  std::string ch;
  std::size_t i = 0;
  while (i < piece.size()) {
    std::size_t len;
    int32_t id = -1;
    if (byte_level) {
      len = 1;
      id = byte_ids_[static_cast<unsigned char>(piece[i])];
      if (id < 0) ch = alphabet.byte_to_utf8[static_cast<unsigned char>(piece[i])];
    } else {
      len = next_utf8(piece.substr(i)).length;
      ch.assign(piece.substr(i, len));
      if (auto it = vocab_.find(ch); it != vocab_.end()) id = it->second;
    }
    i += len;
    if (id >= 0) {
      if (pending_unk) ids.push_back(*unk_id_);
      pending_unk = false;
      ids.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      const std::size_t mark = ids.size();
      for (unsigned char b : ch) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        auto it = vocab_.find(std::string_view(name));
        if (it == vocab_.end()) break;
        ids.push_back(it->second);
      }
      if (ids.size() == mark + ch.size()) continue;
      ids.resize(mark);
    }
    if (unk_id_) {
      if (pending_unk && !fuse_unk_) ids.push_back(*unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) ids.push_back(*unk_id_);
}

void BpeModel::merge(std::vector<int32_t>& ids) const {
  const int32_t n = static_cast<int32_t>(ids.size());
  if (n < 2) return;
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Symbol> sym;
  thread_local std::vector<Candidate> heap;
  sym.resize(n);
  heap.clear();
  for (int32_t k = 0; k < n; ++k) sym[k] = {ids[k], k - 1, k + 1 < n ? k + 1 : -1, true};
  for (int32_t k = 0; k + 1 < n; ++k) {
    if (const Merge* m = merges_.find(ids[k], ids[k + 1])) heap.push_back({m->rank, k, m->new_id});
  }
  const auto cmp = std::greater<Candidate>();
  std::make_heap(heap.begin(), heap.end(), cmp);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    // The pair may have changed since this candidate was queued; re-check it is still this merge.
    const Merge* m = merges_.find(left.id, right.id);
    if (!m || m->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* pm = merges_.find(sym[left.prev].id, left.id)) {
        heap.push_back({pm->rank, left.prev, pm->new_id});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
    if (left.next >= 0) {
      if (const Merge* nm = merges_.find(left.id, sym[left.next].id)) {
        heap.push_back({nm->rank, top.pos, nm->new_id});
        std::push_heap(heap.begin(), heap.end(), cmp);
      }
    }
  }
  ids.clear();
  for (int32_t k = 0; k >= 0; k = sym[k].next) ids.push_back(sym[k].id);
}

void BpeModel::encode_piece(std::string_view piece, bool byte_level,
                            std::vector<int32_t>& out) const {
  const bool cacheable = piece.size() <= kMaxCachedPiece;
  std::size_t hash = 0;
  if (cacheable) {
    hash = std::hash<std::string_view>{}(piece);
    if (cache_->lookup(piece, hash, out)) return;
  }
  thread_local std::vector<int32_t> ids;
  ids.clear();
  if (ignore_merges_) {
    std::string mapped;
    if (byte_level) {
      for (unsigned char c : piece) mapped += ByteLevelAlphabet::get().byte_to_utf8[c];
    }
    if (auto it = vocab_.find(byte_level ? std::string_view(mapped) : piece); it != vocab_.end()) {
      ids.push_back(it->second);
    }
  }
  if (ids.empty()) {
    initial_symbols(piece, byte_level, ids);
    merge(ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) cache_->insert(piece, hash, ids.data(), ids.size());
}

}  // namespace infera::tok
