// safetensors from memory: the 8-byte length, the JSON header and the data region. A loaded file
// must hand out tensors that lie inside the buffer (or in an aligned copy of the right size), do
// not overlap, and whose every byte can be read: ASan reports a read outside the exact-size copy
// made here.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "fuzz_common.h"
#include "infera/error.h"
#include "io/safetensors.h"

using namespace infera;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> buf(data, data + size);  // exact size: one byte past it is caught
  try {
    const auto tensors = io::read_safetensors(buf.data(), buf.size(), "fuzz.safetensors", nullptr);
    std::vector<std::pair<size_t, size_t>> ranges;  // [begin, end) of tensors in the buffer
    for (const Tensor& t : tensors) {
      const size_t bytes = t.nbytes();  // checked arithmetic: throws rather than overflows
      const auto* p = static_cast<const uint8_t*>(t.data());
      const size_t align = dtype_bytes(t.dtype(), 1);
      const bool inside = p >= buf.data() && p <= buf.data() + buf.size() &&
                          bytes <= static_cast<size_t>(buf.data() + buf.size() - p);
      fuzz::check(bytes == 0 || reinterpret_cast<uintptr_t>(p) % align == 0,
                  "tensor " + t.name() + " is misaligned");
      if (inside) ranges.emplace_back(p - buf.data(), p - buf.data() + bytes);
      unsigned sum = 0;
      for (size_t k = 0; k < bytes; ++k) sum += p[k];  // an aligned copy must be readable too
      volatile unsigned sink = sum;
      (void)sink;
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
      fuzz::check(ranges[i].first >= ranges[i - 1].second || ranges[i].first == ranges[i].second ||
                      ranges[i - 1].first == ranges[i - 1].second,
                  "two tensors overlap");
  } catch (const Error&) {
  }
  return 0;
}
