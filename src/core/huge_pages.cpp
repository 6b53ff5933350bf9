#include "core/huge_pages.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace infera {

namespace {
std::atomic<bool>& huge_pages_setting() {
  static std::atomic<bool> wanted{[] {
    const char* v = std::getenv("INFERA_HUGE_PAGES");
    return v && std::strcmp(v, "1") == 0;
  }()};
  return wanted;
}
}  // namespace

bool huge_pages_wanted() { return huge_pages_setting().load(); }
void set_huge_pages_wanted(bool on) { huge_pages_setting().store(on); }

void* alloc_streamed(size_t bytes) { return alloc_streamed(bytes, huge_pages_wanted()); }

void* alloc_streamed(size_t bytes, bool huge) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (huge && bytes >= kHuge) {
    const size_t size = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, size);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the pages stay 4 KiB
#endif
    return p;
  }
  return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}

}  // namespace infera
