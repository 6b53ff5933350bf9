#include "engine/block_allocator.h"

#include <string>

#include "infera/error.h"

namespace infera {

BlockAllocator::BlockAllocator(int32_t num_blocks) {
  if (num_blocks <= 0) throw InvalidArgument("a KV cache needs at least one block");
  refs_.assign(static_cast<size_t>(num_blocks), 0);
  free_.reserve(static_cast<size_t>(num_blocks));
  // Low ids on top of the stack: the first allocations come out in order 0, 1, 2...
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void BlockAllocator::check_id(int32_t block, const char* what) const {
  if (block < 0 || block >= num_blocks())
    throw Error(std::string("KV block allocator: ") + what + " of block " + std::to_string(block) +
                ", outside [0, " + std::to_string(num_blocks()) + ")");
}

std::optional<int32_t> BlockAllocator::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

void BlockAllocator::retain(int32_t block) {
  check_id(block, "retain");
  if (refs_[static_cast<size_t>(block)] == 0)
    throw Error("KV block allocator: retain of free block " + std::to_string(block));
  ++refs_[static_cast<size_t>(block)];
}

void BlockAllocator::release(int32_t block) {
  check_id(block, "release");
  int32_t& r = refs_[static_cast<size_t>(block)];
  if (r == 0) throw Error("KV block allocator: release of free block " + std::to_string(block));
  if (--r == 0) free_.push_back(block);
}

int32_t BlockAllocator::ref_count(int32_t block) const {
  check_id(block, "ref_count");
  return refs_[static_cast<size_t>(block)];
}

void BlockAllocator::check_invariants() const {
  std::vector<char> listed(refs_.size(), 0);
  for (int32_t b : free_) {
    check_id(b, "free list entry");
    if (listed[static_cast<size_t>(b)]++)
      throw Error("KV block allocator: block " + std::to_string(b) + " is listed free twice");
    if (refs_[static_cast<size_t>(b)] != 0)
      throw Error("KV block allocator: block " + std::to_string(b) + " is free with " +
                  std::to_string(refs_[static_cast<size_t>(b)]) + " references");
  }
  for (size_t b = 0; b < refs_.size(); ++b) {
    if (refs_[b] < 0)
      throw Error("KV block allocator: negative count on block " + std::to_string(b));
    if (refs_[b] == 0 && !listed[b])
      throw Error("KV block allocator: block " + std::to_string(b) + " is neither free nor used");
  }
}

}  // namespace infera
