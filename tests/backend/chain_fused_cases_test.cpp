// Backend::rmsnorm_matmul_multi and Backend::output_mlp (ops/backend.h), run by the harness on
// every backend and SIMD target: against a scalar reference in double written here, and against
// the same backend's composition of the ops each is defined as, which must give the same bits
// (the CPU runs the composite defaults; CUDA's batch-1 GEMVs with a norm prologue or residual
// epilogue reproduce the norm kernels' summation order and the same dot products, on the
// cuda_b1fuse target (CudaOptions::b1_fused_chain, off by default), and every other shape or
// target runs the composition).
// Shapes: Qwen3-0.6B (hidden 1024, q 2048, MLP 3072, kv 1024), the two fixture models' shapes,
// a hidden size that is no multiple of 256 (partial rounds of the GEMV's norm), the largest
// hidden size the CUDA norm prologue takes (4096) and one past it, widths that are no multiple
// of 8, 3 rows, the last layer (no next norm), and a next norm without next projections.
#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <string>
#include <vector>

#include "backend/op_harness.h"
#include "ops/backend.h"

namespace infera::test {
namespace {

using Doubles = std::vector<double>;

// Elements that differ in their bits (NaN-safe: a NaN never equals).
int mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) bad += !(a[i] == b[i]);
  return bad;
}

// A case: n rows of hidden size d, attention width q, MLP width f, the next layer's projections
// of widths m0..m2 (next = 0: no next norm, the last layer; 1: a next norm only; 3: q/k/v).
struct ChainCase {
  int n, d, q, f, next;
  int m[3];
};

class ChainFusedOps : public ::testing::TestWithParam<HarnessBackend> {};

TEST_P(ChainFusedOps, MatchesReferenceAndComposition) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(43);
    const float eps = 1e-6f;
    for (DType wt : {DType::BF16, DType::F32, DType::F16}) {
      if (!b.supports(Op::Matmul, {wt}) || !b.supports(Op::RmsNorm, {wt})) {
        report.declined(Op::OutputMlp, wt);
        continue;
      }
      for (const ChainCase& c : {ChainCase{1, 1024, 2048, 3072, 3, {2048, 1024, 1024}},
                                 {1, 128, 256, 384, 3, {256, 64, 64}},
                                 {1, 32, 64, 64, 3, {64, 32, 32}},
                                 {1, 136, 72, 40, 3, {24, 8, 8}},
                                 {1, 4096, 64, 24, 3, {40, 16, 16}},
                                 {1, 4104, 16, 8, 3, {8, 8, 8}},
                                 {1, 1024, 2048, 3072, 0, {}},
                                 {1, 24, 40, 40, 0, {}},
                                 {1, 64, 64, 96, 1, {}},
                                 {1, 36, 52, 52, 3, {12, 4, 4}},
                                 {3, 64, 96, 96, 3, {32, 16, 16}}}) {
        const int n = c.n, d = c.d, q = c.q, f = c.f, nexts = c.next == 3 ? 3 : 0;
        HostData x = make_host_data(DType::F32, size_t(n * d), rng, 2.0f);
        HostData attn = make_host_data(DType::F32, size_t(n * q), rng, 1.0f);
        HostData attn_norm = make_host_data(wt, size_t(d), rng);
        HostData mlp_norm = make_host_data(wt, size_t(d), rng);
        HostData next_norm = make_host_data(wt, size_t(d), rng);
        HostData wo = make_host_data(wt, size_t(d * q), rng, 0.2f);
        HostData wg = make_host_data(wt, size_t(f * d), rng, 0.2f);
        HostData wu = make_host_data(wt, size_t(f * d), rng, 0.2f);
        HostData wd = make_host_data(wt, size_t(d * f), rng, 0.2f);
        std::vector<HostData> wn;
        for (int i = 0; i < nexts; ++i)
          wn.push_back(make_host_data(wt, size_t(c.m[i] * d), rng, 0.2f));
        Tensor attn_norm_t = to_backend(b, "attn_norm", wt, {d}, attn_norm);
        Tensor mlp_norm_t = to_backend(b, "mlp_norm", wt, {d}, mlp_norm);
        Tensor next_norm_t = c.next ? to_backend(b, "next_norm", wt, {d}, next_norm) : Tensor{};
        Tensor wo_t = to_backend(b, "w_o", wt, {d, q}, wo);
        Tensor wg_t = to_backend(b, "w_gate", wt, {f, d}, wg);
        Tensor wu_t = to_backend(b, "w_up", wt, {f, d}, wu);
        Tensor wd_t = to_backend(b, "w_down", wt, {d, f}, wd);
        std::vector<Tensor> wn_t;
        for (int i = 0; i < nexts; ++i)
          wn_t.push_back(
              to_backend(b, "w_next" + std::to_string(i), wt, {c.m[i], d}, wn[size_t(i)]));

        // Reference: x += attn.Wo; xn = norm(x); h = silu(xn.Wg) * (xn.Wu); x += h.Wd; next
        // norm; the next projections of it. And rmsnorm_matmul_multi: norm(x) and its q/k/v.
        const Doubles x0 = as_doubles(x.values);
        const Doubles p = matvec_reference(as_doubles(attn.values), wo.values, n, q, d);
        Doubles s(x0.size());
        for (size_t i = 0; i < s.size(); ++i) s[i] = x0[i] + p[i];
        const Doubles xn1 = rmsnorm_reference(s, mlp_norm.values, n, d, eps);
        const Doubles g = matvec_reference(xn1, wg.values, n, d, f),
                      u = matvec_reference(xn1, wu.values, n, d, f);
        Doubles h(g.size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const Doubles p2 = matvec_reference(h, wd.values, n, f, d);
        Doubles x2(s.size());
        for (size_t i = 0; i < x2.size(); ++i) x2[i] = s[i] + p2[i];
        const Doubles xn2 = c.next ? rmsnorm_reference(x2, next_norm.values, n, d, eps) : xn1;
        const Doubles xn0 = rmsnorm_reference(x0, attn_norm.values, n, d, eps);

        std::deque<HostData> copies;  // tensors the ops write get their own copy
        auto mutable_x = [&](const char* tname) {
          copies.push_back(x);
          return to_backend(b, tname, DType::F32, {n, d}, copies.back());
        };
        Tensor attn_t = to_backend(b, "attn", DType::F32, {n, q}, attn);
        auto run = [&](bool fused, Tensor& xt, Tensor& xn, std::vector<Tensor>& outs) {
          Tensor gate = b.alloc("gate", DType::F32, {n, f}), up = b.alloc("up", DType::F32, {n, f});
          Tensor proj = b.alloc("proj", DType::F32, {n, d});
          std::vector<const Tensor*> ws;
          std::vector<Tensor*> os;
          for (int i = 0; i < nexts; ++i) {
            outs.push_back(b.alloc("next_out", DType::F32, {n, c.m[i]}));
            ws.push_back(&wn_t[size_t(i)]);
          }
          for (Tensor& o : outs) os.push_back(&o);
          if (fused) {
            b.output_mlp(attn_t, wo_t, xt, mlp_norm_t, wg_t, wu_t, wd_t, next_norm_t, ws, os, eps,
                         xn, gate, up, proj);
            return;
          }
          b.matmul(attn_t, wo_t, proj);
          b.residual_mlp(xt, proj, mlp_norm_t, wg_t, wu_t, wd_t, next_norm_t, eps, xn, gate, up,
                         proj);
          if (nexts) b.matmul_multi(xn, ws, os);
        };
        const std::string name = dims({n, d, q, f}) + " next " + std::to_string(c.next);
        for (int rep = 0; rep < 2; ++rep) {  // twice: nothing may depend on an earlier launch
          Tensor xt = mutable_x("x"), cx = mutable_x("cx");
          Tensor xn = b.alloc("xn", DType::F32, {n, d}), cxn = b.alloc("cxn", DType::F32, {n, d});
          std::vector<Tensor> outs, couts;
          run(true, xt, xn, outs);
          run(false, cx, cxn, couts);
          const auto got_x = read_back(b, xt), got_xn = read_back(b, xn);
          report.check(Op::OutputMlp, wt, name + " x", got_x, x2);
          report.check(Op::OutputMlp, wt, name + " xn", got_xn, xn2);
          EXPECT_EQ(mismatches(got_x, read_back(b, cx)), 0) << label << " " << name << " x";
          EXPECT_EQ(mismatches(got_xn, read_back(b, cxn)), 0) << label << " " << name << " xn";
          for (int i = 0; i < nexts; ++i) {
            const auto got = read_back(b, outs[size_t(i)]);
            report.check(Op::OutputMlp, wt, name + " next " + std::to_string(i), got,
                         matvec_reference(xn2, wn[size_t(i)].values, n, d, c.m[i]));
            EXPECT_EQ(mismatches(got, read_back(b, couts[size_t(i)])), 0)
                << label << " " << name << " next projection " << i;
          }
          // rmsnorm_matmul_multi on the same x, widths and next weights.
          if (nexts == 0) continue;
          Tensor x1 = mutable_x("x1");
          Tensor yn = b.alloc("yn", DType::F32, {n, d}), cyn = b.alloc("cyn", DType::F32, {n, d});
          std::vector<Tensor> ys, cys;
          std::vector<const Tensor*> ws;
          std::vector<Tensor*> yp, cyp;
          for (int i = 0; i < nexts; ++i) {
            ys.push_back(b.alloc("y", DType::F32, {n, c.m[i]}));
            cys.push_back(b.alloc("cy", DType::F32, {n, c.m[i]}));
            ws.push_back(&wn_t[size_t(i)]);
          }
          for (int i = 0; i < nexts; ++i) {
            yp.push_back(&ys[size_t(i)]);
            cyp.push_back(&cys[size_t(i)]);
          }
          b.rmsnorm_matmul_multi(x1, attn_norm_t, eps, yn, ws, yp);
          b.rmsnorm(x1, attn_norm_t, eps, cyn);
          b.matmul_multi(cyn, ws, cyp);
          const auto got_yn = read_back(b, yn);
          report.check(Op::RmsNormMatmulMulti, wt, name + " xn", got_yn, xn0);
          EXPECT_EQ(mismatches(got_yn, read_back(b, cyn)), 0) << label << " " << name << " yn";
          EXPECT_EQ(mismatches(read_back(b, x1), x.values), 0) << label << " " << name << " x1";
          for (int i = 0; i < nexts; ++i) {
            const auto got = read_back(b, ys[size_t(i)]);
            report.check(Op::RmsNormMatmulMulti, wt, name + " out " + std::to_string(i), got,
                         matvec_reference(xn0, wn[size_t(i)].values, n, d, c.m[i]));
            EXPECT_EQ(mismatches(got, read_back(b, cys[size_t(i)])), 0)
                << label << " " << name << " rmsnorm_matmul_multi out " << i;
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ChainFusedOps, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
