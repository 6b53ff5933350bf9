// Attention of packed encoder sequences over their own rows (no KV cache), on the CPU.
//
// Keys and values arrive packed [T, kv_heads, d]. One pass copies the values head-major
// ([kv_heads, T, d]) and the keys transposed per key tile ([kv_heads, tile, d, kPackedKeyTile],
// zero past a sequence's end), the layout the outer-product score kernel reads.
// Work item: one sequence, one kv head g, one query tile of up to kPackedQueryTile rows. The
// tile's queries of every q head sharing g form one matrix Q [group * rows, d]. The item visits
// the key tiles (kPackedKeyTile keys, aligned to the sequence start) that overlap the union of
// its rows' windows, and only those:
//   S = Q . K^T   tile by tile with scores_tile_f32 (a local layer at L = 512 computes 5 of 16
//                 key tiles per item),
//   softmax       per row over that row's own visible keys only (no mask is built: a row's
//                 range [lo, hi) is contiguous, since windows and the causal limit are bands),
//   out = P . V   as a register-accumulated weighted sum of the row's visible value rows.
// With `window_tiles` off every item visits all key tiles of its sequence (the dense baseline
// the benchmark compares against); results are identical, only the work differs.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/simd_kernels.h"

namespace infera::cpu {
namespace {
static_assert(kPackedKeyTile == kScoreTileKeys, "a key tile is what the score kernel reads");

struct Item {
  int32_t seq, head, first, rows;  // first: row offset of the query tile within its sequence
};

// Visible key offsets [lo, hi) of the query at offset i in a sequence of `len` rows.
inline void visible_keys(int64_t i, int64_t len, const AttentionParams& p, int64_t& lo,
                         int64_t& hi) {
  lo = 0;
  hi = p.causal ? i + 1 : len;
  if (p.window >= 0) {
    lo = std::max<int64_t>(0, i - p.window);
    hi = std::min<int64_t>(hi, i + p.window + 1);
  }
}

// The key tiles [lo, hi) an item visits (window_tiles: those overlapping its rows' visible keys;
// else every tile of the sequence), and each row's visible keys into row_lo / row_hi when given.
struct TileSpan {
  int64_t lo, hi;
};
TileSpan item_tiles(const Item& item, int64_t len, const AttentionParams& params, bool window_tiles,
                    int64_t* row_lo = nullptr, int64_t* row_hi = nullptr) {
  int64_t lo = len, hi = 0;
  for (int64_t bi = 0; bi < item.rows; ++bi) {
    int64_t rlo = 0, rhi = 0;
    visible_keys(item.first + bi, len, params, rlo, rhi);
    if (row_lo) row_lo[bi] = rlo, row_hi[bi] = rhi;
    lo = std::min(lo, rlo);
    hi = std::max(hi, rhi);
  }
  if (!window_tiles) return {0, len};
  return {lo / kPackedKeyTile * kPackedKeyTile,
          std::min(len, (hi + kPackedKeyTile - 1) / kPackedKeyTile * kPackedKeyTile)};
}

// dst[g, t, :] = src[t, g, :] for t in [0, n): packed rows to head-major.
void to_head_major(ThreadPool& pool, const float* src, int64_t n, int64_t heads, int64_t d,
                   float* dst) {
  pool.parallel_for(n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t)
      for (int64_t g = 0; g < heads; ++g)
        std::memcpy(dst + (g * n + t) * d, src + (t * heads + g) * d,
                    static_cast<size_t>(d) * sizeof(float));
  });
}

// Key tile `tile` of head g, transposed: [d][kPackedKeyTile] at kt + (g * tiles + tile) * d * kK.
// Sequence b's tiles are tile_base[b] .. tile_base[b + 1) and start at its first row.
void to_key_tiles(ThreadPool& pool, const float* k, const BatchDesc& batch,
                  const std::vector<int64_t>& tile_base, int64_t heads, int64_t d, float* kt) {
  const int64_t tiles = tile_base.back(), kk = kPackedKeyTile;
  pool.parallel_for(batch.num_seqs(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t start = batch.query_start[static_cast<size_t>(b)];
      const int64_t len = batch.query_start[static_cast<size_t>(b + 1)] - start;
      for (int64_t g = 0; g < heads; ++g) {
        float* base = kt + (g * tiles + tile_base[static_cast<size_t>(b)]) * d * kk;
        // The last tile's columns past the sequence are zero (their scores are never read).
        std::fill_n(base + (len / kk) * d * kk, (len % kk == 0 ? 0 : d * kk), 0.0f);
        for (int64_t j = 0; j < len; ++j) {
          const float* src = k + ((start + j) * heads + g) * d;
          float* dst = base + (j / kk) * d * kk + j % kk;
          for (int64_t e = 0; e < d; ++e) dst[e * kk] = src[e];
        }
      }
    }
  });
}

}  // namespace

int64_t attention_packed(ThreadPool& pool, const float* q, const float* k, const float* v,
                         int64_t hq, int64_t hkv, int64_t d, const BatchDesc& batch,
                         const AttentionParams& params, bool window_tiles, float* out,
                         std::vector<float>& kv_scratch) {
  const int64_t n = batch.num_tokens(), group = hq / hkv;
  // The buffers are thread-local and only grow: a batch of a shape seen before allocates nothing
  // (tests/model/forward_allocations_test.cpp). References, so the workers use the caller's.
  thread_local std::vector<int64_t> caller_tile_base;
  thread_local std::vector<Item> caller_items;
  std::vector<int64_t>& tile_base = caller_tile_base;
  std::vector<Item>& items = caller_items;
  tile_base.assign(1, 0);
  items.clear();
  for (int64_t b = 0; b < batch.num_seqs(); ++b)
    tile_base.push_back(tile_base.back() +
                        (batch.query_start[static_cast<size_t>(b + 1)] -
                         batch.query_start[static_cast<size_t>(b)] + kPackedKeyTile - 1) /
                            kPackedKeyTile);
  const int64_t tiles = tile_base.back();
  kv_scratch.resize(static_cast<size_t>(hkv * (tiles * kPackedKeyTile + n) * d));
  float* kt = kv_scratch.data();
  float* vh = kt + hkv * tiles * kPackedKeyTile * d;
  to_key_tiles(pool, k, batch, tile_base, hkv, d, kt);
  to_head_major(pool, v, n, hkv, d, vh);

  for (int64_t b = 0; b < batch.num_seqs(); ++b) {
    const int32_t len =
        batch.query_start[static_cast<size_t>(b + 1)] - batch.query_start[static_cast<size_t>(b)];
    for (int64_t g = 0; g < hkv; ++g)
      for (int32_t r = 0; r < len; r += kPackedQueryTile)
        items.push_back({static_cast<int32_t>(b), static_cast<int32_t>(g), r,
                         static_cast<int32_t>(std::min<int64_t>(kPackedQueryTile, len - r))});
  }
  const auto seq_len = [&](int32_t b) {
    return batch.query_start[static_cast<size_t>(b + 1)] -
           batch.query_start[static_cast<size_t>(b)];
  };
  // Every thread's buffers are grown to the batch's largest item before it takes any: which
  // thread takes which item varies from run to run, and a batch seen before must allocate nothing
  // whichever it is (tests/model/forward_allocations_test.cpp).
  int64_t most_rows = 0, most_scores = 0;
  for (const Item& item : items) {
    const TileSpan span = item_tiles(item, seq_len(item.seq), params, window_tiles);
    most_rows = std::max<int64_t>(most_rows, item.rows);
    most_scores = std::max(most_scores, group * item.rows * (span.hi - span.lo));
  }
  std::atomic<size_t> next{0};
  std::atomic<int64_t> tiles_visited{0};
  pool.parallel_for(pool.size(), 1, [&](int64_t, int64_t) {
    thread_local std::vector<float> qblk, scores;
    thread_local std::vector<int64_t> row_lo, row_hi;
    grow_to(qblk, group * most_rows * d);
    grow_to(scores, most_scores);
    grow_to(row_lo, most_rows);
    grow_to(row_hi, most_rows);
    int64_t my_tiles = 0;
    for (size_t it; (it = next.fetch_add(1)) < items.size();) {
      const Item& item = items[it];
      const int64_t start = batch.query_start[static_cast<size_t>(item.seq)];
      const int64_t len = seq_len(item.seq);
      const int64_t nb = item.rows, rows = group * nb, g = item.head;
      const TileSpan span =
          item_tiles(item, len, params, window_tiles, row_lo.data(), row_hi.data());
      const int64_t tile_lo = span.lo, tile_hi = span.hi;
      // Row r = hg * nb + bi holds row first + bi of q head g * group + hg.
      for (int64_t hg = 0; hg < group; ++hg)
        for (int64_t bi = 0; bi < nb; ++bi)
          std::copy_n(q + ((start + item.first + bi) * hq + g * group + hg) * d, d,
                      qblk.data() + (hg * nb + bi) * d);
      const int64_t width = tile_hi - tile_lo;
      const float* key_tiles =
          kt + (g * tiles + tile_base[static_cast<size_t>(item.seq)]) * d * kPackedKeyTile;
      for (int64_t t = tile_lo; t < tile_hi; t += kPackedKeyTile) {
        const int64_t take = std::min(kPackedKeyTile, tile_hi - t);
        scores_tile_f32(qblk.data(), rows, d, key_tiles + (t / kPackedKeyTile) * d * kPackedKeyTile,
                        take, scores.data() + (t - tile_lo), width);
        ++my_tiles;
      }
      const float* values = vh + (g * n + start) * d;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t hg = r / nb, bi = r % nb;
        const int64_t rlo = row_lo[static_cast<size_t>(bi)], rhi = row_hi[static_cast<size_t>(bi)];
        float* o = out + ((start + item.first + bi) * hq + g * group + hg) * d;
        float* p = scores.data() + r * width + (rlo - tile_lo);
        const float inv_sum = 1.0f / softmax_numerators_f32(p, rhi - rlo, params.scale);
        for (int64_t t = 0; t < rhi - rlo; ++t) p[t] *= inv_sum;
        weighted_row_sum(p, rhi - rlo, values + rlo * d, DType::F32, d, o, false);
      }
    }
    tiles_visited.fetch_add(my_tiles);
  });
  return tiles_visited.load();
}

}  // namespace infera::cpu
