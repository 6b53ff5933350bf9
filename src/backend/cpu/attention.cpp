// Grouped-query attention over the paged KV cache, on the CPU.
//
// Work item: one sequence, one kv head g and a block of up to kQueryBlock of the sequence's rows.
// The block's queries of every q head sharing g are gathered into one matrix Q [group * B, d], so
//   S = Q . K_g^T   runs as a tiled matmul over runs of head g's contiguous rows (a block, or
//                   several when their ids are consecutive: one call and one sequential stream
//                   over them), K read once per item, not once per query and head, only over the
//                   keys some row of the item may see (the causal limit, a local window); then,
//                   per row,
//   softmax over that row's visible keys (vectorised exp), and
//   out = P . V_g   as a register-accumulated weighted sum of value rows, run by run in key
//                   order (so the result is bit-identical to an unpaged sum).
// Decode (one row per sequence) is the same path with B = 1.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/env_switch.h"
#include "backend/cpu/simd_kernels.h"
#include "core/dtype_convert.h"

namespace infera::cpu {
namespace {
constexpr int64_t kQueryBlock = 32;

struct Item {
  int32_t seq, head, first_row, rows;
  // kv heads head, head + 1, ...: 2 for a decode row's pair (attention_paired_heads), else 1.
  int32_t heads;
};

std::atomic<bool>& paired_heads_setting() {
  static std::atomic<bool> on{on_off_from_env("INFERA_CPU_ATTN_PAIRED_HEADS", true)};
  return on;
}

// Visible key range [lo, hi) of a query at `pos` in a sequence of `len` keys.
inline void key_range(int64_t pos, int64_t len, const AttentionParams& p, int64_t& lo,
                      int64_t& hi) {
  hi = p.causal ? pos + 1 : len;
  lo = 0;
  if (p.window >= 0) {
    lo = std::max<int64_t>(0, pos - p.window);
    hi = std::min<int64_t>(hi, pos + p.window + 1);
  }
  hi = std::min(hi, len);
}

// The union [lo, hi) of an item's rows' key ranges, and each row's into row_lo / row_hi when given.
struct KeySpan {
  int64_t lo, hi;
};
KeySpan item_keys(const Item& item, const BatchDesc& batch, const AttentionParams& params,
                  int64_t* row_lo = nullptr, int64_t* row_hi = nullptr) {
  const int64_t len = batch.seq_lens[static_cast<size_t>(item.seq)];
  int64_t lo = len, hi = 0;
  for (int64_t bi = 0; bi < item.rows; ++bi) {
    int64_t rlo = 0, rhi = 0;
    key_range(batch.positions[static_cast<size_t>(item.first_row + bi)], len, params, rlo, rhi);
    if (row_lo) row_lo[bi] = rlo, row_hi[bi] = rhi;
    lo = std::min(lo, rlo);
    hi = std::max(hi, rhi);
  }
  return {lo, hi};
}

// Keys [t, t + n) with t < hi: the longest run from t, up to hi, that is contiguous in a head's
// pool (the rest of t's block, then every following block whose id is one more than the last).
inline int64_t contiguous_run(const int32_t* table, int64_t t, int64_t hi, int64_t bs) {
  int64_t blk = t / bs, end = std::min(hi, (blk + 1) * bs);
  while (end < hi && table[blk + 1] == table[blk] + 1) end = std::min(hi, (++blk + 1) * bs);
  return end - t;
}

}  // namespace

bool attention_paired_heads() { return paired_heads_setting().load(); }
void set_attention_paired_heads(bool on) { paired_heads_setting().store(on); }

void kv_write(const float* k, const float* v, int64_t n, const int32_t* slots,
              const PagedPools<void*>& pools) {
  const int64_t d = pools.head_dim, kv_heads = pools.kv_heads, bs = pools.block_size;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t block = slots[i] / bs, offset = slots[i] % bs;
    for (int64_t h = 0; h < kv_heads; ++h) {
      const int64_t dst = pools.byte_offset(h, block, offset);
      const float* ks = k + (i * kv_heads + h) * d;
      const float* vs = v + (i * kv_heads + h) * d;
      char* const key_row = static_cast<char*>(pools.keys) + dst;
      char* const value_row = static_cast<char*>(pools.values) + dst;
      if (pools.dtype == DType::F32) {
        std::memcpy(key_row, ks, static_cast<size_t>(d) * 4);
        std::memcpy(value_row, vs, static_cast<size_t>(d) * 4);
      } else if (pools.dtype == DType::BF16) {
        // In vectors: the scalar loop was ~4 us of each decode step's serial time per layer.
        round_to_bf16(ks, d, reinterpret_cast<uint16_t*>(key_row));
        round_to_bf16(vs, d, reinterpret_cast<uint16_t*>(value_row));
      } else {
        uint16_t* kd = reinterpret_cast<uint16_t*>(key_row);
        uint16_t* vd = reinterpret_cast<uint16_t*>(value_row);
        for (int64_t j = 0; j < d; ++j) {
          kd[j] = f32_to_f16(ks[j]);
          vd[j] = f32_to_f16(vs[j]);
        }
      }
    }
  }
}

void attention_paged(ThreadPool& pool, const float* q, int64_t hq, const PagedKv& kv,
                     const BatchDesc& batch, const AttentionParams& params, float* out) {
  const int64_t d = kv.head_dim, hkv = kv.kv_heads, bs = kv.block_size;
  const int64_t group = hq / hkv;
  // Every buffer here is thread-local and only grows: a forward pass allocates nothing once the
  // largest batch has been seen.
  thread_local std::vector<Item> caller_items;
  std::vector<Item>& items = caller_items;  // a reference, so the workers see the caller's list
  items.clear();
  const bool pair = attention_paired_heads() && hkv % 2 == 0;
  for (int64_t b = 0; b < batch.num_seqs(); ++b) {
    const int32_t begin = batch.query_start[static_cast<size_t>(b)];
    const int32_t end = batch.query_start[static_cast<size_t>(b + 1)];
    const int32_t heads = pair && end - begin == 1 ? 2 : 1;  // a decode row: two heads an item
    for (int64_t g = 0; g < hkv; g += heads)
      for (int32_t r = begin; r < end; r += kQueryBlock)
        items.push_back({static_cast<int32_t>(b), static_cast<int32_t>(g), r,
                         static_cast<int32_t>(std::min<int64_t>(kQueryBlock, end - r)), heads});
  }
  // Every thread's buffers are grown to the batch's largest item before it takes any: which
  // thread takes which item varies from run to run, and a batch seen before must allocate nothing
  // whichever it is (tests/model/forward_allocations_test.cpp).
  int64_t most_rows = 0, most_q = 0, most_scores = 0;
  for (const Item& item : items) {
    const KeySpan span = item_keys(item, batch, params);
    const int64_t rows = group * item.rows;
    most_rows = std::max<int64_t>(most_rows, item.rows);
    most_q = std::max(most_q, item.heads * rows);
    most_scores =
        std::max(most_scores, item.heads * rows * std::max<int64_t>(span.hi - span.lo, 1));
  }
  // Items differ in cost (a long prefill block vs a decode row): threads take them one by one.
  std::atomic<size_t> next{0};
  pool.parallel_for(pool.size(), 1, [&](int64_t, int64_t) {
    thread_local std::vector<float> qblk, scores, panel;
    thread_local std::vector<int64_t> row_lo, row_hi, order;
    grow_to(panel, kPanelRows * d);
    grow_to(qblk, most_q * d);
    grow_to(scores, most_scores);
    grow_to(row_lo, most_rows);
    grow_to(row_hi, most_rows);
    order.reserve(static_cast<size_t>(group * most_rows));
    for (size_t it; (it = next.fetch_add(1)) < items.size();) {
      const Item& item = items[it];
      const int64_t nb = item.rows, rows = group * nb, g0 = item.head, heads = item.heads;
      const int64_t len = batch.seq_lens[static_cast<size_t>(item.seq)];
      const int32_t* table = batch.block_table.data() + int64_t{item.seq} * batch.max_blocks;
      // Row r = hg * nb + bi holds row first_row + bi of q head (g0 + h) * group + hg of head h.
      const KeySpan span = item_keys(item, batch, params, row_lo.data(), row_hi.data());
      const int64_t lo = span.lo, hi = span.hi;
      // Head g0 + h's rows at qblk + h * rows * d and its scores at scores + h * rows * width.
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t hg = 0; hg < group; ++hg)
          for (int64_t bi = 0; bi < nb; ++bi)
            std::copy_n(q + ((item.first_row + bi) * hq + (g0 + h) * group + hg) * d, d,
                        qblk.data() + (h * rows + hg * nb + bi) * d);
      const int64_t width = std::max<int64_t>(hi - lo, 1);
      // S over keys [lo, hi), one contiguous run of the pool at a time; a pair of heads key by key
      // in turn (two streams in flight; the same scores).
      for (int64_t t = lo; t < hi;) {
        const int64_t take = contiguous_run(table, t, hi, bs);
        const char* base =
            static_cast<const char*>(kv.keys) + kv.byte_offset(g0, table[t / bs], t % bs);
        if (heads == 2) {
          const char* base1 =
              static_cast<const char*>(kv.keys) + kv.byte_offset(g0 + 1, table[t / bs], t % bs);
          matmul_rows_pair(qblk.data(), qblk.data() + rows * d, rows, d, base, base1, kv.dtype,
                           take, scores.data() + (t - lo), scores.data() + rows * width + (t - lo),
                           width, panel.data());
        } else {
          matmul_rows(qblk.data(), rows, d, base, kv.dtype, 0, take, scores.data() + (t - lo),
                      width, panel.data());
        }
        t += take;
      }
      // Value row t of head g in the paged pool (its run is contiguous_run(table, t, ...) long).
      const auto value_row = [&](int64_t g, int64_t t) {
        return static_cast<const char*>(kv.values) + kv.byte_offset(g, table[t / bs], t % bs);
      };
      const auto head_scores = [&](int64_t h) { return scores.data() + h * rows * width; };
      const auto out_row = [&](int64_t h, int64_t r) {  // q head row r's output, head g0 + h
        return out + ((item.first_row + r % nb) * hq + (g0 + h) * group + r / nb) * d;
      };
      // Softmax of every row of head g0 + h; the rows with keys, in order of position, to ord.
      const auto softmax_rows = [&](int64_t h, std::vector<int64_t>& ord) {
        ord.clear();
        for (int64_t bi = 0; bi < nb; ++bi)
          for (int64_t hg = 0; hg < group; ++hg) {
            const int64_t r = hg * nb + bi;
            const int64_t rlo = row_lo[static_cast<size_t>(bi)],
                          rhi = row_hi[static_cast<size_t>(bi)];
            if (rhi <= rlo) {  // no visible key (cannot happen causally): zeros, not a NaN
              std::fill_n(out_row(h, r), d, 0.0f);
              continue;
            }
            float* pr = head_scores(h) + r * width + (rlo - lo);
            const float inv_sum = 1.0f / softmax_numerators_f32(pr, rhi - rlo, params.scale);
            for (int64_t t = 0; t < rhi - rlo; ++t) pr[t] *= inv_sum;
            ord.push_back(r);
          }
      };
      // out = P . V for kWeightedRows rows at a time (rows in order of position, so a tile's
      // causal ranges nearly coincide): their common keys [rlo, min rhi) together, each value row
      // loaded once for all of them, then each row's own remaining keys; every output still adds
      // its keys in order, so the result is the one-row sum's bit for bit.
      const auto weighted_rows = [&](int64_t h, const std::vector<int64_t>& ord) {
        const int64_t g = g0 + h;
        for (size_t first = 0; first < ord.size(); first += kWeightedRows) {
          const int n_rows = static_cast<int>(std::min<size_t>(kWeightedRows, ord.size() - first));
          const float* p[kWeightedRows];
          float* o[kWeightedRows];
          int64_t rlo = 0, common_hi = len;
          bool same_lo = true;
          for (int j = 0; j < n_rows; ++j) {
            const int64_t r = ord[first + static_cast<size_t>(j)], bi = r % nb;
            const int64_t row_start = row_lo[static_cast<size_t>(bi)];
            if (j == 0) rlo = row_start;
            same_lo = same_lo && row_start == rlo;
            common_hi = std::min(common_hi, row_hi[static_cast<size_t>(bi)]);
            p[j] = head_scores(h) + r * width + (row_start - lo);
            o[j] = out_row(h, r);
          }
          const int64_t joint_hi = same_lo ? common_hi : rlo;  // [rlo, joint_hi) together
          for (int64_t t = rlo; t < joint_hi;) {
            const int64_t take = contiguous_run(table, t, joint_hi, bs);
            const float* pt[kWeightedRows];
            for (int j = 0; j < n_rows; ++j) pt[j] = p[j] + (t - rlo);
            weighted_rows_sum(pt, n_rows, take, value_row(g, t), kv.dtype, d, o, t != rlo);
            t += take;
          }
          for (int j = 0; j < n_rows; ++j) {  // each row's keys past the joint ones
            const int64_t bi = ord[first + static_cast<size_t>(j)] % nb;
            const int64_t row_start = row_lo[static_cast<size_t>(bi)];
            const int64_t rhi = row_hi[static_cast<size_t>(bi)];
            for (int64_t t = same_lo ? joint_hi : row_start; t < rhi;) {
              const int64_t take = contiguous_run(table, t, rhi, bs);
              weighted_row_sum(p[j] + (t - row_start), take, value_row(g, t), kv.dtype, d, o[j],
                               t != row_start);
              t += take;
            }
          }
        }
      };
      // Each head's P . V alone: two value streams taking turns 32 keys at a time (the calls'
      // chunks) measured x0.977 at 2,048 positions (bench/reference/lead18_cpu/).
      for (int64_t h = 0; h < heads; ++h) {
        softmax_rows(h, order);
        weighted_rows(h, order);
      }
    }
  });
}

}  // namespace infera::cpu
