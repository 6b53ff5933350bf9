// Backend::residual_mlp (ops/backend.h), run by the harness on every backend and SIMD target:
// against a scalar reference in double written here, and against the same backend's composition
// of the ops it is defined as. The CPU runs the composite default; CUDA its one-kernel version
// for one row with bf16 weights (residual_mlp.cu; on for the cuda_exact target, and for cuda_b1
// on 5 blocks) and the composition for everything else.
// Shapes: the Qwen3-0.6B MLP (1024 x 3072), widths that do not divide into the CUDA grid's slices
// (on cuda_b1's 5 blocks: several rows per block, empty and partial slices),
// widths that are no multiple of 8 (the composition), 3 rows, and the last layer (no next norm).
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

class ResidualMlpOps : public ::testing::TestWithParam<HarnessBackend> {};

TEST_P(ResidualMlpOps, MatchesReferenceAndComposition) {
  for_each_target(GetParam(), [](Backend& b, const std::string& label) {
    OpReport report(label);
    std::mt19937 rng(41);
    const float eps = 1e-6f;
    for (DType wt : {DType::BF16, DType::F32, DType::F16}) {
      if (!b.supports(Op::Matmul, {wt}) || !b.supports(Op::RmsNorm, {wt})) {
        report.declined(Op::ResidualMlp, wt);
        continue;
      }
      for (auto [n, d, f, last] : {std::tuple{1, 1024, 3072, false},
                                   {1, 64, 200, false},
                                   {1, 136, 24, false},
                                   {1, 24, 40, true},
                                   {1, 1024, 3072, true},
                                   {1, 36, 52, false},
                                   {3, 64, 96, false}}) {
        HostData x = make_host_data(DType::F32, size_t(n * d), rng, 2.0f);
        HostData delta = make_host_data(DType::F32, size_t(n * d), rng, 2.0f);
        HostData mlp_norm = make_host_data(wt, size_t(d), rng);
        HostData next_norm = make_host_data(wt, size_t(d), rng);
        HostData wg = make_host_data(wt, size_t(f * d), rng, 0.2f);
        HostData wu = make_host_data(wt, size_t(f * d), rng, 0.2f);
        HostData wd = make_host_data(wt, size_t(d * f), rng, 0.2f);
        Tensor mlp_norm_t = to_backend(b, "mlp_norm", wt, {d}, mlp_norm);
        Tensor next_norm_t = last ? Tensor{} : to_backend(b, "next_norm", wt, {d}, next_norm);
        Tensor wg_t = to_backend(b, "w_gate", wt, {f, d}, wg);
        Tensor wu_t = to_backend(b, "w_up", wt, {f, d}, wu);
        Tensor wd_t = to_backend(b, "w_down", wt, {d, f}, wd);

        // Reference: x += delta; xn = norm(x); h = silu(xn.Wg) * (xn.Wu); x += h.Wd; next norm.
        Doubles s(size_t(n * d));
        for (size_t i = 0; i < s.size(); ++i) s[i] = double(x.values[i]) + delta.values[i];
        const Doubles xn1 = rmsnorm_reference(s, mlp_norm.values, n, d, eps);
        const Doubles g = matvec_reference(xn1, wg.values, n, d, f),
                      u = matvec_reference(xn1, wu.values, n, d, f);
        Doubles h(g.size());
        for (size_t i = 0; i < h.size(); ++i) h[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        const Doubles p = matvec_reference(h, wd.values, n, f, d);
        Doubles x2(s.size());
        for (size_t i = 0; i < x2.size(); ++i) x2[i] = s[i] + p[i];
        const Doubles xn2 = last ? xn1 : rmsnorm_reference(x2, next_norm.values, n, d, eps);

        // Tensors the ops write get their own copy of the data (the CPU backend's
        // prepare_weight borrows the host bytes in place).
        std::deque<HostData> copies;
        auto mutable_copy = [&](const char* tname, const HostData& src) {
          copies.push_back(src);
          return to_backend(b, tname, DType::F32, {n, d}, copies.back());
        };
        // The fused op, with delta in proj's memory (as the model calls it) ...
        Tensor xt = mutable_copy("x", x);
        Tensor proj = mutable_copy("proj", delta);
        Tensor xn = b.alloc("xn", DType::F32, {n, d});
        Tensor gate = b.alloc("gate", DType::F32, {n, f}), up = b.alloc("up", DType::F32, {n, f});
        b.residual_mlp(xt, proj, mlp_norm_t, wg_t, wu_t, wd_t, next_norm_t, eps, xn, gate, up,
                       proj);
        // ... and the composition it is defined as, on the same backend.
        Tensor cx = mutable_copy("cx", x);
        Tensor cproj = mutable_copy("cproj", delta);
        Tensor cxn = b.alloc("cxn", DType::F32, {n, d});
        Tensor cgate = b.alloc("cgate", DType::F32, {n, f}),
               cup = b.alloc("cup", DType::F32, {n, f});
        b.add_rmsnorm(cx, cproj, mlp_norm_t, eps, cxn);
        b.matmul_swiglu(cxn, wg_t, wu_t, cgate, cup);
        b.matmul(cgate, wd_t, cproj);
        if (last)
          b.add(cx, cproj, cx);
        else
          b.add_rmsnorm(cx, cproj, next_norm_t, eps, cxn);

        const std::string name = std::to_string(n) + "x" + std::to_string(d) + "x" +
                                 std::to_string(f) + (last ? " last" : "");
        const std::vector<float> got_x = read_back(b, xt), got_xn = read_back(b, xn);
        report.check(Op::ResidualMlp, wt, name + " x", got_x, x2);
        report.check(Op::ResidualMlp, wt, name + " xn", got_xn, xn2);
        report.check(Op::ResidualMlp, wt, name + " x vs composition", got_x,
                     as_doubles(read_back(b, cx)));
        report.check(Op::ResidualMlp, wt, name + " xn vs composition", got_xn,
                     as_doubles(read_back(b, cxn)));
        // Repeated: the grid barrier's counters must be left ready for the next launch.
        Tensor x3 = mutable_copy("x3", x);
        Tensor proj3 = mutable_copy("proj3", delta);
        b.residual_mlp(x3, proj3, mlp_norm_t, wg_t, wu_t, wd_t, next_norm_t, eps, xn, gate, up,
                       proj3);
        report.check(Op::ResidualMlp, wt, name + " x again", read_back(b, x3), x2);
        report.check(Op::ResidualMlp, wt, name + " xn again", read_back(b, xn), xn2);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, ResidualMlpOps, ::testing::ValuesIn(harness_backends()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace infera::test
