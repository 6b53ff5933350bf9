// The encoder ops of ops/backend.h (LayerNorm, GELU, GeGLU, bias, mean pooling, packed attention),
// written once and run by the harness on every backend and SIMD target against scalar references
// in double written here. Shapes include 1 row, odd widths and non-multiples of the vector widths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/op_harness.h"
#include "backend/registry.h"
#include "infera/error.h"
#include "ops/backend.h"

namespace infera::test {
namespace {

using Doubles = std::vector<double>;
const DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};

double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Packed sequences of these lengths, with positions = offsets (the encoder batch shape).
BatchDesc packed_batch(const std::vector<int32_t>& lengths) {
  BatchDesc d;
  d.query_start.push_back(0);
  for (int32_t len : lengths) {
    for (int32_t i = 0; i < len; ++i) {
      d.tokens.push_back(0);
      d.positions.push_back(i);
    }
    d.query_start.push_back(static_cast<int32_t>(d.tokens.size()));
    d.seq_lens.push_back(len);
  }
  return d;
}

class EncoderOps : public ::testing::TestWithParam<HarnessBackend> {};

TEST_P(EncoderOps, LayerNorm) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(21);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::LayerNorm, {wt})) {
        report.declined(Op::LayerNorm, wt);
        continue;
      }
      for (auto [rows, dim, with_bias, in_place] : {std::tuple{1, 1, false, false},
                                                    {1, 7, true, true},
                                                    {3, 64, false, true},
                                                    {17, 129, true, false},
                                                    {40, 1024, false, false}}) {
        // An offset mean checks that the variance is of deviations, not E[x^2] - E[x]^2.
        HostData x = make_host_data(DType::F32, size_t(rows * dim), rng, 3.0f);
        for (float& v : x.values) v += 20.0f;
        std::memcpy(x.bytes.data(), x.values.data(), x.bytes.size());
        HostData w = make_host_data(wt, size_t(dim), rng);
        HostData bias = make_host_data(wt, size_t(dim), rng);
        const std::vector<float> xin = x.values;
        Tensor xt = to_backend(b, "x", DType::F32, {rows, dim}, x);
        Tensor wtn = to_backend(b, "w", wt, {dim}, w);
        Tensor bt = with_bias ? to_backend(b, "b", wt, {dim}, bias) : Tensor();
        Tensor out = in_place ? xt : b.alloc("out", DType::F32, {rows, dim});
        b.layernorm(xt, wtn, bt, 1e-5f, out);
        Doubles want(xin.size());
        for (int r = 0; r < rows; ++r) {
          double mean = 0, var = 0;
          for (int i = 0; i < dim; ++i) mean += xin[size_t(r * dim + i)];
          mean /= dim;
          for (int i = 0; i < dim; ++i)
            var += (xin[size_t(r * dim + i)] - mean) * (xin[size_t(r * dim + i)] - mean);
          const double inv = 1.0 / std::sqrt(var / dim + 1e-5);
          for (int i = 0; i < dim; ++i)
            want[size_t(r * dim + i)] =
                (xin[size_t(r * dim + i)] - mean) * inv * w.values[size_t(i)] +
                (with_bias ? bias.values[size_t(i)] : 0.0);
        }
        report.check(Op::LayerNorm, wt,
                     std::to_string(rows) + "x" + std::to_string(dim) + (with_bias ? " bias" : "") +
                         (in_place ? " in place" : ""),
                     read_back(b, out), want);
      }
    }
  });
}

TEST_P(EncoderOps, GeluGegluAndBias) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(22);
    const bool gelu_ok = b.supports(Op::Gelu, {DType::F32}) && b.supports(Op::Geglu, {DType::F32});
    if (!gelu_ok) report.declined(Op::Geglu, DType::F32);
    for (auto [rows, width, alias] :
         {std::tuple{1, 1, false}, {1, 7, true}, {3, 1000, false}, {2, 4099, true}}) {
      if (!gelu_ok) break;
      const std::string name = std::to_string(rows) + "x" + std::to_string(width);
      // Wide enough to reach both tails of erf (|x| up to 6).
      HostData in = make_host_data(DType::F32, size_t(rows * width), rng, 6.0f);
      HostData gate = make_host_data(DType::F32, size_t(rows * width), rng, 2.0f);
      const std::vector<float> xin = in.values, gin = gate.values;
      Tensor it = to_backend(b, "input", DType::F32, {rows, width}, in);
      Tensor gt = to_backend(b, "gate", DType::F32, {rows, width}, gate);
      Tensor g1 = b.alloc("gelu", DType::F32, {rows, width});
      b.gelu(it, g1);
      Doubles want(xin.size());
      for (size_t i = 0; i < xin.size(); ++i) want[i] = gelu_ref(xin[i]);
      report.check(Op::Gelu, DType::F32, name, read_back(b, g1), want);

      Tensor out = alias ? gt : b.alloc("out", DType::F32, {rows, width});
      b.geglu(it, gt, out);
      for (size_t i = 0; i < xin.size(); ++i) want[i] = gelu_ref(xin[i]) * gin[i];
      report.check(Op::Geglu, DType::F32, name + (alias ? " out=gate" : ""), read_back(b, out),
                   want);
      if (alias) {  // in place on x as well
        b.gelu(it, it);
        for (size_t i = 0; i < xin.size(); ++i) want[i] = gelu_ref(xin[i]);
        report.check(Op::Gelu, DType::F32, name + " in place", read_back(b, it), want);
      }
    }
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::AddBias, {wt})) {
        report.declined(Op::AddBias, wt);
        continue;
      }
      for (auto [rows, width, alias] : {std::tuple{1, 1, false}, {5, 33, true}, {9, 4096, false}}) {
        HostData x = make_host_data(DType::F32, size_t(rows * width), rng);
        HostData bias = make_host_data(wt, size_t(width), rng);
        const std::vector<float> xin = x.values;
        Tensor xt = to_backend(b, "x", DType::F32, {rows, width}, x);
        Tensor bt = to_backend(b, "bias", wt, {width}, bias);
        Tensor out = alias ? xt : b.alloc("out", DType::F32, {rows, width});
        b.add_bias(xt, bt, out);
        Doubles want(xin.size());
        for (int r = 0; r < rows; ++r)
          for (int i = 0; i < width; ++i)
            want[size_t(r * width + i)] =
                double(xin[size_t(r * width + i)]) + bias.values[size_t(i)];
        report.check(Op::AddBias, wt, std::to_string(rows) + "x" + std::to_string(width),
                     read_back(b, out), want);
      }
    }
  });
}

TEST_P(EncoderOps, MeanPool) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(23);
    if (!b.supports(Op::MeanPool, {DType::F32})) return report.declined(Op::MeanPool, DType::F32);
    for (const std::vector<int32_t>& lengths :
         {std::vector<int32_t>{1}, {3, 1, 40}, {93, 93, 7, 512}}) {
      const BatchDesc d = packed_batch(lengths);
      const Batch batch = b.upload_batch(d);
      const int64_t n = d.num_tokens(), width = 67, seqs = d.num_seqs();
      HostData x = make_host_data(DType::F32, size_t(n * width), rng, 2.0f);
      Tensor xt = to_backend(b, "x", DType::F32, {n, width}, x);
      Tensor out = b.alloc("out", DType::F32, {seqs, width});
      b.mean_pool(xt, batch, out);
      Doubles want(size_t(seqs * width), 0.0);
      for (int64_t s = 0; s < seqs; ++s) {
        const int32_t lo = d.query_start[size_t(s)], hi = d.query_start[size_t(s + 1)];
        for (int32_t r = lo; r < hi; ++r)
          for (int64_t i = 0; i < width; ++i)
            want[size_t(s * width + i)] += x.values[size_t(r * width + i)];
        for (int64_t i = 0; i < width; ++i) want[size_t(s * width + i)] /= (hi - lo);
      }
      report.check(Op::MeanPool, DType::F32, std::to_string(seqs) + " sequences", read_back(b, out),
                   want);
    }
  });
}

// --- packed (encoder) attention ----------------------------------------------------------------

struct PackedCase {
  std::string name;
  std::vector<int32_t> lengths;
  int32_t hq, hkv, d;
  AttentionParams params;
};

// The dense masked reference: every score of the sequence's L x L matrix, keys outside the row's
// window (or after it, causally) set to -infinity, softmax over the whole row, in double.
Doubles dense_masked_reference(const PackedCase& c, const BatchDesc& d, const std::vector<float>& q,
                               const std::vector<float>& k, const std::vector<float>& v) {
  Doubles out(q.size());
  const int64_t group = c.hq / c.hkv;
  for (int64_t s = 0; s < d.num_seqs(); ++s) {
    const int64_t start = d.query_start[size_t(s)], len = d.query_start[size_t(s + 1)] - start;
    std::vector<double> row(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i)
      for (int64_t h = 0; h < c.hq; ++h) {
        const int64_t g = h / group;
        double mx = -INFINITY;
        for (int64_t j = 0; j < len; ++j) {
          const bool masked = (c.params.causal && j > i) ||
                              (c.params.window >= 0 && std::abs(i - j) > c.params.window);
          double dot = 0;
          for (int64_t e = 0; e < c.d; ++e)
            dot += double(q[size_t(((start + i) * c.hq + h) * c.d + e)]) *
                   k[size_t(((start + j) * c.hkv + g) * c.d + e)];
          row[size_t(j)] = masked ? -INFINITY : dot * c.params.scale;
          mx = std::max(mx, row[size_t(j)]);
        }
        double sum = 0;
        for (double& x : row) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < c.d; ++e) {
          double o = 0;
          for (int64_t j = 0; j < len; ++j)
            o += row[size_t(j)] / sum * v[size_t(((start + j) * c.hkv + g) * c.d + e)];
          out[size_t(((start + i) * c.hq + h) * c.d + e)] = o;
        }
      }
  }
  return out;
}

// Key tiles a windowed schedule visits, computed here from the definition: per query tile, the
// tiles overlapping [first row - window, last row + window] clipped to the sequence.
int64_t expected_windowed_tiles(const std::vector<int32_t>& lengths, int64_t window, int64_t hkv,
                                int64_t qt, int64_t kt) {
  int64_t tiles = 0;
  for (int64_t len : lengths)
    for (int64_t q0 = 0; q0 < len; q0 += qt) {
      const int64_t q1 = std::min(len, q0 + qt) - 1;
      const int64_t lo = window < 0 ? 0 : std::max<int64_t>(0, q0 - window);
      const int64_t hi = window < 0 ? len : std::min(len, q1 + window + 1);
      tiles += (hi + kt - 1) / kt - lo / kt;
    }
  return tiles * hkv;
}
int64_t dense_tiles(const std::vector<int32_t>& lengths, int64_t hkv, int64_t qt, int64_t kt) {
  int64_t tiles = 0;
  for (int64_t len : lengths) tiles += (len + qt - 1) / qt * ((len + kt - 1) / kt);
  return tiles * hkv;
}

// The dtype whose NMSE bound a backend's packed attention is held to: the CUDA backend's default
// mode runs it on bf16 tensor cores where it applies (q, k, v and the probabilities rounded to
// bf16: BF16 bound); everything else computes in f32.
DType packed_bound(const std::string& backend) {
  return tensor_core_cuda_target(backend) ? DType::BF16 : DType::F32;
}

// Runs one case; returns the key tiles the backend reports.
int64_t run_packed(Backend& b, OpReport& report, const PackedCase& c, std::mt19937& rng,
                   DType bound = DType::F32) {
  const BatchDesc d = packed_batch(c.lengths);
  const Batch batch = b.upload_batch(d);
  const int64_t n = d.num_tokens();
  HostData q = make_host_data(DType::F32, size_t(n * c.hq * c.d), rng, 2.0f);
  HostData k = make_host_data(DType::F32, size_t(n * c.hkv * c.d), rng, 2.0f);
  HostData v = make_host_data(DType::F32, size_t(n * c.hkv * c.d), rng);
  Tensor qt = to_backend(b, "q", DType::F32, {n, c.hq, c.d}, q);
  Tensor kt = to_backend(b, "k", DType::F32, {n, c.hkv, c.d}, k);
  Tensor vt = to_backend(b, "v", DType::F32, {n, c.hkv, c.d}, v);
  Tensor out = b.alloc("out", DType::F32, {n, c.hq, c.d});
  b.reset_op_stats();
  b.attention_packed(qt, kt, vt, batch, c.params, out);
  const int64_t tiles = b.op_stats().packed_key_tiles;
  report.check(Op::AttentionPacked, bound, c.name, read_back(b, out),
               dense_masked_reference(c, d, q.values, k.values, v.values));
  return tiles;
}

TEST_P(EncoderOps, PackedAttention) {
  std::vector<PackedCase> cases = {
      {"one row", {1}, 2, 1, 8, {}},
      {"global, 3 sequences, GQA 4:2, odd d", {5, 40, 33}, 4, 2, 37, {.causal = false}},
      {"window 8, 3 sequences", {45, 9, 70}, 2, 1, 16, {.causal = false, .window = 8}},
      {"window 0 (only itself)", {20}, 2, 2, 8, {.causal = false, .window = 0}},
      {"causal window 4", {50, 20}, 4, 2, 32, {.causal = true, .window = 4}},
      {"causal global", {31, 64}, 2, 2, 16, {.causal = true}},
      // One kv head per q head and head_dim % 16 == 0: the CUDA tensor-core kernel's cases
      // (64-row query tiles, 64-key tiles), at lengths around the tiles and ModernBERT's shape.
      {"MHA d64 window 64", {1, 63, 64, 65, 200, 512}, 4, 4, 64, {.causal = false, .window = 64}},
      {"MHA d64 global", {93, 130}, 2, 2, 64, {.causal = false}},
      {"MHA d32 window 0", {70, 3}, 2, 2, 32, {.causal = false, .window = 0}},
      {"MHA d128 causal window 16", {150, 33}, 2, 2, 128, {.causal = true, .window = 16}},
  };
  for (PackedCase& c : cases) c.params.scale = 1.0f / std::sqrt(float(c.d));
  for_each_target(GetParam(), [&](Backend& b, const std::string& label) {
    OpReport report(label);
    if (!b.supports(Op::AttentionPacked, {DType::F32}))
      return report.declined(Op::AttentionPacked, DType::F32);
    std::mt19937 rng(24);
    for (const PackedCase& c : cases) {
      SCOPED_TRACE(c.name);
      run_packed(b, report, c, rng, packed_bound(GetParam().name));
    }
  });
  // The dense schedule (every key tile, masked per row) against the same references.
  if (auto dense = dense_schedule_backend(GetParam())) {
    OpReport report(GetParam().name + " dense schedule");
    std::mt19937 rng(24);
    for (const PackedCase& c : cases) {
      SCOPED_TRACE(c.name + " (dense schedule)");
      const int64_t tiles = run_packed(*dense, report, c, rng, packed_bound(GetParam().name));
      const OpStats s = dense->op_stats();
      if (s.packed_key_tile > 0)
        EXPECT_EQ(tiles, dense_tiles(c.lengths, c.hkv, s.packed_query_tile, s.packed_key_tile))
            << c.name;
    }
  }
}

// rope_attention_packed (ModernBERT's attention stage): the output against RoPE in double (NeoX
// halves, positions = offsets in the sequence) then the dense masked reference, and bit for bit
// against rope, rope, attention_packed on the same backend (q and k as rotated as theirs): CUDA's
// one staging launch claims exactly that. Flash cases (MHA, d 64 / 128) and others (GQA, d 8: the
// separate rope launches).
TEST_P(EncoderOps, RopeAttentionPackedIsRopeThenAttention) {
  std::vector<PackedCase> cases = {
      {"MHA d64 window 64", {1, 63, 64, 65, 200}, 2, 2, 64, {.causal = false, .window = 64}},
      {"MHA d64 global", {93, 130}, 2, 2, 64, {.causal = false}},
      {"MHA d128 window 16", {150, 33}, 2, 2, 128, {.causal = false, .window = 16}},
      {"GQA 4:2 d32 global", {5, 40}, 4, 2, 32, {.causal = false}},
      {"MHA d8 window 4", {30}, 2, 2, 8, {.causal = false, .window = 4}},
  };
  const double theta = 10000.0;
  for (PackedCase& c : cases) c.params.scale = 1.0f / std::sqrt(float(c.d));
  for_each_target(GetParam(), [&](Backend& b, const std::string& label) {
    OpReport report(label);
    if (!b.supports(Op::AttentionPacked, {DType::F32}))
      return report.declined(Op::RopeAttentionPacked, DType::F32);
    std::mt19937 rng(25);
    for (const PackedCase& c : cases) {
      SCOPED_TRACE(c.name);
      const BatchDesc d = packed_batch(c.lengths);
      const Batch batch = b.upload_batch(d);
      const int64_t n = d.num_tokens();
      HostData q = make_host_data(DType::F32, size_t(n * c.hq * c.d), rng, 2.0f);
      HostData k = make_host_data(DType::F32, size_t(n * c.hkv * c.d), rng, 2.0f);
      HostData v = make_host_data(DType::F32, size_t(n * c.hkv * c.d), rng);
      HostData q2 = q, k2 = k;  // the CPU's tensors may be views of the host data
      Tensor qt = to_backend(b, "q", DType::F32, {n, c.hq, c.d}, q);
      Tensor kt = to_backend(b, "k", DType::F32, {n, c.hkv, c.d}, k);
      Tensor vt = to_backend(b, "v", DType::F32, {n, c.hkv, c.d}, v);
      Tensor out = b.alloc("out", DType::F32, {n, c.hq, c.d});
      b.rope_attention_packed(qt, kt, vt, batch, theta, c.params, out);
      const std::vector<float> got = read_back(b, out), got_q = read_back(b, qt),
                               got_k = read_back(b, kt);

      Tensor q2t = to_backend(b, "q2", DType::F32, {n, c.hq, c.d}, q2);
      Tensor k2t = to_backend(b, "k2", DType::F32, {n, c.hkv, c.d}, k2);
      Tensor out2 = b.alloc("out2", DType::F32, {n, c.hq, c.d});
      b.rope(q2t, batch.positions, theta);
      b.rope(k2t, batch.positions, theta);
      b.attention_packed(q2t, k2t, vt, batch, c.params, out2);
      EXPECT_TRUE(read_back(b, out2) == got) << label << ": out differs";  // NaN differs too
      EXPECT_TRUE(read_back(b, q2t) == got_q) << label << ": q differs from rope's";
      EXPECT_TRUE(read_back(b, k2t) == got_k) << label << ": k differs from rope's";

      // RoPE in double, then the dense masked attention reference.
      auto rotate = [&](std::vector<float> x, int64_t heads) {
        const int64_t half = c.d / 2;
        for (int64_t t = 0; t < n; ++t)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t j = 0; j < half; ++j) {
              const double angle = d.positions[size_t(t)] * std::pow(theta, -2.0 * j / c.d);
              float* r = x.data() + (t * heads + h) * c.d;
              const double a = r[j], bb = r[j + half];
              r[j] = float(a * std::cos(angle) - bb * std::sin(angle));
              r[j + half] = float(bb * std::cos(angle) + a * std::sin(angle));
            }
        return x;
      };
      const std::vector<float> rq = rotate(q2.values, c.hq), rk = rotate(k2.values, c.hkv);
      report.check(Op::RopeAttentionPacked, packed_bound(GetParam().name), c.name, got,
                   dense_masked_reference(c, d, rq, rk, v.values));
    }
  });
}

// ModernBERT's local layers: |i - j| <= 64 at the lengths around the tile sizes and the window,
// each alone and all packed together, equal to the dense masked reference; the windowed schedule
// visits exactly the key tiles the window needs (fewer than dense once L > 64 + one tile), and the
// backend forced to its dense schedule (CPU, CUDA) gives the same values while visiting every tile.
TEST_P(EncoderOps, WindowedAttentionEqualsDenseMaskAndSkipsTiles) {
  const std::vector<int32_t> lengths = {1, 63, 64, 65, 127, 128, 129, 300, 512};
  const int32_t window = 64;
  const AttentionParams params{.scale = 0.25f, .causal = false, .window = window};
  // GQA 4:2 with d 16, and one kv head per q head with d 64 (ModernBERT's heads; CUDA runs that
  // on its tensor-core kernel, with its own tile sizes).
  for (const auto& [hq, hkv, d] : {std::tuple{4, 2, 16}, std::tuple{2, 2, 64}}) {
    SCOPED_TRACE("hq " + std::to_string(hq) + ", hkv " + std::to_string(hkv) + ", d " +
                 std::to_string(d));
    bool print_counts = true;  // once: the counts are the same on every target
    auto check_all = [&](Backend& b, const std::string& label, bool windowed) {
      OpReport report(label + (windowed ? "" : " dense schedule"));
      if (!b.supports(Op::AttentionPacked, {DType::F32}))
        return report.declined(Op::AttentionPacked, DType::F32);
      std::mt19937 rng(25);
      const OpStats probe = b.op_stats();
      const bool counts = probe.packed_key_tile > 0;
      if (!counts) std::printf("[op harness] %s does not count key tiles\n", label.c_str());
      for (int32_t len : lengths) {
        const PackedCase c{"window 64, L=" + std::to_string(len), {len}, hq, hkv, d, params};
        const int64_t tiles = run_packed(b, report, c, rng, packed_bound(GetParam().name));
        if (!counts) continue;
        const OpStats s = b.op_stats();
        const int64_t want = windowed
                                 ? expected_windowed_tiles({len}, window, hkv, s.packed_query_tile,
                                                           s.packed_key_tile)
                                 : dense_tiles({len}, hkv, s.packed_query_tile, s.packed_key_tile);
        const int64_t dense = dense_tiles({len}, hkv, s.packed_query_tile, s.packed_key_tile);
        EXPECT_EQ(tiles, want) << c.name;
        if (windowed && len > window + s.packed_key_tile + s.packed_query_tile)
          EXPECT_LT(tiles, dense) << c.name;
        if (print_counts)
          std::printf("  L=%3d: key tiles visited %4lld, dense %4lld\n", len,
                      static_cast<long long>(tiles), static_cast<long long>(dense));
      }
      print_counts = false;
      const PackedCase all{"window 64, all lengths packed", lengths, hq, hkv, d, params};
      const int64_t tiles = run_packed(b, report, all, rng, packed_bound(GetParam().name));
      if (counts) {
        const OpStats s = b.op_stats();
        EXPECT_EQ(tiles, windowed
                             ? expected_windowed_tiles(lengths, window, hkv, s.packed_query_tile,
                                                       s.packed_key_tile)
                             : dense_tiles(lengths, hkv, s.packed_query_tile, s.packed_key_tile));
      }
    };
    for_each_target(GetParam(),
                    [&](Backend& b, const std::string& label) { check_all(b, label, true); });
    // The backend's dense schedule (CPU, CUDA): same values, every tile.
    if (auto dense = dense_schedule_backend(GetParam())) check_all(*dense, GetParam().name, false);
  }
}

TEST_P(EncoderOps, RejectsMismatchedShapes) {
  auto b = GetParam().make();
  if (!b->supports(Op::AttentionPacked, {DType::F32}) || !b->supports(Op::LayerNorm, {DType::F32}))
    GTEST_SKIP() << GetParam().name << " does not implement the encoder ops yet";
  const BatchDesc d = packed_batch({3, 2});
  const Batch batch = b->upload_batch(d);
  Tensor q = b->alloc("q", DType::F32, {5, 4, 8}), k = b->alloc("k", DType::F32, {5, 3, 8});
  Tensor out = b->alloc("out", DType::F32, {5, 4, 8});
  EXPECT_THROW(b->attention_packed(q, k, k, batch, {.causal = false}, out), InvalidArgument);
  Tensor q6 = b->alloc("q", DType::F32, {6, 4, 8}), k6 = b->alloc("k", DType::F32, {6, 2, 8});
  Tensor out6 = b->alloc("out", DType::F32, {6, 4, 8});
  EXPECT_THROW(b->attention_packed(q6, k6, k6, batch, {.causal = false}, out6), InvalidArgument);
  Tensor x = b->alloc("x", DType::F32, {5, 8}), w = b->alloc("w", DType::F32, {7});
  EXPECT_THROW(b->layernorm(x, w, Tensor(), 1e-5f, x), InvalidArgument);
  EXPECT_THROW(b->add_bias(x, w, x), InvalidArgument);
  Tensor pooled = b->alloc("pooled", DType::F32, {3, 8});
  EXPECT_THROW(b->mean_pool(x, batch, pooled), InvalidArgument);
}

// The schedule is chosen through the backend options (what the benchmarks use): "dense" visits
// every key tile with the same values, "windowed" (default) only the window's, anything else is
// refused.
TEST(BackendOptionsSchedule, PackedAttentionScheduleIsSelectable) {
  EXPECT_THROW(make_backend({.device = "cpu", .packed_attention = "sparse"}), InvalidArgument);
  const PackedCase c{
      "window 64, L=300", {300}, 4, 2, 16, {.scale = 0.25f, .causal = false, .window = 64}};
  std::vector<int64_t> tiles;
  for (const char* schedule : {"windowed", "dense"}) {
    auto b = make_backend({.device = "cpu", .threads = 1, .packed_attention = schedule});
    OpReport report(std::string("cpu via options, ") + schedule);
    std::mt19937 rng(3);
    tiles.push_back(run_packed(*b, report, c, rng));
    const OpStats s = b->op_stats();
    EXPECT_EQ(tiles.back(),
              std::string(schedule) == "dense"
                  ? dense_tiles(c.lengths, c.hkv, s.packed_query_tile, s.packed_key_tile)
                  : expected_windowed_tiles(c.lengths, 64, c.hkv, s.packed_query_tile,
                                            s.packed_key_tile));
  }
  EXPECT_LT(tiles[0], tiles[1]);
}

INSTANTIATE_TEST_SUITE_P(Backends, EncoderOps, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
