// Causal grouped-query attention on the CPU.
//
// Work item: one kv head g and a block of up to kQueryBlock query positions. The block's queries
// of every q head sharing g are gathered into one matrix Q [group * B, d], so that
//   S = Q . K_g^T   runs as a tiled matmul over the head's contiguous key history (K read once
//                   per block, not once per query and head), then per row
//   softmax over the visible positions (vectorised exp), and
//   out = P . V_g   as a register-accumulated weighted sum of value rows.
// Decode (one query) is the same path with B = 1.
#include <algorithm>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/simd_kernels.h"

namespace infera::cpu {
namespace {
constexpr int64_t kQueryBlock = 32;
}  // namespace

void attention_causal(ThreadPool& pool, const float* q, int64_t n, int64_t hq, int64_t d,
                      const float* k_cache, const float* v_cache, int64_t hkv, int64_t capacity,
                      int64_t start_pos, float scale, float* out) {
  const int64_t group = hq / hkv;
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  pool.parallel_for(hkv * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qblk, scores, panel(static_cast<size_t>(kPanelRows * d));
    for (int64_t item = begin; item < end; ++item) {
      const int64_t g = item / blocks, i0 = (item % blocks) * kQueryBlock;
      const int64_t nb = std::min(kQueryBlock, n - i0);
      const int64_t rows = group * nb;
      const int64_t keys = start_pos + i0 + nb;  // visible to the block's last query
      const float* kg = k_cache + g * capacity * d;
      const float* vg = v_cache + g * capacity * d;
      // Row r = hg * nb + bi holds query i0 + bi of q head g * group + hg.
      qblk.resize(static_cast<size_t>(rows * d));
      for (int64_t hg = 0; hg < group; ++hg)
        for (int64_t bi = 0; bi < nb; ++bi)
          std::copy_n(q + ((i0 + bi) * hq + g * group + hg) * d, d,
                      qblk.data() + (hg * nb + bi) * d);
      scores.resize(static_cast<size_t>(rows * keys));
      matmul_rows(qblk.data(), rows, d, kg, DType::F32, 0, keys, scores.data(), keys, panel.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t hg = r / nb, bi = r % nb;
        const int64_t visible = start_pos + i0 + bi + 1;  // the causal mask
        float* p = scores.data() + r * keys;
        const float inv_sum = 1.0f / softmax_numerators_f32(p, visible, scale);
        for (int64_t t = 0; t < visible; ++t) p[t] *= inv_sum;
        weighted_row_sum_f32(p, visible, vg, d, out + ((i0 + bi) * hq + g * group + hg) * d);
      }
    }
  });
}

}  // namespace infera::cpu
