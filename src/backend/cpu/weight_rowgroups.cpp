// The row-group layouts of weight_rowgroups.h: repacking and row extraction in plain scalar code
// (prepare time, the embedding gather and the prefill panels' restore), and the dispatch to the
// per-type kernels (matmul_q4_0.cpp, matmul_q4_k.cpp).
#include "backend/cpu/weight_rowgroups.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "infera/error.h"
#include "quant/block_formats.h"

namespace infera::cpu {

// Defined in matmul_q4_0.cpp, matmul_q4_k.cpp, matmul_q6_k.cpp and matmul_q8_0.cpp.
void matmul_rows_q4_0_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo);
void matmul_rows_q4_k_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo);
void matmul_rows_q6_k_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo);
void matmul_rows_q8_0_rowgroups(const void* acts, int64_t n, int64_t k, const void* w,
                                int64_t j_begin, int64_t j_end, float* out, int64_t ldo);
bool q4_0_rowgroups_native();
bool q8_0_rowgroups_native();
bool q4_k_rowgroups_native();
bool q6_k_rowgroups_native();

namespace {

static_assert(kUnitBytes == kGroupRows * 8 * static_cast<int64_t>(sizeof(quant::BlockQ4_0)));
static_assert(kUnitBytes == kGroupRows * static_cast<int64_t>(sizeof(quant::BlockQ4_K)));
static_assert(kUnitBytesQ6_K == kGroupRows * static_cast<int64_t>(sizeof(quant::BlockQ6_K)));
static_assert(kUnitBytesQ8_0 == kGroupRows * 8 * static_cast<int64_t>(sizeof(quant::BlockQ8_0)));

// For every run of bytes of row r (in file order): visit(offset in the row, offset inside the
// group, length as a std::integral_constant, so the copies compile to plain moves: the prefill
// panels restore rows this way on every call). Q4_0 and Q8_0: unit u is blocks 8u..8u+7; Q4_K
// and Q6_K: unit u is super-block u.
template <int N>
using Len = std::integral_constant<int64_t, N>;

template <class Visit>
void for_each_run(DType dtype, int64_t k, int64_t r, Visit visit) {
  const int64_t units = k / kUnitElements;
  for (int64_t u = 0; u < units; ++u) {
    const int64_t unit = u * rowgroup_unit_bytes(dtype);
    if (dtype == DType::Q6_K) {  // ql[128], qh[64], scales[16], d
      const int64_t src = u * 210;
      visit(src + 192, unit + 16 * r, Len<16>{});
      visit(src + 208, unit + 64 + 2 * r, Len<2>{});
      for (int64_t s = 0; s < 4; ++s) {
        const int64_t h = s / 2, t = s % 2, line = unit + kQ6_KQuantsOffset + 192 * s + 16 * r;
        visit(src + 64 * h + 16 * t, line, Len<16>{});
        visit(src + 64 * h + 32 + 16 * t, line + 64, Len<16>{});
        visit(src + 128 + 32 * h + 16 * t, line + 128, Len<16>{});
      }
    } else if (dtype == DType::Q8_0) {
      for (int64_t b = 0; b < 8; ++b) {
        const int64_t src = (8 * u + b) * 34, line = unit + 64 + 128 * b + 16 * r;
        visit(src, unit + 2 * (4 * b + r), Len<2>{});  // d
        visit(src + 2, line, Len<16>{});               // qs[0, 16)
        visit(src + 18, line + 64, Len<16>{});         // qs[16, 32)
      }
    } else if (dtype == DType::Q4_0) {
      for (int64_t b = 0; b < 8; ++b) {
        const int64_t src = (8 * u + b) * 18;
        visit(src, unit + 2 * (4 * b + r), Len<2>{});            // d
        visit(src + 2, unit + 64 + 64 * b + 16 * r, Len<16>{});  // qs
      }
    } else {  // Q4_K: d, dmin, scales[12], qs[128]
      const int64_t src = u * 144;
      visit(src, unit + 2 * r, Len<2>{});
      visit(src + 2, unit + 8 + 2 * r, Len<2>{});
      for (int64_t w = 0; w < 3; ++w) visit(src + 4 + 4 * w, unit + 16 + 16 * w + 4 * r, Len<4>{});
      for (int64_t j = 0; j < 8; ++j)
        for (int64_t l = 0; l < 4; ++l)
          visit(src + 16 + 32 * l + 4 * j, unit + 64 + 64 * j + 16 * r + 4 * l, Len<4>{});
    }
  }
}

}  // namespace

namespace {
bool valid_prefetch(int64_t bytes) { return bytes >= 0 && bytes <= 65536 && bytes % 64 == 0; }

int64_t prefetch_from_env() {
  const char* v = std::getenv("INFERA_CPU_ROWGROUP_PREFETCH");
  if (!v || !*v) return kDefaultRowGroupPrefetchBytes;
  char* end = nullptr;
  const long long bytes = std::strtoll(v, &end, 10);
  if (*end != '\0' || !valid_prefetch(bytes))
    throw InvalidArgument(
        "INFERA_CPU_ROWGROUP_PREFETCH must be a multiple of 64 bytes in [0, 65536], not '" +
        std::string(v) + "'");
  return bytes;
}

std::atomic<int64_t>& prefetch_setting() {
  static std::atomic<int64_t> bytes{prefetch_from_env()};
  return bytes;
}
}  // namespace

int64_t rowgroup_prefetch_bytes() { return prefetch_setting().load(std::memory_order_relaxed); }

void set_rowgroup_prefetch_bytes(int64_t bytes) {
  if (!valid_prefetch(bytes))
    throw InvalidArgument(
        "[matmul] row-group prefetch must be a multiple of 64 bytes in [0, 65536], not " +
        std::to_string(bytes));
  prefetch_setting().store(bytes, std::memory_order_relaxed);
}

int64_t rowgroup_unit_bytes(DType dtype) {
  return dtype == DType::Q6_K ? kUnitBytesQ6_K : dtype == DType::Q8_0 ? kUnitBytesQ8_0 : kUnitBytes;
}

bool rowgroups_fit(DType dtype, int64_t m, int64_t k) {
  return (dtype == DType::Q4_0 || dtype == DType::Q4_K || dtype == DType::Q6_K ||
          dtype == DType::Q8_0) &&
         m > 0 && k > 0 && m % kGroupRows == 0 && k % kUnitElements == 0;
}

void to_rowgroups(DType dtype, const void* w, int64_t m, int64_t k, void* out) {
  const auto* src = static_cast<const uint8_t*>(w);
  auto* dst = static_cast<uint8_t*>(out);
  const auto row_bytes = static_cast<int64_t>(dtype_bytes(dtype, static_cast<size_t>(k)));
  for (int64_t j = 0; j < m; ++j) {
    const uint8_t* row = src + j * row_bytes;
    uint8_t* group = dst + (j / kGroupRows) * kGroupRows * row_bytes;
    for_each_run(dtype, k, j % kGroupRows, [&](int64_t from, int64_t to, auto len) {
      std::memcpy(group + to, row + from, decltype(len)::value);
    });
  }
}

void rowgroups_row(DType dtype, const void* w, int64_t k, int64_t j, void* out) {
  const auto row_bytes = static_cast<int64_t>(dtype_bytes(dtype, static_cast<size_t>(k)));
  const uint8_t* group = static_cast<const uint8_t*>(w) + (j / kGroupRows) * kGroupRows * row_bytes;
  auto* row = static_cast<uint8_t*>(out);
  for_each_run(dtype, k, j % kGroupRows, [&](int64_t from, int64_t to, auto len) {
    std::memcpy(row + from, group + to, decltype(len)::value);
  });
}

void matmul_rows_rowgroups(DType dtype, const void* acts, int64_t n, int64_t k, const void* w,
                           int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  if (dtype == DType::Q4_0)
    return matmul_rows_q4_0_rowgroups(acts, n, k, w, j_begin, j_end, out, ldo);
  if (dtype == DType::Q4_K)
    return matmul_rows_q4_k_rowgroups(acts, n, k, w, j_begin, j_end, out, ldo);
  if (dtype == DType::Q6_K)
    return matmul_rows_q6_k_rowgroups(acts, n, k, w, j_begin, j_end, out, ldo);
  if (dtype == DType::Q8_0)
    return matmul_rows_q8_0_rowgroups(acts, n, k, w, j_begin, j_end, out, ldo);
  throw InvalidArgument("[matmul] " + std::string(dtype_name(dtype)) + " has no row-group kernel");
}

bool rowgroups_native(DType dtype) {
  if (dtype == DType::Q4_0) return q4_0_rowgroups_native();
  if (dtype == DType::Q4_K) return q4_k_rowgroups_native();
  if (dtype == DType::Q6_K) return q6_k_rowgroups_native();
  if (dtype == DType::Q8_0) return q8_0_rowgroups_native();
  return false;
}

}  // namespace infera::cpu
