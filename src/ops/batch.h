// The batch contract: how one forward pass sees many sequences (vLLM's flattened, padding-free
// layout). Every scheduled token of every sequence is one row; a prefill chunk and a decode token
// differ only in how many rows their sequence has. The engine builds a BatchDesc on the host once
// per step; the backend turns it into a Batch (its device copy, uploaded once) that the ops which
// need token ids, positions or cache slots read. Models pass it through and never loop over
// sequences themselves.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infera/tensor.h"

namespace infera {

struct BatchDesc {
  // Per row (token): T rows in sequence order.
  std::vector<int32_t> tokens;     // [T] ids (decoders) or ids of packed sequences (encoders)
  std::vector<int32_t> positions;  // [T] position of the token within its sequence
  std::vector<int32_t> slots;  // [T] KV cache slot: block_id * block_size + offset; empty: no cache
  // Per sequence: B sequences.
  std::vector<int32_t>
      query_start;                // [B + 1] row prefix sums: sequence b owns rows [qs[b], qs[b+1])
  std::vector<int32_t> seq_lens;  // [B] context length after this step (keys attended to)
  std::vector<int32_t> block_table;  // [B, max_blocks] physical block ids; -1 past the used ones
  int32_t max_blocks = 0;            // row width of block_table
  // Rows whose logits (or head outputs) the caller wants, in the order it wants them.
  std::vector<int32_t> output_rows;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_seqs() const {
    return query_start.empty() ? 0 : static_cast<int64_t>(query_start.size()) - 1;
  }
  int32_t max_query_len() const;
  int32_t max_seq_len() const;

  // Checks every invariant the ops rely on; throws InvalidArgument naming the first violation.
  // `vocab` bounds the token ids (0: unchecked), `max_position` the positions, and a cache of
  // `num_blocks` blocks of `block_size` slots bounds the slots and block ids (num_blocks 0: the
  // batch must not use a cache). Checked once per step, so that kernels can trust the indices.
  void validate(int64_t vocab, int64_t max_position, int64_t num_blocks, int64_t block_size) const;
};

// The backend's view of one step's BatchDesc: I32 tensors on the backend's device (on the CPU they
// alias the host vectors) plus the host description for sizes. Valid while the BatchDesc lives.
struct Batch {
  const BatchDesc* desc = nullptr;
  Tensor tokens, positions, slots, query_start, seq_lens, block_table, output_rows;
  int64_t num_tokens() const { return desc->num_tokens(); }
  int64_t num_seqs() const { return desc->num_seqs(); }
};

// One layer's paged key/value storage: [kv_heads, num_blocks, block_size, head_dim] each.
// Head-major across blocks: a head's rows of one block are contiguous, and so are a head's rows of
// consecutive block ids, which the allocator hands out in order to a growing sequence — attention
// then reads a head's keys as one long run (the hardware prefetcher's case) rather than one short
// stretch per block (block-major was measured 10-20 % slower at 576-2048 keys on the CPU).
struct KvLayer {
  Tensor keys, values;
};

// The cache as the model sees it: the layers' block pools. Block bookkeeping (which sequence owns
// which block) lives in the engine's KV cache manager, not here.
struct KvPool {
  std::vector<KvLayer> layers;
  int64_t num_blocks = 0, block_size = 0;
  DType dtype = DType::F32;
  bool empty() const { return layers.empty(); }
};

// What a model needs of a cache: per layer, kv_heads x head_dim values for keys and for values.
struct KvShape {
  int64_t layers = 0, kv_heads = 0, head_dim = 0;
  int64_t bytes_per_token(DType dtype) const;
};

// Attention masking within a sequence (padding never exists: sequences are packed).
struct AttentionParams {
  float scale = 1.0f;
  bool causal = true;  // key position <= query position
  // Local attention: |query position - key position| <= window; negative: global.
  int32_t window = -1;
};

}  // namespace infera
