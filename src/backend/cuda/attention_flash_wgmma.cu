// Paged prefill attention on Hopper's warpgroup MMA (wgmma, sm_90a; CudaOptions::flash_wgmma).
// A block is 2 warpgroups (wgmma's M is a warpgroup's 64 query vectors); the queries sit in shared
// memory, scaled and rounded once. Per 64-key tile: S = Q K^T by wgmma (both operands in shared
// memory), the base-2 online softmax in registers (the accumulator's per-warp layout is
// mma.sync's, so the flash kernels' step applies), then O += P V by wgmma (m64nDk16) with P as the
// register A operand (the S accumulator repacked in registers, as FlashAttention-3 does) and V
// read transposed (MN-major) from shared memory. Two tile shapes (AttentionArgs::vectors_per_tile):
// 128 vectors, a warpgroup each 64 walking every key tile (K/V read once for twice the queries);
// 64 vectors, both warpgroups on them, each taking one 32-key half of every tile and merging at
// the end (half the serial walk of a long prompt's last tiles; more blocks for short prompts).
// Why: the mma.sync kernels (attention_flash_halves.cu, _wide.cu) spend most of their issue slots
// outside the products (ldmatrix per fragment, 16 x 8 products per instruction); one wgmma does a
// warpgroup's 64 x N x 16 with its operands straight from shared memory.
// Shared memory: every tile (Q, K, V) as [D / 64 column blocks][rows][128 bytes] with the
// 128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8)), the layout wgmma reads without bank
// conflicts; K and V have the same layout (K-major for S, MN-major for P V). The K/V copies are
// cp.async from the paged blocks (TileCopy: power-of-two block sizes), two stages: tile t + 1
// streams in while tile t is multiplied. Causal: key spans no row of a warpgroup sees are skipped
// (warpgroup-uniform, as wgmma needs), the mask runs only where a warp's rows do not all see the
// whole span. GQA: a tile's vectors are the (row, head) pairs of one kv head, so K/V are read
// once for its q heads. The wgmma descriptors are encoded once and stepped by one add
// (wgmma::desc_add). Optionally (flash_wgmma_pipeline) the 64-vector tiles run a pipelined loop:
// S of tile i and P V of tile i - 1 in flight together, the softmax under P V.
#include "backend/cuda/attention_flash_wgmma_kernel.cuh"

namespace infera::cuda {
namespace {

using namespace flash_wgmma;  // attention_flash_wgmma_kernel.cuh

template <typename T, int D, bool kSplit, bool kPipe = false>
void launch_wgmma(const AttentionArgs& a, cudaStream_t s) {
  if (a.tune & kWgmmaQPrefetch) return launch_wgmma_kernel<T, D, kSplit, kPipe, true>(a, s);
  launch_wgmma_kernel<T, D, kSplit, kPipe, false>(a, s);
}

}  // namespace

bool attention_flash_wgmma_supports(ElemType type, int64_t head_dim, int64_t block_size,
                                    int64_t num_blocks, int sm_major, int sm_minor) {
  // sm_90a machine code only (wgmma is not in the compute_90 PTX); f16/bf16, head_dim 64 or 128;
  // TileCopy's paged addressing: a power-of-two block size, a kv head's plane within int32.
  return sm_major == 9 && sm_minor == 0 && (type == ElemType::BF16 || type == ElemType::F16) &&
         (head_dim == 64 || head_dim == 128) && block_size > 0 &&
         (block_size & (block_size - 1)) == 0 && num_blocks > 0 &&
         num_blocks * block_size * head_dim <= int64_t{0x7fffffff};
}

void launch_attention_flash_wgmma(const void* p, cudaStream_t s) {
  const auto& a = *static_cast<const AttentionArgs*>(p);
  dispatch_type_and_head_dim(a, [&](auto t, auto d) {
    using T = typename decltype(t)::type;
    constexpr int D = decltype(d)::value;
    if (a.vectors_per_tile == kWgVectors) {
      if (a.pipelined) return launch_wgmma<T, D, true, true>(a, s);
      return launch_wgmma<T, D, true, false>(a, s);
    }
    launch_wgmma<T, D, false>(a, s);
  });
}

}  // namespace infera::cuda
