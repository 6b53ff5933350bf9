// Fixed-size KV cache blocks handed out from a free list, with reference counts so that a block
// can later be shared by sequences with a common prefix. Pure bookkeeping: no tensor memory.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace infera {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }

  // A free block with reference count 1, or nothing when all are in use.
  std::optional<int32_t> allocate();
  // One more owner of a block in use.
  void retain(int32_t block);
  // One owner fewer; the block returns to the free list at zero. Releasing a free block or an
  // id outside the pool throws instead of corrupting the free list.
  void release(int32_t block);
  int32_t ref_count(int32_t block) const;

  // Throws Error describing the first inconsistency: a block both free and referenced, listed
  // free twice, or neither free nor referenced (leaked). Tests call it after every step.
  void check_invariants() const;

 private:
  void check_id(int32_t block, const char* what) const;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  std::vector<int32_t> refs_;
};

}  // namespace infera
