// The Q4_0 row-group layout (q4_0_rowgroups.h): repacking and row extraction, in plain scalar
// code (prepare time and the embedding gather; no SIMD needed).
#include "backend/cpu/q4_0_rowgroups.h"

#include <cstring>

namespace infera::cpu {
namespace {

constexpr int64_t kBlocksPerUnit = kQ4_0UnitElements / quant::kQk0;  // 8
static_assert(kQ4_0UnitBytes ==
              kQ4_0GroupRows * kBlocksPerUnit * static_cast<int64_t>(sizeof(quant::BlockQ4_0)));

int64_t row_bytes(int64_t k) {
  return k / quant::kQk0 * static_cast<int64_t>(sizeof(quant::BlockQ4_0));
}

// Where block b of row r (r < 4, within its group) lives inside the group.
uint8_t* scale_at(uint8_t* group, int64_t b, int64_t r) {
  return group + (b / kBlocksPerUnit) * kQ4_0UnitBytes + 2 * (4 * (b % kBlocksPerUnit) + r);
}
uint8_t* nibbles_at(uint8_t* group, int64_t b, int64_t r) {
  return group + (b / kBlocksPerUnit) * kQ4_0UnitBytes + 64 + 64 * (b % kBlocksPerUnit) + 16 * r;
}

}  // namespace

bool q4_0_rowgroups_fit(int64_t m, int64_t k) {
  return m > 0 && k > 0 && m % kQ4_0GroupRows == 0 && k % kQ4_0UnitElements == 0;
}

void q4_0_to_rowgroups(const void* w, int64_t m, int64_t k, void* out) {
  const auto* src = static_cast<const quant::BlockQ4_0*>(w);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t blocks = k / quant::kQk0, group_bytes = kQ4_0GroupRows * row_bytes(k);
  for (int64_t j = 0; j < m; ++j) {
    uint8_t* group = dst + (j / kQ4_0GroupRows) * group_bytes;
    const int64_t r = j % kQ4_0GroupRows;
    for (int64_t b = 0; b < blocks; ++b) {
      const quant::BlockQ4_0& blk = src[j * blocks + b];
      std::memcpy(scale_at(group, b, r), &blk.d, 2);
      std::memcpy(nibbles_at(group, b, r), blk.qs, sizeof(blk.qs));
    }
  }
}

void q4_0_rowgroups_row(const void* w, int64_t k, int64_t j, quant::BlockQ4_0* out) {
  // const_cast: the helpers above compute addresses only; nothing is written here.
  auto* group = const_cast<uint8_t*>(static_cast<const uint8_t*>(w)) +
                (j / kQ4_0GroupRows) * kQ4_0GroupRows * row_bytes(k);
  const int64_t r = j % kQ4_0GroupRows;
  for (int64_t b = 0; b < k / quant::kQk0; ++b) {
    std::memcpy(&out[b].d, scale_at(group, b, r), 2);
    std::memcpy(out[b].qs, nibbles_at(group, b, r), sizeof(out[b].qs));
  }
}

}  // namespace infera::cpu
