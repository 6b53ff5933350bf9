// The TMA prefill attention's work schedule (attention_tma_wgmma.cu), in plain arithmetic shared
// by the kernel and the host, so that the CPU tests check it where no GPU is (a skipped or
// doubled work item would show only as wrong outputs for some shapes on a GPU).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define INFERA_TMA_HD __host__ __device__
#else
#define INFERA_TMA_HD
#endif

namespace infera::cuda::tma_schedule {

// The work item that block `block` of `grid` takes in its round k: rounds of `grid` items,
// walked forwards in even rounds and backwards in odd ones (a snake), so that a block that took
// one of the longest items (they come first) takes one of the shortest next. Striding (block,
// block + grid, ...) instead gave the first blocks the longest item of each round (1x2048 at 132
// blocks: 48 key tiles on block 0 against 32 on average; lead24_h200/run2). Grows with k, so the
// first past the launch's items ends a block's walk.
INFERA_TMA_HD inline int snake_item(int k, int grid, int block) {
  return k * grid + ((k & 1) ? grid - 1 - block : block);
}

// The launch's work items: (kv head, sequence, query tile of `tile_vectors` vectors) for the
// longest prompt's tiles (shorter prompts' surplus tiles are empty items).
inline int64_t work_items(int64_t hkv, int64_t seqs, int64_t longest_prompt, int64_t group,
                          int64_t tile_vectors) {
  return hkv * seqs * ((longest_prompt * group + tile_vectors - 1) / tile_vectors);
}

// Whether the TMA kernel should take a prefill attention (CudaOptions::flash_tma_min_rows): a
// prompt of min_rows rows, or prompts of half that whose items fill every SM twice (8x512: 512
// items). Fewer items leave SMs idle at one block an SM: on an H100, 1x512 (64 items) x0.978-0.999
// and 2x512, 4x256, 16x128 (<= 256) level or slower (lead24_h200/run3, run4).
inline bool wanted(int64_t longest_prompt, int64_t items, int64_t min_rows, int64_t sms) {
  return longest_prompt >= min_rows || (2 * longest_prompt >= min_rows && items >= 2 * sms);
}

}  // namespace infera::cuda::tma_schedule
