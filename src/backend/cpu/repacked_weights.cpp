#include "backend/cpu/repacked_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/cpu/matmul_bf16_packed.h"
#include "backend/cpu/weight_rowgroups.h"
#include "core/huge_pages.h"
#include "infera/error.h"

namespace infera::cpu {

namespace {
// INFERA_CPU_REPACK (see the header): unset = the default set, "0" = none, "all" = every row-group
// type, else a list of type names ("q4_0,q6_k").
bool repack_enabled(DType dtype) {
  const char* v = std::getenv("INFERA_CPU_REPACK");
  // The default set (bf16 only where the backend asks for it, see the constructor).
  bool wanted = dtype == DType::Q4_0 || dtype == DType::Q4_K || dtype == DType::Q6_K ||
                dtype == DType::Q8_0 || dtype == DType::BF16;
  if (v && std::strcmp(v, "0") == 0) {
    wanted = false;
  } else if (v && std::strcmp(v, "all") == 0) {
    wanted = true;
  } else if (v) {
    std::string list(v), name(dtype_name(dtype));
    for (char& c : list) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    wanted = list.find(name) != std::string::npos;
  }
  return wanted && (dtype == DType::BF16 || rowgroups_native(dtype));
}

// The source of a repacked weight is usually the model file's mapping, whose pages the repack has
// just read in: without this they stay resident beside the copy (+204-236 MiB peak RSS on the
// 0.6B 4-bit files). MADV_PAGEOUT only asks the kernel to reclaim the pages — clean file pages
// are dropped and read again if touched, anonymous ones stay (no swap) — so contents never change.
void release_source_pages(const void* data, size_t bytes) {
#ifdef MADV_PAGEOUT
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (page > 0 && end > begin)
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);  // a hint: errors ignored
#else
  (void)data;
  (void)bytes;
#endif
}
}  // namespace

RepackedWeights::RepackedWeights(bool pack_bf16)
    : registry_(std::make_shared<Registry>()),
      enabled_q4_0_(repack_enabled(DType::Q4_0)),
      enabled_q4_k_(repack_enabled(DType::Q4_K)),
      enabled_q6_k_(repack_enabled(DType::Q6_K)),
      enabled_q8_0_(repack_enabled(DType::Q8_0)),
      enabled_bf16_(pack_bf16 && repack_enabled(DType::BF16)) {}

Tensor RepackedWeights::prepare(const Tensor& w) {
  const bool bf16 = w.dtype() == DType::BF16;
  const bool enabled = w.dtype() == DType::Q4_0   ? enabled_q4_0_
                       : w.dtype() == DType::Q4_K ? enabled_q4_k_
                       : w.dtype() == DType::Q6_K ? enabled_q6_k_
                       : w.dtype() == DType::Q8_0 ? enabled_q8_0_
                                                  : bf16 && enabled_bf16_;
  // One-row bf16 tensors stay rows: nothing to gain, and a [1, d] norm weight reads them as such.
  if (!enabled || w.rank() != 2 || w.device() != Device::CPU || w.numel() == 0 ||
      (bf16 && w.dim(0) < 2) || (!bf16 && !rowgroups_fit(w.dtype(), w.dim(0), w.dim(1))))
    return w;
  const size_t bytes = bf16 ? bf16_pairs_bytes(w.dim(0), w.dim(1)) : w.nbytes();
  void* p = alloc_streamed(bytes);
  if (!p) throw Error("out of memory repacking " + w.name() + " " + w.shape().str());
  if (bf16)
    pack_bf16_pairs(w.data_as<const uint16_t>(), w.dim(0), w.dim(1), static_cast<uint16_t*>(p));
  else
    to_rowgroups(w.dtype(), w.data(), w.dim(0), w.dim(1), p);
  release_source_pages(w.data(), w.nbytes());
  const auto begin = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> lock(registry_->mutex);
    registry_->spans[begin] = {begin + bytes,
                               bf16 ? WeightLayout::Bf16Pairs : WeightLayout::RowGroups, w.dim(1)};
  }
  std::shared_ptr<void> owner(p, [registry = registry_, begin](void* q) {
    {
      std::lock_guard<std::mutex> lock(registry->mutex);
      registry->spans.erase(begin);
    }
    std::free(q);
  });
  return Tensor(w.name(), w.dtype(), w.shape(), Device::CPU, p, std::move(owner));
}

WeightLayout RepackedWeights::layout_of(const Tensor& t, const void** base,
                                        int64_t* first_row) const {
  if (t.dtype() != DType::BF16 && !rowgroups_fit(t.dtype(), kGroupRows, kUnitElements))
    return WeightLayout::Rows;
  const auto at = reinterpret_cast<uintptr_t>(t.data());
  std::lock_guard<std::mutex> lock(registry_->mutex);
  auto it = registry_->spans.upper_bound(at);
  if (it == registry_->spans.begin()) return WeightLayout::Rows;
  --it;  // the last buffer starting at or before `at`
  if (at >= it->second.end) return WeightLayout::Rows;
  const Registry::Span& span = it->second;
  // Tensor::rows(r0, n) of a packed [m, k] bf16 weight points r0 * k elements past its start.
  const auto row_bytes = static_cast<uintptr_t>(span.row_width) * sizeof(uint16_t);
  const bool row_view = span.layout == WeightLayout::Bf16Pairs && t.rank() == 2 &&
                        t.dim(1) == span.row_width && (at - it->first) % row_bytes == 0;
  if (at != it->first && !row_view)
    throw InvalidArgument("tensor " + t.name() +
                          " is a view inside a repacked weight; views of prepared weights "
                          "are not supported on the cpu");
  if (base) *base = reinterpret_cast<const void*>(it->first);
  if (first_row) *first_row = row_view ? static_cast<int64_t>((at - it->first) / row_bytes) : 0;
  return span.layout;
}

}  // namespace infera::cpu
