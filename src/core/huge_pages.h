// Large buffers that kernels stream through (the CPU backend's repacked weights, the bandwidth
// probe's buffer), optionally on transparent huge pages.
#pragma once

#include <cstddef>

namespace infera {

// Whether huge pages are asked for: INFERA_HUGE_PAGES=1 (read once; default off: on a 2-core
// Zen VM decode moved x0.89-1.09 with them, inside its bandwidth noise, while the bandwidth
// probe gained more; docs/notes/2026-12-03/session-13-lead.md).
bool huge_pages_wanted();
// Overrides the setting for allocations made from now on (benchmarks: decode_ab's huge=0|1).
void set_huge_pages_wanted(bool on);
// At least `bytes` of memory aligned to a 4 KiB page, released with std::free; nullptr when out of
// memory. With huge_pages_wanted() and at least 2 MiB: 2 MiB aligned and madvise(MADV_HUGEPAGE)d
// before its first touch, so that the kernel (THP "madvise" or "always") can back it with 2 MiB
// pages: fewer TLB misses on a stream of hundreds of megabytes.
void* alloc_streamed(size_t bytes);
void* alloc_streamed(size_t bytes, bool huge);  // the same with `huge` for huge_pages_wanted()

}  // namespace infera
