// The fused ops of ops/backend.h (add_rmsnorm, matmul_multi, matmul_swiglu, matmul_swiglu_down,
// qk_norm_rope_kv_write, argmax_rows), run by the harness on every backend and SIMD target against
// scalar references in double written here: the CPU exercises Backend's composite defaults, a
// GPU its fused kernels. Shapes cover 1 row, odd and unaligned widths, and both sides of the
// CUDA GEMV/GEMM switch (8 rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/op_harness.h"
#include "core/dtype_convert.h"
#include "ops/backend.h"

namespace infera::test {
namespace {

using Doubles = std::vector<double>;
const DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};

class FusedOps : public ::testing::TestWithParam<HarnessBackend> {};

TEST_P(FusedOps, AddRmsNorm) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(31);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::RmsNorm, {wt})) {
        report.declined(Op::AddRmsNorm, wt);
        continue;
      }
      for (auto [rows, dim] : {std::pair{1, 1}, {1, 7}, {3, 64}, {17, 129}, {2, 1024}, {4, 4100}}) {
        HostData x = make_host_data(DType::F32, size_t(rows * dim), rng, 3.0f);
        HostData d = make_host_data(DType::F32, size_t(rows * dim), rng, 2.0f);
        HostData w = make_host_data(wt, size_t(dim), rng);
        Tensor xt = to_backend(b, "x", DType::F32, {rows, dim}, x);
        Tensor dt = to_backend(b, "delta", DType::F32, {rows, dim}, d);
        Tensor wtn = to_backend(b, "w", wt, {dim}, w);
        Tensor out = b.alloc("out", DType::F32, {rows, dim});
        b.add_rmsnorm(xt, dt, wtn, 1e-6f, out);
        Doubles sum(x.values.size()), want(x.values.size());
        for (size_t i = 0; i < sum.size(); ++i) sum[i] = double(x.values[i]) + d.values[i];
        for (int r = 0; r < rows; ++r) {
          double ss = 0;
          for (int i = 0; i < dim; ++i) ss += sum[size_t(r * dim + i)] * sum[size_t(r * dim + i)];
          const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
          for (int i = 0; i < dim; ++i)
            want[size_t(r * dim + i)] = w.values[size_t(i)] * sum[size_t(r * dim + i)] * inv;
        }
        const std::string name = dims({rows, dim});
        report.check(Op::Add, DType::F32, name + " residual", read_back(b, xt), sum);
        report.check(Op::AddRmsNorm, wt, name, read_back(b, out), want);
      }
    }
  });
}

TEST_P(FusedOps, MatmulMultiAndSwiglu) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(32);
    for (DType wt : kFloatTypes) {
      if (!b.supports(Op::Matmul, {wt})) {
        report.declined(Op::Matmul, wt);
        continue;
      }
      // k = 100 is no multiple of 8 (no 16-byte loads of 16-bit rows); n = 9 and 12 are past the
      // 8-row GEMV. k = 2056 and 3072 with 1-2 rows: the bf16 GEMV's preloaded round of 8 loads
      // per lane (kTuneGemvPreload), then a second round with a partial tail.
      for (auto [n, k, m] : {std::tuple{1, 64, 37},
                             {1, 1024, 48},
                             {1, 2056, 11},
                             {2, 3072, 6},
                             {3, 100, 20},
                             {8, 256, 33},
                             {9, 128, 40},
                             {12, 64, 7},
                             // CUDA's skinny GEMM: one launch for the three weights, the SwiGLU
                             // epilogue; odd rows, partial tiles, k = 72 (a partial 64 chunk).
                             {17, 256, 130},
                             {64, 1024, 96},
                             {100, 72, 65},
                             {100, 1024, 64},
                             {256, 128, 64},
                             // The weight-streaming GEMM (cuda_stream): 8 and 255 rows,
                             // a partial k chunk and partial weight tiles.
                             {8, 1032, 200},
                             {255, 1032, 130},
                             // Prefill sizes: CUDA's bf16 gate/up GEMMs and the bf16 SwiGLU
                             // (16-byte path; 1030 x 133 is no multiple of 8: the scalar one).
                             {600, 256, 200},
                             {1030, 128, 133}}) {
        if (skip_under_sanitizer(b, int64_t(n) * k * m)) continue;
        HostData x = make_host_data(DType::F32, size_t(n * k), rng);
        Tensor xt = to_backend(b, "x", DType::F32, {n, k}, x);
        const int ms[3] = {m, m / 2 + 1, 3};
        std::vector<HostData> w;
        std::vector<Tensor> wt_t, out_t;
        for (int i = 0; i < 3; ++i) {
          w.push_back(make_host_data(wt, size_t(ms[i] * k), rng));
          wt_t.push_back(to_backend(b, "w" + std::to_string(i), wt, {ms[i], k}, w.back()));
          out_t.push_back(b.alloc("out" + std::to_string(i), DType::F32, {n, ms[i]}));
        }
        const Tensor* ws[] = {&wt_t[0], &wt_t[1], &wt_t[2]};
        Tensor* outs[] = {&out_t[0], &out_t[1], &out_t[2]};
        b.matmul_multi(xt, ws, outs);
        for (int i = 0; i < 3; ++i)
          report.check(Op::Matmul, wt, dims({n, k, ms[i]}) + " multi " + std::to_string(i),
                       read_back(b, out_t[size_t(i)]),
                       matmul_reference(x.values, w[size_t(i)].values, n, k, ms[i]));
        // q/k/v-like: the last two weights of one shape (CUDA's paired_gemm: one launch).
        {
          HostData w_v = make_host_data(wt, size_t(ms[1] * k), rng);
          Tensor v_t = to_backend(b, "w_v", wt, {ms[1], k}, w_v);
          Tensor v_out = b.alloc("out_v", DType::F32, {n, ms[1]});
          const Tensor* ws2[] = {&wt_t[0], &wt_t[1], &v_t};
          Tensor* outs2[] = {&out_t[0], &out_t[1], &v_out};
          b.matmul_multi(xt, ws2, outs2);
          report.check(Op::Matmul, wt, dims({n, k, ms[1]}) + " multi k", read_back(b, out_t[1]),
                       matmul_reference(x.values, w[1].values, n, k, ms[1]));
          report.check(Op::Matmul, wt, dims({n, k, ms[1]}) + " multi v", read_back(b, v_out),
                       matmul_reference(x.values, w_v.values, n, k, ms[1]));
        }

        Tensor gate = b.alloc("gate", DType::F32, {n, m}), up = b.alloc("up", DType::F32, {n, m});
        b.matmul_swiglu(xt, wt_t[0], wt_t[0], gate, up);
        // gate = silu(x.w0) * (x.w0) with the same weight twice: checks the epilogue's pairing.
        const Doubles g = matmul_reference(x.values, w[0].values, n, k, m);
        Doubles want(g.size());
        for (size_t i = 0; i < g.size(); ++i) want[i] = g[i] / (1.0 + std::exp(-g[i])) * g[i];
        report.check(Op::MatmulSwiglu, wt, dims({n, k, m}) + " same weight", read_back(b, gate),
                     want);
        HostData w_up = make_host_data(wt, size_t(m * k), rng);
        Tensor up_t = to_backend(b, "w_up", wt, {m, k}, w_up);
        b.matmul_swiglu(xt, wt_t[0], up_t, gate, up);
        const Doubles u = matmul_reference(x.values, w_up.values, n, k, m);
        for (size_t i = 0; i < g.size(); ++i) want[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        report.check(Op::MatmulSwiglu, wt, dims({n, k, m}), read_back(b, gate), want);
        // The whole MLP (matmul_swiglu_down): that SwiGLU result through a down projection
        // [md, m]; md = 75 is no multiple of 8, and 1 + k / 2 follows k.
        for (const int md : {75, 1 + k / 2}) {
          HostData w_dn = make_host_data(wt, size_t(md * m), rng);
          Tensor dn_t = to_backend(b, "w_down", wt, {md, m}, w_dn);
          Tensor mlp = b.alloc("mlp", DType::F32, {n, md});
          b.matmul_swiglu_down(xt, wt_t[0], up_t, dn_t, gate, up, mlp);
          Doubles want_mlp(size_t(n * md));
          for (int i = 0; i < n; ++i)
            for (int j = 0; j < md; ++j) {
              double acc = 0;
              for (int p = 0; p < m; ++p)
                acc += want[size_t(i * m + p)] * double(w_dn.values[size_t(j * m + p)]);
              want_mlp[size_t(i * md + j)] = acc;
            }
          report.check(Op::MatmulSwigluDown, wt, dims({n, k, m, md}), read_back(b, mlp), want_mlp);
        }
      }
    }
  });
}

// Scalar attention of row i (position i, causal) over keys/values [len, hkv, d], in double.
void attend(const std::vector<float>& q, const Doubles& keys, const Doubles& values, int n, int hq,
            int hkv, int d, Doubles& out) {
  const double scale = 1.0 / std::sqrt(double(float(d)));
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < hq; ++h) {
      const int g = h / (hq / hkv);
      Doubles s(size_t(i + 1));
      double mx = -1e300, sum = 0;
      for (int t = 0; t <= i; ++t) {
        double dot = 0;
        for (int e = 0; e < d; ++e)
          dot += q[size_t((i * hq + h) * d + e)] * keys[size_t((t * hkv + g) * d + e)];
        s[size_t(t)] = dot * double(float(scale));
        mx = std::max(mx, s[size_t(t)]);
      }
      for (double& v : s) sum += (v = std::exp(v - mx));
      for (int e = 0; e < d; ++e) {
        double o = 0;
        for (int t = 0; t <= i; ++t)
          o += s[size_t(t)] / sum * values[size_t((t * hkv + g) * d + e)];
        out[size_t((i * hq + h) * d + e)] = o;
      }
    }
}

// What a cache of dtype t stores for v (round to nearest even).
double round_to(DType t, double v) {
  const float f = float(v);
  if (t == DType::BF16) return bf16_to_f32(f32_to_bf16(f));
  if (t == DType::F16) return f16_to_f32(f32_to_f16(f));
  return f;
}

TEST_P(FusedOps, QkNormRopeKvWrite) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(33);
    for (DType ct : kFloatTypes) {
      if (!b.supports(Op::KvWrite, {ct}) || !b.supports(Op::Attention, {ct})) {
        report.declined(Op::QkNormRopeKvWrite, ct);
        continue;
      }
      // n tokens of one sequence at positions 0..n-1, their slots spread over shuffled blocks.
      for (auto [n, hq, hkv, d, bs] :
           {std::tuple{1, 2, 1, 8, 16},
            {5, 4, 2, 34, 4},
            {19, 6, 3, 64, 8},
            {3, 16, 8, 128, 16},
            // Prefill sizes for CUDA's per-token kernel (heads in fours, d 64 / 128 / 256).
            {300, 8, 4, 64, 32},
            {130, 16, 8, 128, 16},
            {37, 4, 4, 256, 16}}) {
        const int blocks = (n + bs - 1) / bs + 2;
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        BatchDesc desc;
        desc.max_blocks = blocks;
        desc.query_start = {0, n};
        desc.seq_lens = {n};
        desc.block_table = table;
        for (int i = 0; i < n; ++i) {
          desc.tokens.push_back(0);
          desc.positions.push_back(i);
          desc.slots.push_back(table[size_t(i / bs)] * bs + i % bs);
        }
        const Batch batch = b.upload_batch(desc);
        HostData q = make_host_data(DType::F32, size_t(n * hq * d), rng, 2.0f);
        HostData k = make_host_data(DType::F32, size_t(n * hkv * d), rng, 2.0f);
        HostData v = make_host_data(DType::F32, size_t(n * hkv * d), rng);
        HostData qn = make_host_data(ct == DType::F32 ? DType::F32 : DType::BF16, size_t(d), rng);
        HostData kn = make_host_data(ct == DType::F32 ? DType::F32 : DType::BF16, size_t(d), rng);
        const DType nt = ct == DType::F32 ? DType::F32 : DType::BF16;
        Tensor qt = to_backend(b, "q", DType::F32, {n, hq, d}, q);
        Tensor kt = to_backend(b, "k", DType::F32, {n, hkv, d}, k);
        Tensor vt = to_backend(b, "v", DType::F32, {n, hkv, d}, v);
        Tensor qnt = to_backend(b, "q_norm", nt, {d}, qn),
               knt = to_backend(b, "k_norm", nt, {d}, kn);
        const Shape pool{hkv, blocks, bs, d};
        KvLayer cache{b.alloc("keys", ct, pool), b.alloc("values", ct, pool)};
        const double theta = 1e6;
        b.qk_norm_rope_kv_write(qt, kt, vt, qnt, knt, 1e-6f, theta, cache, batch);

        // Reference: RMSNorm per head, then RoPE with f32 angles (as the rope case).
        auto norm_rope = [&](const std::vector<float>& x, const std::vector<float>& w, int heads) {
          Doubles y(x.size());
          for (int i = 0; i < n; ++i)
            for (int h = 0; h < heads; ++h) {
              const size_t base = size_t((i * heads + h) * d);
              double ss = 0;
              for (int e = 0; e < d; ++e) ss += double(x[base + size_t(e)]) * x[base + size_t(e)];
              const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
              for (int j = 0; j < d / 2; ++j) {
                const float fi = 1.0f / float(std::pow(float(theta), float(2 * j) / float(d)));
                const double ang = float(desc.positions[size_t(i)]) * fi;
                const double a = w[size_t(j)] * x[base + size_t(j)] * inv;
                const double c = w[size_t(j + d / 2)] * x[base + size_t(j + d / 2)] * inv;
                y[base + size_t(j)] = a * std::cos(ang) - c * std::sin(ang);
                y[base + size_t(j + d / 2)] = c * std::cos(ang) + a * std::sin(ang);
              }
            }
          return y;
        };
        const Doubles qw = norm_rope(q.values, qn.values, hq),
                      kw = norm_rope(k.values, kn.values, hkv);
        const std::string name = dims({n, hq, hkv, d, bs});
        report.check(Op::QkNormRopeKvWrite, DType::F32, name + " q", read_back(b, qt), qw);
        report.check(Op::QkNormRopeKvWrite, DType::F32, name + " k", read_back(b, kt), kw);
        // The cache through attention: causal attention of fresh queries over what was written,
        // against the reference keys and values rounded to the cache dtype.
        Doubles kc(kw.size()), vc(v.values.size());
        for (size_t i = 0; i < kc.size(); ++i) kc[i] = round_to(ct, kw[i]);
        for (size_t i = 0; i < vc.size(); ++i) vc[i] = round_to(ct, v.values[i]);
        HostData qa = make_host_data(DType::F32, size_t(n * hq * d), rng);
        Tensor qat = to_backend(b, "qa", DType::F32, {n, hq, d}, qa);
        Tensor out = b.alloc("out", DType::F32, {n, hq, d});
        b.attention(qat, cache, batch, {.scale = 1.0f / std::sqrt(float(d)), .causal = true}, out);
        Doubles want(size_t(n * hq * d));
        attend(qa.values, kc, vc, n, hq, hkv, d, want);
        report.check(Op::QkNormRopeKvWrite, ct, name + " cache", read_back(b, out), want);
      }
    }
  });
}

// A decode step's qk-norm/RoPE/KV write followed by attention of that q over the cache: one
// sequence of len keys, the first len - 1 written by a prompt step, then one new row. The CUDA
// backend may fold the pair into one launch (CudaOptions::fuse_qk_attention, target cuda_b1);
// every backend must give the scalar reference's attention, q and k rotated in place, and the
// new key in the cache (seen by the attention).
TEST_P(FusedOps, QkNormRopeThenDecodeAttention) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(35);
    for (DType ct : kFloatTypes) {
      if (!b.supports(Op::KvWrite, {ct}) || !b.supports(Op::Attention, {ct})) {
        report.declined(Op::QkNormRopeKvWrite, ct);
        continue;
      }
      // Group 2 and 4, head_dim 128 and 64, and a length whose keys are split across blocks.
      for (auto [len, hq, hkv, d, bs] :
           {std::tuple{70, 16, 8, 128, 16}, {45, 8, 2, 64, 8}, {600, 16, 8, 128, 16}}) {
        const int blocks = (len + bs - 1) / bs + 1;
        std::vector<int32_t> table(static_cast<size_t>(blocks));
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        auto slot = [&](int t) { return table[size_t(t / bs)] * bs + t % bs; };
        BatchDesc pre, dec;
        pre.max_blocks = dec.max_blocks = blocks;
        pre.block_table = dec.block_table = table;
        pre.query_start = {0, len - 1};
        pre.seq_lens = {len - 1};
        for (int i = 0; i < len - 1; ++i) {
          pre.tokens.push_back(0);
          pre.positions.push_back(i);
          pre.slots.push_back(slot(i));
        }
        dec.query_start = {0, 1};
        dec.seq_lens = {len};
        dec.tokens = {0};
        dec.positions = {len - 1};
        dec.slots = {slot(len - 1)};
        const int n0 = len - 1;
        HostData q0 = make_host_data(DType::F32, size_t(n0 * hq * d), rng, 2.0f);
        HostData k0 = make_host_data(DType::F32, size_t(n0 * hkv * d), rng, 2.0f);
        HostData v0 = make_host_data(DType::F32, size_t(n0 * hkv * d), rng);
        HostData q1 = make_host_data(DType::F32, size_t(hq * d), rng, 2.0f);
        HostData k1 = make_host_data(DType::F32, size_t(hkv * d), rng, 2.0f);
        HostData v1 = make_host_data(DType::F32, size_t(hkv * d), rng);
        HostData qn = make_host_data(DType::BF16, size_t(d), rng);
        HostData kn = make_host_data(DType::BF16, size_t(d), rng);
        Tensor qnt = to_backend(b, "q_norm", DType::BF16, {d}, qn),
               knt = to_backend(b, "k_norm", DType::BF16, {d}, kn);
        const Shape pool{hkv, blocks, bs, d};
        KvLayer cache{b.alloc("keys", ct, pool), b.alloc("values", ct, pool)};
        const double theta = 1e6;
        const float eps = 1e-6f;
        {
          const Batch batch = b.upload_batch(pre);
          Tensor qt = to_backend(b, "q0", DType::F32, {n0, hq, d}, q0);
          Tensor kt = to_backend(b, "k0", DType::F32, {n0, hkv, d}, k0);
          Tensor vt = to_backend(b, "v0", DType::F32, {n0, hkv, d}, v0);
          b.qk_norm_rope_kv_write(qt, kt, vt, qnt, knt, eps, theta, cache, batch);
        }
        const Batch batch = b.upload_batch(dec);
        Tensor qt = to_backend(b, "q1", DType::F32, {1, hq, d}, q1);
        Tensor kt = to_backend(b, "k1", DType::F32, {1, hkv, d}, k1);
        Tensor vt = to_backend(b, "v1", DType::F32, {1, hkv, d}, v1);
        Tensor out = b.alloc("out", DType::F32, {1, hq, d});
        b.qk_norm_rope_kv_write(qt, kt, vt, qnt, knt, eps, theta, cache, batch);
        b.attention(qt, cache, batch, {.scale = 1.0f / std::sqrt(float(d)), .causal = true}, out);

        // Reference: RMSNorm per head, RoPE with f32 angles at `pos`, as QkNormRopeKvWrite's.
        auto norm_rope = [&](const float* x, const std::vector<float>& w, int pos, double* y) {
          double ss = 0;
          for (int e = 0; e < d; ++e) ss += double(x[e]) * x[e];
          const double inv = 1.0 / std::sqrt(ss / d + double(eps));
          for (int j = 0; j < d / 2; ++j) {
            const float fi = 1.0f / float(std::pow(float(theta), float(2 * j) / float(d)));
            const double ang = float(pos) * fi;
            const double a = w[size_t(j)] * x[j] * inv,
                         c = w[size_t(j + d / 2)] * x[j + d / 2] * inv;
            y[j] = a * std::cos(ang) - c * std::sin(ang);
            y[j + d / 2] = c * std::cos(ang) + a * std::sin(ang);
          }
        };
        Doubles keys(size_t(len * hkv * d)), values(keys.size()), qw(size_t(hq * d)),
            kw(size_t(hkv * d));
        for (int t = 0; t < len; ++t)
          for (int g = 0; g < hkv; ++g) {
            const size_t at = size_t((t * hkv + g) * d);
            const float* kx = t < n0 ? &k0.values[at] : &k1.values[size_t(g * d)];
            const float* vx = t < n0 ? &v0.values[at] : &v1.values[size_t(g * d)];
            norm_rope(kx, kn.values, t, &keys[at]);
            if (t == n0) std::copy_n(&keys[at], d, &kw[size_t(g * d)]);
            for (int e = 0; e < d; ++e) {
              keys[at + size_t(e)] = round_to(ct, keys[at + size_t(e)]);
              values[at + size_t(e)] = round_to(ct, vx[e]);
            }
          }
        for (int h = 0; h < hq; ++h)
          norm_rope(&q1.values[size_t(h * d)], qn.values, n0, &qw[size_t(h * d)]);
        Doubles want(size_t(hq * d));
        const double scale = double(1.0f / std::sqrt(float(d)));
        for (int h = 0; h < hq; ++h) {
          const int g = h / (hq / hkv);
          Doubles s(static_cast<size_t>(len));
          double mx = -1e300, sum = 0;
          for (int t = 0; t < len; ++t) {
            double dot = 0;
            for (int e = 0; e < d; ++e)
              dot += double(float(qw[size_t(h * d + e)])) * keys[size_t((t * hkv + g) * d + e)];
            mx = std::max(mx, s[size_t(t)] = dot * scale);
          }
          for (double& v : s) sum += (v = std::exp(v - mx));
          for (int e = 0; e < d; ++e) {
            double o = 0;
            for (int t = 0; t < len; ++t)
              o += s[size_t(t)] / sum * values[size_t((t * hkv + g) * d + e)];
            want[size_t(h * d + e)] = o;
          }
        }
        const std::string name = dims({len, hq, hkv, d, bs});
        report.check(Op::Attention, ct, name + " decode out", read_back(b, out), want);
        report.check(Op::QkNormRopeKvWrite, DType::F32, name + " decode q", read_back(b, qt), qw);
        report.check(Op::QkNormRopeKvWrite, DType::F32, name + " decode k", read_back(b, kt), kw);
      }
    }
  });
}

TEST_P(FusedOps, ArgmaxRows) {
  auto b = GetParam().make();
  std::mt19937 rng(34);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  for (int width : {1, 7, 1000, 151937}) {
    const int rows = 6;
    std::vector<float> x(size_t(rows * width));
    std::uniform_real_distribution<float> dist(-30.0f, 30.0f);
    for (float& v : x) v = dist(rng);
    std::vector<int32_t> want(static_cast<size_t>(rows));
    auto at = [&](int r, int j) -> float& { return x[size_t(r * width + j)]; };
    // Row 1: a tie for the maximum (the lower index wins); row 2: NaN and +inf's neighbour;
    // row 3: all -inf (-1); row 4: NaNs and -inf only (-1); row 5: the maximum last.
    if (width > 2) {
      at(1, width / 3) = at(1, width - 1) = 100.0f;
      at(2, 0) = nan;
      at(2, width / 2) = inf;
    }
    for (int j = 0; j < width; ++j) {
      at(3, j) = -inf;
      at(4, j) = j % 2 ? nan : -inf;
    }
    at(5, width - 1) = 1000.0f;
    // Row 0 of the widest case: the maximum is zero, first as -0, then +0 (equal: the first wins).
    if (width > 1000) {
      for (int j = 0; j < width; ++j) at(0, j) = -1.0f - float(j % 7);
      at(0, 5000) = -0.0f;
      at(0, 9000) = 0.0f;
    }
    for (int r = 0; r < rows; ++r) {
      int32_t best = -1;
      float bv = -inf;
      for (int j = 0; j < width; ++j)
        if (at(r, j) > bv) bv = at(r, j), best = j;
      want[size_t(r)] = best;
    }
    HostData h;
    h.values = x;
    h.bytes.resize(x.size() * 4);
    std::memcpy(h.bytes.data(), x.data(), h.bytes.size());
    Tensor t = to_backend(*b, "logits", DType::F32, {rows, width}, h);
    std::vector<int32_t> got(static_cast<size_t>(rows), -7);
    b->argmax_rows(t, got);
    EXPECT_EQ(got, want) << "width " << width;
    if (width > 2) {
      EXPECT_EQ(want[1], width / 3);
      EXPECT_EQ(want[2], width / 2);
    }
    if (width > 1000) EXPECT_EQ(want[0], 5000);
    EXPECT_EQ(want[3], -1);
    EXPECT_EQ(want[4], -1);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, FusedOps, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
