// CPU SIMD kernels of attention and the MLP on every SIMD target this CPU runs:
// - the probability-weighted sum of value rows for several query rows at once (weighted_rows_sum,
//   the P . V of prefill): bit-identical to the one-row kernel row by row (the paged attention
//   relies on that: a row's output must not depend on which rows share its tile), and within f32
//   rounding of a scalar sum in double;
// - decode's attention scores, several query rows (a kv head's group) against each key row loaded
//   once (matmul_rows with 2 or 3 rows): bit-identical to one row at a time, within f32 rounding
//   of a double dot product;
// - two heads' scores key by key in turn (matmul_rows_pair, a decode row's pair of kv heads): the
//   bits of one matmul_rows per head, for decode row counts and the larger ones it hands on; and
//   the paged attention with paired heads equals it without them, bit for bit, on decode batches
//   of several sequences (even and odd kv head counts, f32 / bf16 / f16 caches, scattered blocks);
// - silu(g) * u (silu_mul_f32): within f32 rounding of the formula in double, saturating at large
//   |g|, and the same bits whichever range a caller passes;
// - f32 -> bf16 rounding of the KV cache's rows (round_to_bf16): the scalar conversion's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "core/dtype_convert.h"
#include "quant_matmul_util.h"

namespace infera::test {
namespace {

// Value rows stored as `type`, and the floats they hold.
void make_values(DType type, int64_t count, int64_t d, std::mt19937& rng,
                 std::vector<uint8_t>& bytes, std::vector<float>& values) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t n = static_cast<size_t>(count * d);
  values.resize(n);
  bytes.resize(n * (type == DType::F32 ? 4 : 2));
  for (size_t i = 0; i < n; ++i) {
    const float x = dist(rng);
    if (type == DType::F32) {
      values[i] = x;
      std::memcpy(bytes.data() + 4 * i, &x, 4);
    } else {
      const uint16_t h = type == DType::BF16 ? f32_to_bf16(x) : f32_to_f16(x);
      values[i] = type == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  }
}

TEST(AttentionKernels, WeightedRowsSumEqualsOneRowSumsOnEverySimdTarget) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> prob(0.0f, 1.0f);
  for_each_simd_target([&] {
    for (const DType type : {DType::F32, DType::BF16, DType::F16}) {
      for (const int64_t d : {37, 64, 128, 256}) {
        for (const int64_t count : {1, 5, 70}) {
          std::vector<uint8_t> bytes;
          std::vector<float> values;
          make_values(type, count, d, rng, bytes, values);
          for (int rows = 1; rows <= cpu::kWeightedRows; ++rows) {
            for (const bool accumulate : {false, true}) {
              SCOPED_TRACE(testing::Message()
                           << dtype_name(type) << " d=" << d << " count=" << count
                           << " rows=" << rows << " accumulate=" << accumulate);
              std::vector<std::vector<float>> p(rows), start(rows), together(rows), alone(rows);
              const float* pp[cpu::kWeightedRows];
              float* outs[cpu::kWeightedRows];
              for (int r = 0; r < rows; ++r) {
                for (int64_t t = 0; t < count; ++t) p[r].push_back(prob(rng));
                for (int64_t c = 0; c < d; ++c) start[r].push_back(prob(rng) - 0.5f);
                together[r] = start[r];
                alone[r] = start[r];
                pp[r] = p[r].data();
                outs[r] = together[r].data();
              }
              cpu::weighted_rows_sum(pp, rows, count, bytes.data(), type, d, outs, accumulate);
              for (int r = 0; r < rows; ++r) {
                cpu::weighted_row_sum(p[r].data(), count, bytes.data(), type, d, alone[r].data(),
                                      accumulate);
                ASSERT_EQ(0, std::memcmp(together[r].data(), alone[r].data(), size_t(d) * 4))
                    << "row " << r;
                for (int64_t c = 0; c < d; ++c) {
                  double want = accumulate ? start[r][size_t(c)] : 0.0, mag = std::fabs(want);
                  for (int64_t t = 0; t < count; ++t) {
                    const double term = double(p[r][size_t(t)]) * values[size_t(t * d + c)];
                    want += term;
                    mag += std::fabs(term);
                  }
                  const double got = together[r][size_t(c)];
                  ASSERT_TRUE(std::fabs(got - want) <= 1e-6 * (mag + 1.0))  // NaN fails
                      << "row " << r << " element " << c << ": " << got << " vs " << want;
                }
              }
            }
          }
        }
      }
    }
  });
}

TEST(AttentionKernels, ScoresOfFewQueryRowsEqualOneRowAtATimeOnEverySimdTarget) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for_each_simd_target([&] {
    for (const DType type : {DType::F32, DType::BF16, DType::F16}) {
      for (const int64_t k : {37, 64, 128, 130}) {
        for (const int64_t keys : {1, 5, 33}) {
          std::vector<uint8_t> bytes;
          std::vector<float> kv;
          make_values(type, keys, k, rng, bytes, kv);
          for (const int64_t n : {2, 3}) {
            SCOPED_TRACE(testing::Message() << dtype_name(type) << " k=" << k << " keys=" << keys
                                            << " rows=" << n);
            std::vector<float> q(size_t(n * k)), panel(size_t(cpu::kPanelRows * k));
            for (float& x : q) x = dist(rng);
            const int64_t ldo = keys + 3;  // a stride wider than the row, as the attention's
            std::vector<float> together(size_t(n * ldo), -7.0f), alone(together);
            cpu::matmul_rows(q.data(), n, k, bytes.data(), type, 0, keys, together.data(), ldo,
                             panel.data());
            for (int64_t i = 0; i < n; ++i)
              cpu::matmul_rows(q.data() + i * k, 1, k, bytes.data(), type, 0, keys,
                               alone.data() + i * ldo, ldo, panel.data());
            ASSERT_EQ(0, std::memcmp(together.data(), alone.data(), together.size() * 4));
            for (int64_t i = 0; i < n; ++i)
              for (int64_t j = 0; j < keys; ++j) {
                double want = 0, mag = 0;
                for (int64_t e = 0; e < k; ++e) {
                  const double term = double(q[size_t(i * k + e)]) * kv[size_t(j * k + e)];
                  want += term;
                  mag += std::fabs(term);
                }
                const double got = together[size_t(i * ldo + j)];
                ASSERT_TRUE(std::fabs(got - want) <= 1e-6 * (mag + 1.0))  // NaN fails
                    << "row " << i << " key " << j << ": " << got << " vs " << want;
              }
          }
        }
      }
    }
  });
}

TEST(AttentionKernels, PairedScoresEqualOneCallPerHeadOnEverySimdTarget) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for_each_simd_target([&] {
    for (const DType type : {DType::F32, DType::BF16, DType::F16}) {
      for (const int64_t k : {37, 128}) {
        for (const int64_t keys : {1, 5, 33}) {
          std::vector<uint8_t> a_bytes, b_bytes;
          std::vector<float> a_kv, b_kv;
          make_values(type, keys, k, rng, a_bytes, a_kv);
          make_values(type, keys, k, rng, b_bytes, b_kv);
          for (const int64_t n : {1, 2, 3, 4, 6}) {
            SCOPED_TRACE(testing::Message() << dtype_name(type) << " k=" << k << " keys=" << keys
                                            << " rows=" << n);
            std::vector<float> qa(size_t(n * k)), qb(size_t(n * k)),
                panel(size_t(cpu::kPanelRows * k));
            for (float& x : qa) x = dist(rng);
            for (float& x : qb) x = dist(rng);
            const int64_t ldo = keys + 3;
            std::vector<float> pa(size_t(n * ldo), -7.0f), pb(pa), sa(pa), sb(pa);
            cpu::matmul_rows_pair(qa.data(), qb.data(), n, k, a_bytes.data(), b_bytes.data(), type,
                                  keys, pa.data(), pb.data(), ldo, panel.data());
            cpu::matmul_rows(qa.data(), n, k, a_bytes.data(), type, 0, keys, sa.data(), ldo,
                             panel.data());
            cpu::matmul_rows(qb.data(), n, k, b_bytes.data(), type, 0, keys, sb.data(), ldo,
                             panel.data());
            ASSERT_EQ(0, std::memcmp(pa.data(), sa.data(), pa.size() * 4));
            ASSERT_EQ(0, std::memcmp(pb.data(), sb.data(), pb.size() * 4));
            for (float x : pa) ASSERT_FALSE(std::isnan(x));
            for (float x : pb) ASSERT_FALSE(std::isnan(x));
          }
        }
      }
    }
  });
}

TEST(AttentionKernels, PairedHeadsChangeNoBitOfDecodeAttention) {
  struct Restore {
    bool saved = cpu::attention_paired_heads();
    ~Restore() { cpu::set_attention_paired_heads(saved); }
  } restore;
  std::mt19937 rng(13);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  cpu::ThreadPool pool(2);
  const int64_t d = 128, bs = 16, num_blocks = 24;
  for (const DType type : {DType::F32, DType::BF16, DType::F16}) {
    for (const int64_t hkv : {2, 3, 4}) {
      const int64_t hq = 2 * hkv;
      SCOPED_TRACE(testing::Message() << dtype_name(type) << " kv heads " << hkv);
      // Pools [hkv, num_blocks, bs, d] of random values.
      std::vector<uint8_t> keys, values;
      std::vector<float> unused;
      make_values(type, hkv * num_blocks * bs, d, rng, keys, unused);
      make_values(type, hkv * num_blocks * bs, d, rng, values, unused);
      const cpu::PagedKv kv{keys.data(), values.data(), type, hkv, num_blocks, bs, d};
      // Three decode rows: sequences of 1, 40 and 150 keys, blocks out of order (runs of one
      // and of several blocks).
      BatchDesc batch;
      const std::vector<int32_t> lens = {1, 40, 150};
      batch.max_blocks = 10;
      const std::vector<std::vector<int32_t>> tables = {
          {5}, {2, 3, 9}, {11, 12, 13, 0, 1, 7, 8, 14, 15, 16}};
      batch.query_start = {0};
      for (size_t b = 0; b < lens.size(); ++b) {
        batch.tokens.push_back(1);
        batch.positions.push_back(lens[b] - 1);
        batch.slots.push_back(tables[b][size_t((lens[b] - 1) / bs)] * int32_t(bs) +
                              (lens[b] - 1) % int32_t(bs));
        batch.query_start.push_back(int32_t(b + 1));
        batch.seq_lens.push_back(lens[b]);
        std::vector<int32_t> row = tables[b];
        row.resize(size_t(batch.max_blocks), -1);
        batch.block_table.insert(batch.block_table.end(), row.begin(), row.end());
      }
      std::vector<float> q(size_t(3 * hq * d));
      for (float& x : q) x = dist(rng);
      const AttentionParams params{.scale = 0.088f};
      std::vector<float> paired(q.size(), -7.0f), single(q.size(), -7.0f);
      cpu::set_attention_paired_heads(true);
      cpu::attention_paged(pool, q.data(), hq, kv, batch, params, paired.data());
      cpu::set_attention_paired_heads(false);
      cpu::attention_paged(pool, q.data(), hq, kv, batch, params, single.data());
      for (float x : paired) ASSERT_FALSE(std::isnan(x));
      ASSERT_EQ(0, std::memcmp(paired.data(), single.data(), paired.size() * 4));
      // Not a vacuous comparison: every output was written.
      for (float x : paired) ASSERT_NE(x, -7.0f);
    }
  }
}

TEST(CpuKernels, SiluMulFollowsTheFormulaOnEverySimdTarget) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> g(301), u(301);
  for (size_t i = 0; i < g.size(); ++i) g[i] = dist(rng), u[i] = dist(rng);
  const float extremes[] = {-200.0f, -104.5f, -90.0f, -88.0f, 0.0f, -0.0f, 88.0f, 90.0f, 200.0f};
  for (size_t i = 0; i < std::size(extremes); ++i) g[3 * i] = extremes[i];
  for_each_simd_target([&] {
    std::vector<float> whole(g.size()), pieces(g.size());
    cpu::silu_mul_f32(g.data(), u.data(), whole.data(), int64_t(g.size()));
    for (size_t at = 0, len = 1; at < g.size(); at += len, len = len % 23 + 1) {
      const size_t n = std::min(len, g.size() - at);
      cpu::silu_mul_f32(g.data() + at, u.data() + at, pieces.data() + at, int64_t(n));
    }
    ASSERT_EQ(0, std::memcmp(whole.data(), pieces.data(), whole.size() * 4));
    for (size_t i = 0; i < g.size(); ++i) {
      const double want = double(g[i]) / (1.0 + std::exp(-double(g[i]))) * u[i];
      ASSERT_TRUE(std::fabs(whole[i] - want) <= 1e-6 * std::fabs(want) + 1e-30)  // NaN fails
          << i << ": silu(" << g[i] << ") * " << u[i] << " = " << whole[i] << ", want " << want;
    }
  });
}

// The KV cache's bf16 rows (kv_write): the vector rounding writes the scalar conversion's bits
// for any float: random bit patterns (NaNs, infinities, subnormals), exact halfway cases with an
// even and an odd upper half, and every length up to 67 (the tails). A truncating conversion, a
// round-half-up one or a signalling NaN fails.
TEST(CpuKernels, RoundToBf16WritesTheScalarConversionOnEverySimdTarget) {
  std::mt19937 rng(12);
  std::vector<float> x(4099);
  for (size_t i = 0; i < x.size(); ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (i % 4 == 1) bits = (bits & 0xffff0000u) | 0x8000u;  // a tie: to the even neighbour
    if (i % 4 == 2) bits = (bits & 0x807fffffu) | 0x7f800000u;  // an infinity or a NaN
    std::memcpy(&x[i], &bits, 4);
  }
  for_each_simd_target([&] {
    std::vector<uint16_t> got(x.size());
    cpu::round_to_bf16(x.data(), int64_t(x.size()), got.data());
    for (size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(got[i], f32_to_bf16(x[i])) << i << ": " << x[i];
    for (int64_t n = 0; n <= 67; ++n) {
      std::vector<uint16_t> part(static_cast<size_t>(n) + 1, 0xabcd);
      cpu::round_to_bf16(x.data() + 1, n, part.data());
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(part[size_t(i)], got[size_t(i) + 1]) << n;
      ASSERT_EQ(part[size_t(n)], 0xabcd) << "wrote past " << n;
    }
  });
}

}  // namespace
}  // namespace infera::test
