// Every op of ops/backend.h, written once, run by the harness on every backend and SIMD target,
// against scalar references in double written here. Shapes include 1 row, odd sizes and
// non-multiples of every tile size (vector widths 4/8/16, register tiles 2-4 x 4, panels of 16,
// query blocks of 32, cache blocks of 1/5/8/16/32), decode shapes, and aliasing where the
// contract allows it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/op_harness.h"
#include "infera/error.h"
#include "ops/backend.h"

namespace infera::test {
namespace {

using Doubles = std::vector<double>;
const DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};

std::string shape_name(std::initializer_list<int64_t> dims) {
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

class OpHarness : public ::testing::TestWithParam<HarnessBackend> {};

TEST_P(OpHarness, Matmul) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(1);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::Matmul, {wt})) {
        report.declined(Op::Matmul, wt);
        continue;
      }
      for (auto [n, k, m] : {std::tuple{1, 7, 3},
                             {1, 64, 37},
                             {2, 40, 9},
                             {3, 33, 21},
                             {5, 100, 17},
                             {9, 128, 70},
                             {17, 31, 5},
                             {33, 256, 33},
                             {4, 1, 1},
                             {1, 1024, 16},
                             // The bf16 GEMV's preload (kTuneGemvPreload): k past its first
                             // round of 8 loads per lane (2048), with a partial tail.
                             {1, 2056, 13},
                             {2, 3080, 5},
                             // CUDA's skinny tensor-core GEMM (9..256 rows): partial x and
                             // weight tiles, k past a 64 chunk, k split across CTAs, and past
                             // its row limit (cuBLAS).
                             {63, 1024, 200},
                             {100, 136, 129},
                             {256, 512, 96},
                             {200, 2048, 64},
                             {300, 64, 40},
                             // CUDA's weight-streaming GEMM (cuda_stream: 1..256 rows): k past
                             // whole 64 chunks, m not a multiple of 64, 255/256 rows, k split
                             // 8 ways over a cluster.
                             {8, 1032, 130},
                             {64, 1000, 130},
                             {255, 520, 333},
                             {256, 3072, 96},
                             // 18 weight tiles: 6 splits of 3 k chunks, whose 64 rows of
                             // partials (6 x 16) must still fit the receive buffer.
                             {64, 1032, 1100}}) {
        HostData x = make_host_data(DType::F32, size_t(n * k), rng);
        HostData w = make_host_data(wt, size_t(m * k), rng);
        if (skip_under_sanitizer(b, int64_t(n) * k * m)) continue;  // after the draws: same inputs
        Tensor xt = to_backend(b, "x", DType::F32, {n, k}, x);
        Tensor wtn = to_backend(b, "w", wt, {m, k}, w);
        Tensor out = b.alloc("out", DType::F32, {n, m});
        b.matmul(xt, wtn, out);
        report.check(Op::Matmul, wt, shape_name({n, k, m}), read_back(b, out),
                     matmul_reference(x.values, w.values, n, k, m));
      }
    }
  });
}

// Batch invariance on the CPU: a row's matmul result is bit-identical whichever other rows share
// the call (decode streams 1-3 rows through a GEMV, prefill runs register tiles over panels), so a
// sequence's logits do not depend on its batch. The model-level batch test allows 1e-5 and cannot
// see a different summation order; this one compares bits.
TEST_P(OpHarness, MatmulRowsAreBitIdenticalWhateverShareTheCall) {
  if (GetParam().name.rfind("cpu", 0) != 0)
    GTEST_SKIP() << GetParam().name << ": not a batch-invariant backend";
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    std::mt19937 rng(7);
    for (DType wt : kFloatTypes) {
      for (auto [n, k, m] : {std::tuple{9, 1024, 19}, {7, 257, 13}, {6, 100, 5}, {5, 33, 40}}) {
        HostData x = make_host_data(DType::F32, size_t(n * k), rng);
        HostData w = make_host_data(wt, size_t(m * k), rng);
        Tensor wtn = to_backend(b, "w", wt, {m, k}, w);
        Tensor xt = to_backend(b, "x", DType::F32, {n, k}, x);
        Tensor all = b.alloc("all", DType::F32, {n, m});
        b.matmul(xt, wtn, all);
        const std::vector<float> together = read_back(b, all);
        for (int rows : {1, 2, 3}) {  // the GEMV path takes fewer rows than a register tile
          for (int i = 0; i + rows <= n; i += rows) {
            HostData part{{x.values.begin() + i * k, x.values.begin() + (i + rows) * k}, {}};
            part.bytes.resize(part.values.size() * sizeof(float));
            std::memcpy(part.bytes.data(), part.values.data(), part.bytes.size());
            Tensor xp = to_backend(b, "xp", DType::F32, {rows, k}, part);
            Tensor out = b.alloc("out", DType::F32, {rows, m});
            b.matmul(xp, wtn, out);
            const std::vector<float> alone = read_back(b, out);
            EXPECT_EQ(std::memcmp(alone.data(), together.data() + size_t(i) * size_t(m),
                                  alone.size() * sizeof(float)),
                      0)
                << label << " " << dtype_name(wt) << " " << shape_name({n, k, m}) << ": rows " << i
                << ".." << i + rows - 1 << " computed " << rows
                << " at a time differ from the same rows in one call of " << n;
          }
        }
      }
    }
  });
}

TEST_P(OpHarness, EmbeddingAndGatherRows) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(2);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::Embedding, {wt})) {
        report.declined(Op::Embedding, wt);
        continue;
      }
      for (auto [vocab, dim, n] : {std::tuple{37, 1, 1}, {37, 5, 3}, {50, 64, 17}, {9, 67, 40}}) {
        HostData table = make_host_data(wt, size_t(vocab * dim), rng);
        BatchDesc ids;
        for (int i = 0; i < n; ++i) ids.tokens.push_back(int32_t(rng() % uint32_t(vocab)));
        ids.tokens.back() = vocab - 1;  // the last row of the table
        const Batch batch = b.upload_batch(ids);
        Tensor t = to_backend(b, "table", wt, {vocab, dim}, table);
        Tensor out = b.alloc("out", DType::F32, {n, dim});
        b.embedding(t, batch.tokens, out);
        Doubles want;
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < dim; ++j)
            want.push_back(table.values[size_t(ids.tokens[size_t(i)] * dim + j)]);
        report.check(Op::Embedding, wt, shape_name({vocab, dim, n}), read_back(b, out), want);
      }
    }
    for (auto [rows, width, picked] : {std::tuple{1, 1, 1}, {5, 33, 3}, {40, 128, 40}}) {
      HostData src = make_host_data(DType::F32, size_t(rows * width), rng);
      BatchDesc pick;
      for (int i = 0; i < picked; ++i) pick.output_rows.push_back(int32_t((i * 7 + 3) % rows));
      const Batch batch = b.upload_batch(pick);
      Tensor s = to_backend(b, "src", DType::F32, {rows, width}, src);
      Tensor out = b.alloc("out", DType::F32, {picked, width});
      b.gather_rows(s, batch.output_rows, out);
      Doubles want;
      for (int32_t r : pick.output_rows)
        for (int j = 0; j < width; ++j) want.push_back(src.values[size_t(r * width + j)]);
      report.check(Op::GatherRows, DType::F32, shape_name({rows, width, picked}), read_back(b, out),
                   want);
    }
  });
}

TEST_P(OpHarness, RmsNorm) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(3);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::RmsNorm, {wt})) {
        report.declined(Op::RmsNorm, wt);
        continue;
      }
      for (auto [rows, dim, in_place] : {std::tuple{1, 1, false},
                                         {1, 7, true},
                                         {3, 64, false},
                                         {17, 129, true},
                                         {40, 1024, false}}) {
        HostData x = make_host_data(DType::F32, size_t(rows * dim), rng, 3.0f);
        HostData w = make_host_data(wt, size_t(dim), rng);
        const std::vector<float> xin = x.values;
        Tensor xt = to_backend(b, "x", DType::F32, {rows, dim}, x);
        Tensor wtn = to_backend(b, "w", wt, {dim}, w);
        Tensor out = in_place ? xt : b.alloc("out", DType::F32, {rows, dim});
        b.rmsnorm(xt, wtn, 1e-6f, out);
        Doubles want(xin.size());
        for (int r = 0; r < rows; ++r) {
          double ss = 0;
          for (int i = 0; i < dim; ++i)
            ss += double(xin[size_t(r * dim + i)]) * xin[size_t(r * dim + i)];
          const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
          for (int i = 0; i < dim; ++i)
            want[size_t(r * dim + i)] = w.values[size_t(i)] * xin[size_t(r * dim + i)] * inv;
        }
        report.check(Op::RmsNorm, wt, shape_name({rows, dim}) + (in_place ? " in place" : ""),
                     read_back(b, out), want);
      }
    }
  });
}

TEST_P(OpHarness, Rope) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(4);
    for (auto [n, heads, d, theta] : {std::tuple{1, 1, 2, 1e4},
                                      {3, 2, 8, 1e4},
                                      {5, 3, 34, 1e6},
                                      {17, 8, 128, 1e6},
                                      {2, 16, 64, 1.6e5}}) {
      HostData x = make_host_data(DType::F32, size_t(n * heads * d), rng);
      const std::vector<float> xin = x.values;
      BatchDesc pos;
      for (int i = 0; i < n; ++i) pos.positions.push_back(int32_t(i == 0 ? 0 : rng() % 6000));
      const Batch batch = b.upload_batch(pos);
      Tensor xt = to_backend(b, "x", DType::F32, {n, heads, d}, x);
      b.rope(xt, batch.positions, theta);
      // inv_freq and the angle in f32, as transformers computes them (the contract), the
      // rotation in double.
      Doubles want(xin.size());
      for (int i = 0; i < n; ++i)
        for (int h = 0; h < heads; ++h)
          for (int j = 0; j < d / 2; ++j) {
            const float inv = 1.0f / float(std::pow(float(theta), float(2 * j) / float(d)));
            const double ang = float(pos.positions[size_t(i)]) * inv;
            const size_t base = size_t((i * heads + h) * d);
            const double a = xin[base + size_t(j)], c = xin[base + size_t(j + d / 2)];
            want[base + size_t(j)] = a * std::cos(ang) - c * std::sin(ang);
            want[base + size_t(j + d / 2)] = c * std::cos(ang) + a * std::sin(ang);
          }
      report.check(Op::Rope, DType::F32, shape_name({n, heads, d}), read_back(b, xt), want);
    }
  });
}

TEST_P(OpHarness, SwigluAndAdd) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(5);
    for (auto [rows, width, alias] :
         {std::tuple{1, 1, false}, {1, 7, true}, {3, 1000, false}, {2, 4099, true}}) {
      HostData g = make_host_data(DType::F32, size_t(rows * width), rng, 6.0f);
      HostData u = make_host_data(DType::F32, size_t(rows * width), rng, 2.0f);
      const std::vector<float> gin = g.values, uin = u.values;
      Tensor gt = to_backend(b, "gate", DType::F32, {rows, width}, g);
      Tensor ut = to_backend(b, "up", DType::F32, {rows, width}, u);
      Tensor out = alias ? gt : b.alloc("out", DType::F32, {rows, width});
      b.swiglu(gt, ut, out);
      Doubles want(gin.size());
      for (size_t i = 0; i < gin.size(); ++i)
        want[i] = gin[i] / (1.0 + std::exp(-double(gin[i]))) * uin[i];
      const std::string name = shape_name({rows, width}) + (alias ? " out=gate" : "");
      report.check(Op::Swiglu, DType::F32, name, read_back(b, out), want);

      const std::vector<float> s = read_back(b, out);
      Tensor sum = alias ? out : b.alloc("sum", DType::F32, {rows, width});
      b.add(out, ut, sum);
      for (size_t i = 0; i < s.size(); ++i) want[i] = double(s[i]) + uin[i];
      report.check(Op::Add, DType::F32, shape_name({rows, width}) + (alias ? " out=a" : ""),
                   read_back(b, sum), want);
    }
  });
}

// --- paged attention ---------------------------------------------------------------------------

struct AttnCase {
  std::string name;
  std::vector<int32_t> context;  // per sequence: keys after this step
  std::vector<int32_t> queries;  // per sequence: rows in this step (the last positions)
  int32_t hq, hkv, d, block_size;
  AttentionParams params;
};

std::vector<AttnCase> attention_cases() {
  std::vector<AttnCase> c = {
      {"decode 1 token", {1}, {1}, 2, 1, 8, 16, {}},
      {"prefill 70 after nothing", {70}, {70}, 4, 2, 64, 16, {}},
      {"prefill 33 after 40, odd d", {73}, {33}, 6, 3, 37, 5, {}},
      {"decode batch of 5 contexts", {1, 17, 32, 33, 200}, {1, 1, 1, 1, 1}, 8, 2, 128, 32, {}},
      {"mixed prefill chunks and decodes", {40, 9, 130, 64}, {40, 1, 65, 1}, 4, 4, 16, 16, {}},
      {"block size 1", {12, 7}, {3, 7}, 2, 2, 8, 1, {}},
      {"local window 4, causal", {50, 20}, {50, 3}, 4, 2, 32, 16, {}},
      {"bidirectional window 8", {45, 9}, {45, 9}, 2, 1, 16, 16, {}},
      {"bidirectional global", {31, 64}, {31, 64}, 2, 2, 16, 32, {}},
      // Decode shapes (<= 4 query vectors per kv head: a GPU's decode kernel), with split keys.
      {"decode, 2 rows each, group 2", {20, 50}, {2, 2}, 4, 2, 64, 8, {}},
      {"decode d 256, 700 keys", {700}, {1}, 2, 1, 256, 16, {}},
      {"decode block size 5, 3 sequences", {77, 13, 1}, {1, 1, 1}, 6, 3, 64, 5, {}},
      {"decode local window 4", {40, 3}, {1, 1}, 4, 2, 32, 16, {}},
      // Prefill shapes of the pipelined tensor-core kernel (head_dim 64/128): several key tiles,
      // a partial last tile, tiles of a sequence's rows that straddle the kv-head group.
      {"prefill 150 after 100, d 128", {250}, {150}, 4, 2, 128, 32, {}},
      {"two prompts d 128, group 4", {70, 129}, {70, 129}, 8, 2, 128, 16, {}},
      {"bidirectional d 128", {100, 37}, {100, 37}, 4, 1, 128, 16, {}},
      {"local window 20, d 64", {90}, {90}, 2, 1, 64, 16, {}},
      // Long causal prompts with few (sequence, kv head) tiles: the flash kernel splits the long
      // query tiles' keys across blocks (chunks of whole key tiles) and merges them; prompts not
      // a multiple of the tiles, history before the prompt, several prompts of different lengths.
      {"long prompt 700, d 128, group 2", {700}, {700}, 4, 2, 128, 32, {}},
      {"prefill 500 after 330, d 128", {830}, {500}, 2, 1, 128, 16, {}},
      {"three prompts 530/77/300, d 128", {530, 77, 300}, {530, 77, 300}, 4, 2, 128, 16, {}},
      {"long prompt 600, d 64, group 4", {600}, {600}, 4, 1, 64, 32, {}},
      // Many short prompts at the 64-key tile / block edges (the 8x512 prefill's shape, smaller):
      // 128-vector wgmma tiles of several sequences, a tile holding a single row, empty tails.
      {"six prompts 1/63/64/65/129/200, d 128",
       {1, 63, 64, 65, 129, 200},
       {1, 63, 64, 65, 129, 200},
       4,
       2,
       128,
       64,
       {}},
      {"long prompt 640, local window 150", {640}, {640}, 2, 1, 128, 16, {}},
      // Batched decode (the staged kernel, f16/bf16 d 64/128): many sequences of different
      // lengths, 1 key, lengths around and not at multiples of the 8-key tiles, the 32-key split
      // granule and the blocks; group 2 (2 vectors), group 1, a window, group 2 x 2 rows.
      {"decode 40 sequences, d 128, group 2",
       {1,   2,   7,   8,   9,   31,  32,  33,  63,  64,  65,  100, 127, 128,
        129, 200, 255, 256, 257, 300, 383, 384, 385, 511, 512, 513, 600, 45,
        3,   17,  250, 40,  96,  97,  160, 161, 5,   70,  330, 520},
       std::vector<int32_t>(40, 1),
       4,
       2,
       128,
       16,
       {}},
      {"decode group 1, d 128, block size 32", {130, 5, 64, 1}, {1, 1, 1, 1}, 3, 3, 128, 32, {}},
      {"decode window 50, d 64, group 2", {300, 77, 20}, {1, 1, 1}, 4, 2, 64, 16, {}},
      {"decode 2 rows, d 128, group 2, block size 8", {301, 2, 90}, {2, 2, 2}, 4, 2, 128, 8, {}},
      // Qwen3-0.6B's heads (16 q, 8 kv, d 128) in a prefill batch: prompts of different odd
      // lengths, one a chunk after 45 cached keys, 8-key blocks (a 64-key tile spans 8 of them);
      // query tiles across the diagonal, partial last key tiles. And the same with a block size
      // that is no power of two (24: the wgmma kernel declines it, the others take it).
      {"qwen3 heads, prompts 201/131 after 45/67",
       {201, 176, 67},
       {201, 131, 67},
       16,
       8,
       128,
       8,
       {}},
      {"qwen3 heads, block size 24", {201, 176}, {201, 131}, 16, 8, 128, 24, {}},
      // The tensor-core decode kernel's 32-key tiles: one lookup per tile where the block size is
      // a multiple of 32 (64: tiles at both halves of a block; 96: no power of two) and per key
      // row otherwise; lengths around the tiles and the blocks, one long sequence (split keys).
      {"decode qwen3 heads, block size 64",
       {1, 31, 32, 33, 64, 65, 127, 500, 1025},
       std::vector<int32_t>(9, 1),
       16,
       8,
       128,
       64,
       {}},
      {"decode block size 96, window 70", {300, 97, 5}, {1, 1, 1}, 4, 2, 128, 96, {}},
      {"decode 1 sequence of 1000 keys", {1000}, {1}, 2, 1, 128, 32, {}},
      {"decode 2 rows, d 64, block size 48", {130, 47, 2}, {2, 2, 2}, 4, 2, 64, 48, {}},
  };
  c[6].params.window = 4;
  c[7].params = {.causal = false, .window = 8};
  c[8].params.causal = false;
  c[12].params.window = 4;
  c[15].params.causal = false;
  c[16].params.window = 20;
  c[21].params.window = 150;
  c[24].params.window = 50;
  c[29].params.window = 70;
  for (AttnCase& a : c) a.params.scale = 1.0f / std::sqrt(float(a.d));
  return c;
}

// Scalar attention over the logical key/value history of one sequence, in double.
void reference_attention(const AttnCase& c, const std::vector<float>& q, int64_t row, int32_t pos,
                         int32_t len, const std::vector<float>& keys,
                         const std::vector<float>& values, Doubles& out) {
  const int64_t group = c.hq / c.hkv;
  for (int64_t h = 0; h < c.hq; ++h) {
    const int64_t g = h / group;
    int64_t lo = 0, hi = c.params.causal ? pos + 1 : len;
    if (c.params.window >= 0) {
      lo = std::max<int64_t>(0, pos - c.params.window);
      hi = std::min<int64_t>(hi, pos + c.params.window + 1);
    }
    hi = std::min<int64_t>(hi, len);
    Doubles s;
    double mx = -1e300, sum = 0;
    for (int64_t t = lo; t < hi; ++t) {
      double dot = 0;
      for (int64_t e = 0; e < c.d; ++e)
        dot +=
            double(q[size_t((row * c.hq + h) * c.d + e)]) * keys[size_t((t * c.hkv + g) * c.d + e)];
      s.push_back(dot * c.params.scale);
      mx = std::max(mx, s.back());
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t e = 0; e < c.d; ++e) {
      double o = 0;
      for (int64_t t = lo; t < hi; ++t)
        o += s[size_t(t - lo)] / sum * values[size_t((t * c.hkv + g) * c.d + e)];
      out[size_t((row * c.hq + h) * c.d + e)] = o;
    }
  }
}

// The batch of rows [first[s], first[s] + count[s]) of each sequence, over shuffled blocks.
BatchDesc paged_batch(const AttnCase& c, const std::vector<std::vector<int32_t>>& tables,
                      const std::vector<int32_t>& first, const std::vector<int32_t>& count,
                      const std::vector<int32_t>& lens, int32_t max_blocks) {
  BatchDesc d;
  d.max_blocks = max_blocks;
  d.query_start.push_back(0);
  for (size_t s = 0; s < c.context.size(); ++s) {
    if (count[s] == 0) continue;
    for (int32_t p = first[s]; p < first[s] + count[s]; ++p) {
      d.tokens.push_back(0);
      d.positions.push_back(p);
      d.slots.push_back(tables[s][size_t(p / c.block_size)] * c.block_size + p % c.block_size);
    }
    d.query_start.push_back(int32_t(d.tokens.size()));
    d.seq_lens.push_back(lens[s]);
    std::vector<int32_t> row = tables[s];
    row.resize(size_t(max_blocks), -1);
    d.block_table.insert(d.block_table.end(), row.begin(), row.end());
  }
  return d;
}

// The double reference of one case, kept with the inputs it was computed from.
struct AttnReference {
  std::vector<float> q;
  std::vector<std::vector<float>> keys, values;
  Doubles want;
};

TEST_P(OpHarness, KvWriteAndPagedAttention) {
  // Every SIMD target of a CPU backend draws the same inputs (same seed, same order), so each
  // case's double reference is computed once and reused while its inputs match: recomputing it
  // per target was most of this test's time (170 s under ASan).
  std::vector<AttnReference> references;
  for_each_target(GetParam(), [&references](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(6);
    size_t reference_index = 0;
    for (DType ct : kFloatTypes) {
      if (!b.supports(Op::Attention, {ct}) || !b.supports(Op::KvWrite, {ct})) {
        report.declined(Op::Attention, ct);
        continue;
      }
      for (const AttnCase& c : attention_cases()) {
        SCOPED_TRACE(c.name);
        const size_t nseq = c.context.size();
        // Physical blocks in shuffled runs of 1-4 consecutive ids: a sequence's blocks are out
        // of order, and where a run holds several of them attention reads across their boundaries
        // as one contiguous stretch (what a growing sequence gets from the allocator).
        std::vector<std::vector<int32_t>> tables(nseq);
        int32_t total = 0, max_blocks = 1;
        for (size_t s = 0; s < nseq; ++s) {
          const int32_t nb = (c.context[s] + c.block_size - 1) / c.block_size;
          max_blocks = std::max(max_blocks, nb);
          for (int32_t k = 0; k < nb; ++k) tables[s].push_back(total++);
        }
        std::vector<std::vector<int32_t>> runs;  // 3 spare blocks nobody uses
        for (int32_t id = 0; id < total + 3;) {
          runs.emplace_back();
          for (int32_t n = 1 + int32_t(rng() % 4); n > 0 && id < total + 3; --n)
            runs.back().push_back(id++);
        }
        std::shuffle(runs.begin(), runs.end(), rng);
        std::vector<int32_t> perm;
        for (const auto& r : runs) perm.insert(perm.end(), r.begin(), r.end());
        for (auto& t : tables)
          for (int32_t& id : t) id = perm[size_t(id)];
        const Shape pool_shape{c.hkv, total + 3, c.block_size, c.d};
        KvLayer cache{b.alloc("k", ct, pool_shape), b.alloc("v", ct, pool_shape)};

        // Step 1 writes each sequence's history; step 2 writes the new rows and attends.
        std::vector<std::vector<float>> keys(nseq), values(nseq);
        std::vector<int32_t> hist_first(nseq, 0), hist_count(nseq), q_first(nseq);
        for (size_t s = 0; s < nseq; ++s) {
          hist_count[s] = c.context[s] - c.queries[s];
          q_first[s] = hist_count[s];
          // Keys/values rounded to the cache dtype: what the backend will read back.
          HostData k = make_host_data(ct, size_t(c.context[s] * c.hkv * c.d), rng);
          HostData v = make_host_data(ct, size_t(c.context[s] * c.hkv * c.d), rng);
          keys[s] = k.values;
          values[s] = v.values;
        }
        auto write_rows = [&](const BatchDesc& d, const std::vector<int32_t>& first,
                              const std::vector<int32_t>& count) {
          HostData kf, vf;
          for (size_t s = 0; s < nseq; ++s)
            for (int32_t p = first[s]; p < first[s] + count[s]; ++p)
              for (int32_t e = 0; e < c.hkv * c.d; ++e) {
                kf.values.push_back(keys[s][size_t(p * c.hkv * c.d + e)]);
                vf.values.push_back(values[s][size_t(p * c.hkv * c.d + e)]);
              }
          for (HostData* h : {&kf, &vf}) {
            h->bytes.resize(h->values.size() * 4);
            std::memcpy(h->bytes.data(), h->values.data(), h->bytes.size());
          }
          const Batch batch = b.upload_batch(d);
          const int64_t n = d.num_tokens();
          Tensor kt = to_backend(b, "k", DType::F32, {n, c.hkv, c.d}, kf);
          Tensor vt = to_backend(b, "v", DType::F32, {n, c.hkv, c.d}, vf);
          b.kv_write(kt, vt, cache, batch);
          return batch;
        };
        bool any_history = false;
        for (int32_t h : hist_count) any_history |= h > 0;
        if (any_history) {
          std::vector<int32_t> lens(nseq);
          for (size_t s = 0; s < nseq; ++s) lens[s] = hist_count[s];
          const BatchDesc hist = paged_batch(c, tables, hist_first, hist_count, lens, max_blocks);
          write_rows(hist, hist_first, hist_count);
        }
        const BatchDesc step = paged_batch(c, tables, q_first, c.queries, c.context, max_blocks);
        const Batch batch = write_rows(step, q_first, c.queries);
        const int64_t n = step.num_tokens();
        HostData q = make_host_data(DType::F32, size_t(n * c.hq * c.d), rng);
        Tensor qt = to_backend(b, "q", DType::F32, {n, c.hq, c.d}, q);
        Tensor out = b.alloc("out", DType::F32, {n, c.hq, c.d});
        b.attention(qt, cache, batch, c.params, out);
        if (reference_index == references.size()) references.emplace_back();
        AttnReference& ref = references[reference_index++];
        if (ref.q != q.values || ref.keys != keys || ref.values != values) {
          ref = {q.values, keys, values, Doubles(size_t(n * c.hq * c.d))};
          int64_t row = 0;
          for (size_t s = 0; s < nseq; ++s)
            for (int32_t p = q_first[s]; p < c.context[s]; ++p)
              reference_attention(c, q.values, row++, p, c.context[s], keys[s], values[s],
                                  ref.want);
        }
        report.check(Op::Attention, ct, c.name, read_back(b, out), ref.want);
      }
    }
  });
}

// --- contract violations are errors, not memory corruption --------------------------------------

TEST_P(OpHarness, RejectsMismatchedShapesAndBadIndices) {
  auto b = GetParam().make();
  Tensor x = b->alloc("x", DType::F32, {2, 8}), w = b->alloc("w", DType::F32, {4, 7});
  Tensor out = b->alloc("out", DType::F32, {2, 4});
  EXPECT_THROW(b->matmul(x, w, out), InvalidArgument);
  BatchDesc bad;
  bad.tokens = {0, 4};
  const Batch ids = b->upload_batch(bad);
  Tensor table = b->alloc("table", DType::F32, {4, 3}), e = b->alloc("e", DType::F32, {2, 3});
  EXPECT_THROW(b->embedding(table, ids.tokens, e), InvalidArgument);
  // A slot outside the pool.
  BatchDesc d;
  d.tokens = {0};
  d.positions = {0};
  d.slots = {64};
  d.query_start = {0, 1};
  d.seq_lens = {1};
  d.block_table = {0};
  d.max_blocks = 1;
  const Batch batch = b->upload_batch(d);
  KvLayer cache{b->alloc("k", DType::F32, {1, 2, 32, 4}), b->alloc("v", DType::F32, {1, 2, 32, 4})};
  Tensor kv = b->alloc("kv", DType::F32, {1, 1, 4});
  EXPECT_THROW(b->kv_write(kv, kv, cache, batch), InvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Backends, OpHarness, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
