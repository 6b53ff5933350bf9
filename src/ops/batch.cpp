#include "ops/batch.h"

#include <algorithm>

#include "infera/error.h"
#include "ops/backend.h"

namespace infera {
namespace {
// Every check builds its message only when it fails: a message made before the check cost ~0.26
// us a token on the host (8x512 prefill: ~1 ms a step while the GPU waited; cudapre's note), and
// any longer than the string's inline buffer is a heap allocation in every forward pass.
[[noreturn]] void fail(const std::string& what) { throw InvalidArgument("[batch] " + what); }
std::string str(int64_t v) { return std::to_string(v); }
}  // namespace

std::string_view op_name(Op op) {
  switch (op) {
    case Op::Embedding:
      return "embedding";
    case Op::RmsNorm:
      return "rmsnorm";
    case Op::Matmul:
      return "matmul";
    case Op::Rope:
      return "rope";
    case Op::KvWrite:
      return "kv_write";
    case Op::Attention:
      return "attention";
    case Op::Swiglu:
      return "swiglu";
    case Op::Add:
      return "add";
    case Op::GatherRows:
      return "gather_rows";
    case Op::LayerNorm:
      return "layernorm";
    case Op::Gelu:
      return "gelu";
    case Op::Geglu:
      return "geglu";
    case Op::AddBias:
      return "add_bias";
    case Op::AttentionPacked:
      return "attention_packed";
    case Op::MeanPool:
      return "mean_pool";
    case Op::AddLayerNorm:
      return "add_layernorm";
    case Op::MatmulGeglu:
      return "matmul_geglu";
    case Op::RopeAttentionPacked:
      return "rope_attention_packed";
    case Op::AddRmsNorm:
      return "add_rmsnorm";
    case Op::MatmulSwiglu:
      return "matmul_swiglu";
    case Op::MatmulSwigluDown:
      return "matmul_swiglu_down";
    case Op::QkNormRopeKvWrite:
      return "qk_norm_rope_kv_write";
    case Op::ResidualMlp:
      return "residual_mlp";
    case Op::RmsNormMatmulMulti:
      return "rmsnorm_matmul_multi";
    case Op::OutputMlp:
      return "output_mlp";
    case Op::EncoderStack:
      return "encoder_stack";
    case Op::DecoderStack:
      return "decoder_stack";
    case Op::ArgmaxRows:
      return "argmax_rows";
    case Op::SampleRows:
      return "sample_rows";
  }
  return "?";
}

void Backend::unsupported(Op op) const {
  throw InvalidArgument("[" + std::string(op_name(op)) + "] is not implemented by the " + name() +
                        " backend");
}

int64_t KvShape::bytes_per_token(DType dtype) const {
  return 2 * layers *
         static_cast<int64_t>(dtype_bytes(dtype, static_cast<size_t>(kv_heads * head_dim)));
}

int32_t BatchDesc::max_query_len() const {
  int32_t m = 0;
  for (int64_t b = 0; b < num_seqs(); ++b)
    m = std::max(m, query_start[static_cast<size_t>(b + 1)] - query_start[static_cast<size_t>(b)]);
  return m;
}

int32_t BatchDesc::max_seq_len() const {
  return seq_lens.empty() ? 0 : *std::max_element(seq_lens.begin(), seq_lens.end());
}

void BatchDesc::validate(int64_t vocab, int64_t max_position, int64_t num_blocks,
                         int64_t block_size) const {
  const int64_t t = num_tokens(), b = num_seqs();
  if (!(t > 0)) fail("no tokens");
  if (!(t <= INT32_MAX / 2)) fail("too many tokens in one batch: " + str(t));
  if (!(static_cast<int64_t>(positions.size()) == t))
    fail("positions has " + str(static_cast<int64_t>(positions.size())) + " entries for " + str(t) +
         " tokens");
  if (!(b > 0 && query_start.front() == 0 && query_start.back() == t))
    fail("query_start must run from 0 to the token count " + str(t));
  if (!(static_cast<int64_t>(seq_lens.size()) == b)) fail("seq_lens needs one entry per sequence");
  for (int64_t i = 0; i < t; ++i) {
    const int32_t id = tokens[static_cast<size_t>(i)];
    if (!(vocab <= 0 || (id >= 0 && id < vocab)))
      fail("token id " + str(id) + " at row " + str(i) + " is outside the vocabulary [0, " +
           str(vocab) + ")");
    const int32_t p = positions[static_cast<size_t>(i)];
    if (!(p >= 0 && p < max_position))
      fail("position " + str(p) + " at row " + str(i) + " is outside the model's context [0, " +
           str(max_position) + ")");
  }
  for (int64_t s = 0; s < b; ++s) {
    const int32_t begin = query_start[static_cast<size_t>(s)],
                  end = query_start[static_cast<size_t>(s + 1)];
    if (!(begin < end)) fail("sequence " + str(s) + " has no rows (query_start must increase)");
    const int32_t len = seq_lens[static_cast<size_t>(s)];
    for (int32_t i = begin; i < end; ++i)
      if (!(positions[static_cast<size_t>(i)] < len))
        fail("row " + str(i) + " sits at position " + str(positions[static_cast<size_t>(i)]) +
             ", past its sequence length " + str(len));
  }
  if (num_blocks == 0) {
    if (!(slots.empty() && block_table.empty()))
      fail("slots or a block table given without a cache");
  } else {
    if (!(static_cast<int64_t>(slots.size()) == t)) fail("slots needs one entry per token");
    if (!(max_blocks > 0 && static_cast<int64_t>(block_table.size()) == b * max_blocks))
      fail("block_table must be [sequences, max_blocks]");
    for (int64_t s = 0; s < b; ++s) {
      const int64_t len = seq_lens[static_cast<size_t>(s)];
      if (!(len <= int64_t{max_blocks} * block_size))
        fail("sequence " + str(s) + " of length " + str(len) + " does not fit its " +
             str(max_blocks) + " blocks");
      const int32_t* table = block_table.data() + s * max_blocks;
      const int64_t used = (len + block_size - 1) / block_size;
      for (int64_t k = 0; k < used; ++k)
        if (!(table[k] >= 0 && table[k] < num_blocks))
          fail("sequence " + str(s) + " block " + str(k) + " is " + str(table[k]) +
               ", outside the cache's " + str(num_blocks) + " blocks");
      // A token's slot must be the one its position maps to through its own block table, so
      // that attention later reads back exactly what kv_write stored.
      for (int32_t i = query_start[static_cast<size_t>(s)];
           i < query_start[static_cast<size_t>(s + 1)]; ++i) {
        const int64_t p = positions[static_cast<size_t>(i)];
        const int64_t want = int64_t{table[p / block_size]} * block_size + p % block_size;
        if (!(slots[static_cast<size_t>(i)] == want))
          fail("row " + str(i) + " has slot " + str(slots[static_cast<size_t>(i)]) +
               ", its block table maps position " + str(p) + " to " + str(want));
      }
    }
  }
  for (int32_t r : output_rows)
    if (!(r >= 0 && r < t)) fail("output row " + str(r) + " is outside [0, " + str(t) + ")");
}

}  // namespace infera
