// alloc_streamed: the alignment each mode promises, memory that can be written end to end, and
// small requests never rounded up to huge pages.
#include "core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace infera {
namespace {

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(HugePages, FourKibPagesWithoutHugePages) {
  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{3} << 20}) {
    void* p = alloc_streamed(bytes, false);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(address(p) % 4096, 0u) << bytes;
    std::memset(p, 0x5a, bytes);
    EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0x5a);
    std::free(p);
  }
}

TEST(HugePages, TwoMibAlignedFromTwoMib) {
  const size_t bytes = (size_t{5} << 20) + 123;
  void* p = alloc_streamed(bytes, true);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(address(p) % (size_t{2} << 20), 0u);
  std::memset(p, 0xa5, bytes);
  EXPECT_EQ(static_cast<unsigned char*>(p)[bytes - 1], 0xa5);
  std::free(p);
  // Below 2 MiB a huge page would only waste memory: page-aligned as without.
  void* q = alloc_streamed(size_t{1} << 20, true);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(address(q) % 4096, 0u);
  std::free(q);
}

}  // namespace
}  // namespace infera
