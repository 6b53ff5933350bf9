// Each CPU op against a plain scalar reference written here, over awkward shapes (lengths that
// are not multiples of any vector width, single rows, more rows than register tiles) and both
// one and two threads. Tolerances: f32 sums of <= 1000 terms of magnitude ~1 in a different order
// differ by ~1e-5 relative; 1e-4 relative catches any indexing or tiling bug.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/convert.h"
#include "backend/cpu/simd_kernels.h"
#include "infera/error.h"
#include "ops/backend.h"

namespace infera {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Tensor host_f32(Backend& b, const std::string& name, Shape shape,
                const std::vector<float>& values) {
  Tensor t = b.alloc(name, DType::F32, shape);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  return t;
}

// A weight of `dtype` holding `values` rounded to that dtype; returns the rounded values too.
Tensor host_weight(Backend& b, DType dtype, Shape shape, std::vector<float>& values) {
  Tensor t = b.alloc("w", dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32) {
      t.data_as<float>()[i] = values[i];
    } else if (dtype == DType::BF16) {
      const uint16_t h = cpu::f32_to_bf16(values[i]);
      t.data_as<uint16_t>()[i] = h;
      values[i] = cpu::bf16_to_f32(h);
    } else {  // F16 via the bit pattern of a value exactly representable in both
      const float v = std::round(values[i] * 256.0f) / 256.0f;
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      const uint32_t sign = (bits >> 16) & 0x8000u;
      const int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
      const uint16_t h = v == 0.0f
                             ? static_cast<uint16_t>(sign)
                             : static_cast<uint16_t>(sign | (exp << 10) | ((bits >> 13) & 0x3ffu));
      t.data_as<uint16_t>()[i] = h;
      values[i] = cpu::f16_to_f32(h);
    }
  }
  return t;
}

void expect_close(const float* got, const std::vector<float>& want, float rel) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * (1.0f + std::abs(want[i]))) << "at " << i;
}

struct MatmulCase {
  int64_t n, k, m;
};

class CpuMatmul : public ::testing::TestWithParam<std::tuple<DType, int>> {};

// Runs `body` once for every SIMD target compiled in and supported by this CPU (AVX-512, AVX2,
// SSE4...), so the AVX2 path is proven here even on an AVX-512 machine.
template <typename Body>
void for_each_simd_target(Body body) {
  int tested = 0;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    ++tested;
    SCOPED_TRACE(hwy::TargetName(target));
    ASSERT_STREQ(cpu::simd_target_name(), hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
  // Every x86-64 CPU supports at least the SSE4/SSSE3 baseline besides its best target.
  EXPECT_GE(tested, 2);
}

TEST_P(CpuMatmul, MatchesScalarReference) {
  const auto [dtype, threads] = GetParam();
  auto backend = make_cpu_backend(threads);
  for_each_simd_target([&, dtype = dtype] {
    for (const MatmulCase c :
         {MatmulCase{1, 7, 3}, MatmulCase{1, 64, 37}, MatmulCase{2, 40, 9}, MatmulCase{3, 33, 21},
          MatmulCase{5, 100, 17}, MatmulCase{9, 128, 70}, MatmulCase{17, 31, 5}}) {
      SCOPED_TRACE(testing::Message() << "n=" << c.n << " k=" << c.k << " m=" << c.m);
      auto xv = random_values(static_cast<size_t>(c.n * c.k), 1);
      auto wv = random_values(static_cast<size_t>(c.m * c.k), 2);
      Tensor x = host_f32(*backend, "x", {c.n, c.k}, xv);
      Tensor w = host_weight(*backend, dtype, {c.m, c.k}, wv);
      Tensor out = backend->alloc("out", DType::F32, {c.n, c.m});
      backend->matmul(x, w, out);
      std::vector<float> want(static_cast<size_t>(c.n * c.m));
      for (int64_t i = 0; i < c.n; ++i)
        for (int64_t j = 0; j < c.m; ++j) {
          double s = 0;
          for (int64_t p = 0; p < c.k; ++p)
            s += double(xv[size_t(i * c.k + p)]) * wv[size_t(j * c.k + p)];
          want[size_t(i * c.m + j)] = static_cast<float>(s);
        }
      expect_close(out.data_as<float>(), want, 1e-4f);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, CpuMatmul,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::Values(1, 2)));

TEST(CpuOps, MatmulRejectsMismatchedShapes) {
  auto b = make_cpu_backend(1);
  Tensor x = b->alloc("x", DType::F32, {2, 8}), w = b->alloc("w", DType::F32, {4, 7});
  Tensor out = b->alloc("out", DType::F32, {2, 4});
  EXPECT_THROW(b->matmul(x, w, out), InvalidArgument);
}

TEST(CpuOps, RmsNormMatchesReference) {
  auto b = make_cpu_backend(2);
  const int64_t rows = 5, dim = 37;
  auto xv = random_values(size_t(rows * dim), 3, 3.0f);
  auto wv = random_values(size_t(dim), 4);
  Tensor x = host_f32(*b, "x", {rows, dim}, xv);
  Tensor w = host_weight(*b, DType::BF16, {dim}, wv);
  Tensor out = b->alloc("out", DType::F32, {rows, dim});
  b->rmsnorm(x, w, 1e-6f, out);
  std::vector<float> want(xv.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i)
      ss += double(xv[size_t(r * dim + i)]) * xv[size_t(r * dim + i)];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
    for (int64_t i = 0; i < dim; ++i)
      want[size_t(r * dim + i)] = float(wv[size_t(i)] * xv[size_t(r * dim + i)] * inv);
  }
  expect_close(out.data_as<float>(), want, 1e-5f);
}

TEST(CpuOps, RopeRotatesHalvesByPositionAngle) {
  auto b = make_cpu_backend(1);
  const int64_t n = 3, heads = 2, d = 8;
  auto xv = random_values(size_t(n * heads * d), 5);
  Tensor x = host_f32(*b, "x", {n, heads, d}, xv);
  const std::vector<int32_t> pos = {0, 7, 300};
  b->rope(x, pos, 10000.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t j = 0; j < d / 2; ++j) {
        const double ang = pos[size_t(i)] / std::pow(10000.0, 2.0 * j / d);
        const size_t base = size_t((i * heads + h) * d);
        const double a = xv[base + size_t(j)], c = xv[base + size_t(j + d / 2)];
        EXPECT_NEAR(x.data_as<float>()[base + size_t(j)], a * std::cos(ang) - c * std::sin(ang),
                    1e-4);
        EXPECT_NEAR(x.data_as<float>()[base + size_t(j + d / 2)],
                    c * std::cos(ang) + a * std::sin(ang), 1e-4);
      }
}

// Scalar causal GQA over a head-major cache [hkv, cap, d], in double.
std::vector<float> reference_attention(const std::vector<float>& qv, const std::vector<float>& kv,
                                       const std::vector<float>& vv, int64_t start, int64_t n,
                                       int64_t hq, int64_t hkv, int64_t d, int64_t cap,
                                       float scale) {
  std::vector<float> want(static_cast<size_t>(n * hq * d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t g = h / (hq / hkv), visible = start + i + 1;
      std::vector<double> s(static_cast<size_t>(visible));
      double mx = -1e300, sum = 0;
      for (int64_t t = 0; t < visible; ++t) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e)
          dot += double(qv[size_t((i * hq + h) * d + e)]) * kv[size_t((g * cap + t) * d + e)];
        s[size_t(t)] = dot * scale;
        mx = std::max(mx, s[size_t(t)]);
      }
      for (auto& x : s) sum += (x = std::exp(x - mx));
      for (int64_t e = 0; e < d; ++e) {
        double o = 0;
        for (int64_t t = 0; t < visible; ++t)
          o += s[size_t(t)] / sum * vv[size_t((g * cap + t) * d + e)];
        want[size_t((i * hq + h) * d + e)] = float(o);
      }
    }
  return want;
}

struct AttentionCase {
  int64_t start, n, hq, hkv, d, cap;
};

TEST(CpuOps, CausalGqaAttentionMatchesReference) {
  auto b = make_cpu_backend(2);
  // Decode (n = 1), a short prefill after a prefix, query blocks spanning several 32-row
  // blocks, head sizes that are not multiples of the vector width, and MHA (hq == hkv).
  for (const AttentionCase c :
       {AttentionCase{9, 1, 4, 2, 16, 12}, AttentionCase{3, 4, 4, 2, 12, 10},
        AttentionCase{5, 70, 8, 2, 128, 80}, AttentionCase{0, 33, 2, 2, 37, 40}}) {
    SCOPED_TRACE(testing::Message() << "start=" << c.start << " n=" << c.n << " d=" << c.d);
    for_each_simd_target([&] {
      auto qv = random_values(size_t(c.n * c.hq * c.d), 6);
      auto kv = random_values(size_t(c.hkv * c.cap * c.d), 7);
      auto vv = random_values(size_t(c.hkv * c.cap * c.d), 8);
      Tensor q = host_f32(*b, "q", {c.n, c.hq, c.d}, qv);
      Tensor k = host_f32(*b, "k", {c.hkv, c.cap, c.d}, kv);
      Tensor v = host_f32(*b, "v", {c.hkv, c.cap, c.d}, vv);
      Tensor out = b->alloc("out", DType::F32, {c.n, c.hq, c.d});
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      b->attention_causal(q, k, v, c.start, scale, out);
      expect_close(out.data_as<float>(),
                   reference_attention(qv, kv, vv, c.start, c.n, c.hq, c.hkv, c.d, c.cap, scale),
                   1e-5f);
      EXPECT_THROW(b->attention_causal(q, k, v, c.cap - c.n + 1, scale, out), InvalidArgument);
    });
  }
}

TEST(CpuOps, KvAppendWritesHeadMajorRows) {
  auto b = make_cpu_backend(1);
  const int64_t n = 2, heads = 3, d = 4, cap = 5;
  std::vector<float> src(static_cast<size_t>(n * heads * d));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
  Tensor s = host_f32(*b, "s", {n, heads, d}, src);
  Tensor cache = b->alloc("cache", DType::F32, {heads, cap, d});
  b->kv_append(s, cache, 3);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t e = 0; e < d; ++e)
        EXPECT_EQ(cache.data_as<float>()[(h * cap + 3 + i) * d + e],
                  src[size_t((i * heads + h) * d + e)]);
  EXPECT_EQ(cache.data_as<float>()[0], 0.0f);
  EXPECT_THROW(b->kv_append(s, cache, 4), InvalidArgument);
}

TEST(CpuOps, EmbeddingSwigluAddAndCopyRows) {
  auto b = make_cpu_backend(1);
  auto tv = random_values(12, 9);
  Tensor table = host_weight(*b, DType::BF16, {4, 3}, tv);
  Tensor out = b->alloc("e", DType::F32, {2, 3});
  const std::vector<int32_t> ids = {3, 1};
  b->embedding(table, ids, out);
  EXPECT_EQ(out.data_as<float>()[0], tv[9]);
  EXPECT_EQ(out.data_as<float>()[5], tv[5]);
  const std::vector<int32_t> bad = {4, 0};
  EXPECT_THROW(b->embedding(table, bad, out), InvalidArgument);

  Tensor g = host_f32(*b, "g", {1, 2}, {1.0f, -2.0f}), u = host_f32(*b, "u", {1, 2}, {3.0f, 0.5f});
  Tensor o = b->alloc("o", DType::F32, {1, 2});
  b->swiglu(g, u, o);
  EXPECT_NEAR(o.data_as<float>()[0], 1.0 / (1.0 + std::exp(-1.0)) * 3.0, 1e-6);
  EXPECT_NEAR(o.data_as<float>()[1], -2.0 / (1.0 + std::exp(2.0)) * 0.5, 1e-6);
  b->add(g, u, o);
  EXPECT_EQ(o.data_as<float>()[0], 4.0f);

  Tensor cache = b->alloc("c", DType::F32, {4, 2});
  b->copy_rows(u, cache, 2);
  EXPECT_EQ(cache.data_as<float>()[4], 3.0f);
  EXPECT_THROW(b->copy_rows(u, cache, 4), InvalidArgument);
}

}  // namespace
}  // namespace infera
