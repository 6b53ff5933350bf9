#include "engine/kv_cache.h"

#include <string>

#include "infera/error.h"

namespace infera {
namespace {
int32_t checked_blocks(const KvCacheConfig& c) {
  if (c.block_size <= 0 || c.block_size > 4096)
    throw InvalidArgument("KV cache block size " + std::to_string(c.block_size) +
                          ": expected 1 to 4096 tokens");
  if (c.num_blocks <= 0 || c.num_blocks > (int64_t{INT32_MAX} / c.block_size))
    throw InvalidArgument("KV cache of " + std::to_string(c.num_blocks) + " blocks of " +
                          std::to_string(c.block_size) + " tokens: out of range");
  return static_cast<int32_t>(c.num_blocks);
}
}  // namespace

KvCache::KvCache(Backend& backend, const KvShape& shape, const KvCacheConfig& config)
    : config_(config), allocator_(checked_blocks(config)) {
  if (!backend.supports(Op::KvWrite, {config.dtype}) ||
      !backend.supports(Op::Attention, {config.dtype}))
    throw InvalidArgument("KV cache dtype " + std::string(dtype_name(config.dtype)) +
                          " is not supported by the " + backend.name() + " backend");
  pool_.num_blocks = config.num_blocks;
  pool_.block_size = config.block_size;
  pool_.dtype = config.dtype;
  const Shape s{shape.kv_heads, config.num_blocks, config.block_size, shape.head_dim};
  for (int64_t l = 0; l < shape.layers; ++l) {
    const std::string name = "kv." + std::to_string(l);
    pool_.layers.push_back(
        {backend.alloc(name + ".k", config.dtype, s), backend.alloc(name + ".v", config.dtype, s)});
  }
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const KvLayer& l : pool_.layers)
    total += static_cast<int64_t>(l.keys.nbytes() + l.values.nbytes());
  return total;
}

const KvCache::Sequence& KvCache::get(SeqId seq) const {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw InvalidArgument("KV cache: unknown sequence " + std::to_string(seq));
  return it->second;
}
KvCache::Sequence& KvCache::get(SeqId seq) {
  return const_cast<Sequence&>(static_cast<const KvCache*>(this)->get(seq));
}

SeqId KvCache::add_sequence() {
  seqs_.emplace(next_id_, Sequence{});
  return next_id_++;
}

void KvCache::free_sequence(SeqId seq) {
  for (int32_t b : get(seq).blocks) allocator_.release(b);
  seqs_.erase(seq);
}

int64_t KvCache::blocks_for(int64_t tokens) const {
  return (tokens + config_.block_size - 1) / config_.block_size;
}

bool KvCache::reserve(SeqId seq, int64_t tokens) {
  Sequence& s = get(seq);
  if (tokens < 0) throw InvalidArgument("KV cache: negative reservation");
  const int64_t more = blocks_for(tokens) - static_cast<int64_t>(s.blocks.size());
  if (more <= 0) return true;
  if (more > allocator_.num_free()) return false;
  for (int64_t i = 0; i < more; ++i) s.blocks.push_back(*allocator_.allocate());
  return true;
}

int64_t KvCache::length(SeqId seq) const { return get(seq).length; }
int64_t KvCache::capacity(SeqId seq) const {
  return static_cast<int64_t>(get(seq).blocks.size()) * config_.block_size;
}

void KvCache::commit(SeqId seq, int64_t n) {
  Sequence& s = get(seq);
  if (n < 0 || s.length + n > capacity(seq))
    throw InvalidArgument("KV cache: sequence " + std::to_string(seq) + " commits " +
                          std::to_string(n) + " tokens past its " + std::to_string(capacity(seq)));
  s.length += n;
}

const std::vector<int32_t>& KvCache::block_table(SeqId seq) const { return get(seq).blocks; }

void KvCache::check_invariants() const {
  allocator_.check_invariants();
  std::vector<int32_t> held(static_cast<size_t>(allocator_.num_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    if (s.length > static_cast<int64_t>(s.blocks.size()) * config_.block_size)
      throw Error("KV cache: sequence " + std::to_string(id) + " is longer than its blocks");
    for (int32_t b : s.blocks) {
      if (b < 0 || b >= allocator_.num_blocks())
        throw Error("KV cache: sequence " + std::to_string(id) + " holds bad block " +
                    std::to_string(b));
      ++held[static_cast<size_t>(b)];
    }
  }
  for (int32_t b = 0; b < allocator_.num_blocks(); ++b)
    if (held[static_cast<size_t>(b)] != allocator_.ref_count(b))
      throw Error("KV cache: block " + std::to_string(b) + " is held by " +
                  std::to_string(held[static_cast<size_t>(b)]) + " sequences but counted " +
                  std::to_string(allocator_.ref_count(b)));
}

}  // namespace infera
