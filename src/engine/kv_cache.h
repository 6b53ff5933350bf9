// The KV cache manager: paged block pools on the backend (one per layer, for keys and values),
// a block allocator with reference counts, and each sequence's block table. The model only sees
// the pools (KvPool) and the slots a batch names; which sequence owns which block lives here.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "engine/block_allocator.h"
#include "ops/backend.h"
#include "ops/batch.h"

namespace infera {

struct KvCacheConfig {
  int64_t block_size = 32;   // tokens per block
  int64_t num_blocks = 0;    // blocks in the pool (> 0)
  DType dtype = DType::F32;  // F32, BF16 or F16 (as the backend supports)
};

using SeqId = int64_t;

class KvCache {
 public:
  KvCache(Backend& backend, const KvShape& shape, const KvCacheConfig& config);

  KvPool& pool() { return pool_; }
  const KvCacheConfig& config() const { return config_; }
  int64_t bytes() const;  // device memory of the pools

  SeqId add_sequence();
  // Releases the sequence's blocks; the id becomes unknown.
  void free_sequence(SeqId seq);
  // Grows the sequence's blocks to hold `tokens` tokens, all or nothing. Returns false (and
  // changes nothing) when too few blocks are free: the scheduler's signal to wait or preempt.
  bool reserve(SeqId seq, int64_t tokens);
  // Tokens whose keys and values are in the cache, and how many its blocks can hold.
  int64_t length(SeqId seq) const;
  int64_t capacity(SeqId seq) const;
  // Records that a forward pass wrote `n` more tokens (checked against the capacity).
  void commit(SeqId seq, int64_t n);
  const std::vector<int32_t>& block_table(SeqId seq) const;

  int64_t blocks_for(int64_t tokens) const;
  int64_t free_blocks() const { return allocator_.num_free(); }
  int64_t num_sequences() const { return static_cast<int64_t>(seqs_.size()); }
  const BlockAllocator& allocator() const { return allocator_; }

  // Throws Error on the first inconsistency: the allocator's own invariants, a block's count not
  // equal to the tables that hold it, a length beyond a sequence's blocks.
  void check_invariants() const;

 private:
  struct Sequence {
    std::vector<int32_t> blocks;
    int64_t length = 0;
  };
  const Sequence& get(SeqId seq) const;
  Sequence& get(SeqId seq);

  KvCacheConfig config_;
  BlockAllocator allocator_;
  KvPool pool_;
  std::map<SeqId, Sequence> seqs_;
  SeqId next_id_ = 0;
};

}  // namespace infera
