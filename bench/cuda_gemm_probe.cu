// Standalone cuBLAS probe for the Qwen3-0.6B GEMM shapes: the same product timed through the
// backend's current call (cublasGemmEx, bf16 in, f32 out, CUBLAS_GEMM_DEFAULT) and through
// cuBLASLt with its heuristic (top algorithm, 32 MiB workspace) writing f32 or bf16, so one run
// says which of layout, output type or algorithm choice makes the prefill GEMMs slow. Random data
// (never zeros), events around 20 launches, median of 7. Prints TFLOP/s and the checksum-free
// max |difference| of each variant against the first one's output (both read back as f32).
//
//   cuda_gemm_probe            (no arguments; ~10 s on an H200)
//   cuda_gemm_probe --algos    every algorithm cuBLASLt's heuristic offers (up to 16) for the
//                              decoder stack's prefill and batched-decode GEMMs as the backend
//                              runs them (bf16 in, f32 out; o and down with beta 1, the residual
//                              add), each timed and described (tile, stages, split-k, swizzle,
//                              cluster ids), the heuristic's first marked: is it the fastest?
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_probe_lt.h"
#include "cuda_probe_util.cuh"

namespace {

constexpr size_t kWorkspace = size_t{32} << 20;

using probe::fill_bf16;

using probe::bf16_to_f32;

template <typename F>
double time_us(F&& f, cudaStream_t s) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    CK(cudaEventRecord(a, s));
    for (int i = 0; i < 20; ++i) f();
    CK(cudaEventRecord(b, s));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / 20);
  }
  std::sort(t.begin(), t.end());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return t[t.size() / 2];
}

// An algorithm's configuration as cuBLASLt describes it (enum ids; -1 where it says nothing).
void describe(const cublasLtMatmulAlgo_t& algo, char* buf, size_t len) {
  const cublasLtMatmulAlgoConfigAttributes_t attrs[] = {CUBLASLT_ALGO_CONFIG_ID,
                                                        CUBLASLT_ALGO_CONFIG_TILE_ID,
                                                        CUBLASLT_ALGO_CONFIG_STAGES_ID,
                                                        CUBLASLT_ALGO_CONFIG_SPLITK_NUM,
                                                        CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING,
                                                        CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID};
  long long v[6];
  for (int i = 0; i < 6; ++i) {
    uint64_t raw = 0;
    size_t written = 0;
    v[i] = cublasLtMatmulAlgoConfigGetAttribute(&algo, attrs[i], &raw, sizeof raw, &written) ==
                   CUBLAS_STATUS_SUCCESS
               ? static_cast<long long>(written == 4 ? static_cast<uint32_t>(raw) : raw)
               : -1;
  }
  std::snprintf(buf, len, "id %lld tile %lld stages %lld splitk %lld swizzle %lld cluster %lld",
                v[0], v[1], v[2], v[3], v[4], v[5]);
}

// --algos: each heuristic algorithm of each shape, timed.
int probe_algorithms(cudaStream_t s, cublasLtHandle_t lt, void* ws) {
  struct Shape {
    int n, k, m;
    float beta;
    const char* what;
  };
  const Shape shapes[] = {
      {2048, 1024, 4096, 0, "qkv 2048"},     {2048, 2048, 1024, 1, "o 2048"},
      {2048, 1024, 6144, 0, "gate+up 2048"}, {2048, 3072, 1024, 1, "down 2048"},
      {4096, 2048, 1024, 1, "o 8x512"},      {4096, 3072, 1024, 1, "down 8x512"},
      {512, 2048, 1024, 1, "o 512"},         {512, 3072, 1024, 1, "down 512"},
      {256, 1024, 4096, 0, "qkv b256"},      {256, 3072, 1024, 1, "down b256"},
      {64, 1024, 6144, 0, "gate+up b64"},    {64, 3072, 1024, 1, "down b64"}};
  constexpr int kMost = 16;
  for (const Shape& sh : shapes) {
    const int n = sh.n, k = sh.k, m = sh.m;
    __nv_bfloat16 *w, *x;
    float *out, *ref;
    CK(cudaMalloc(&w, size_t(m) * k * 2));
    CK(cudaMalloc(&x, size_t(n) * k * 2));
    CK(cudaMalloc(&out, size_t(n) * m * 4));
    CK(cudaMalloc(&ref, size_t(n) * m * 4));
    fill_bf16<<<1024, 256, 0, s>>>(w, size_t(m) * k, 1234u + m);
    fill_bf16<<<1024, 256, 0, s>>>(x, size_t(n) * k, 99u + n);
    CK(cudaMemsetAsync(ref, 0, size_t(n) * m * 4, s));
    const probe::LtProblem lp(lt, n, k, m, CUDA_R_32F, kWorkspace, kMost);
    const auto& r = lp.algos;
    const int found = static_cast<int>(r.size());
    const float alpha = 1.f, beta0 = 0.f;
    // The reference: algorithm 0 with beta 0 (the product alone); with beta 1 each timed
    // algorithm accumulates, so only the first launch's output is compared, against the
    // reference plus the zeros it started from.
    std::vector<float> want(size_t(n) * m), got(want.size());
    if (found > 0) {
      CB(cublasLtMatmul(lt, lp.op, &alpha, w, lp.a, x, lp.b, &beta0, ref, lp.c, ref, lp.c,
                        &r[0].algo, ws, kWorkspace, s));
      CK(cudaMemcpyAsync(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
    }
    const double fl = 2.0 * n * k * m;
    std::printf("%s (n %d, k %d, m %d, beta %.0f): %d algorithms\n", sh.what, n, k, m, sh.beta,
                found);
    for (int i = 0; i < found; ++i) {
      if (r[i].state != CUBLAS_STATUS_SUCCESS || r[i].workspaceSize > kWorkspace) continue;
      CK(cudaMemsetAsync(out, 0, size_t(n) * m * 4, s));
      const float* beta = &sh.beta;
      auto run = [&] {
        CB(cublasLtMatmul(lt, lp.op, &alpha, w, lp.a, x, lp.b, beta, out, lp.c, out, lp.c,
                          &r[i].algo, ws, kWorkspace, s));
      };
      run();
      CK(cudaMemcpyAsync(got.data(), out, got.size() * 4, cudaMemcpyDeviceToHost, s));
      CK(cudaStreamSynchronize(s));
      double diff = 0;
      for (size_t j = 0; j < got.size(); ++j) {
        const double d = std::fabs(double(got[j]) - double(want[j]));
        diff = std::isnan(d) ? NAN : std::max(diff, d);  // a NaN stays NaN: a failure
        if (std::isnan(diff)) break;
      }
      const double us = time_us(run, s);
      char buf[160];
      describe(r[i].algo, buf, sizeof buf);
      std::printf("  %2d%s %8.1f us %6.0f TFLOP/s  ws %7zu  max|diff| %.1e  %s\n", i,
                  i == 0 ? "*" : " ", us, fl / us * 1e-6, r[i].workspaceSize, diff, buf);
    }
    cudaFree(w);
    cudaFree(x);
    cudaFree(out);
    cudaFree(ref);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool algos = argc > 1 && std::string(argv[1]) == "--algos";
  if (argc > 1 && !algos) {
    std::fprintf(stderr, "usage: cuda_gemm_probe [--algos]\n");
    return 2;
  }
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasHandle_t h;
  CB(cublasCreate(&h));
  CB(cublasSetStream(h, s));
  void* ws;
  CK(cudaMalloc(&ws, kWorkspace));
  CB(cublasSetWorkspace(h, ws, kWorkspace));
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));
  if (algos) return probe_algorithms(s, lt, ws);
  struct Shape {
    int n, k, m;
    const char* what;
  };
  const Shape shapes[] = {{2048, 1024, 4096, "qkv fused"}, {2048, 1024, 2048, "q"},
                          {2048, 1024, 1024, "k or v"},    {2048, 1024, 3072, "gate or up"},
                          {2048, 1024, 6144, "gate+up"},   {2048, 3072, 1024, "down"},
                          {2048, 2048, 1024, "o"},         {512, 1024, 3072, "gate 512"},
                          {256, 1024, 3072, "gate b256"},  {64, 1024, 3072, "gate b64"},
                          {64, 1024, 6144, "gate+up b64"}, {256, 3072, 1024, "down b256"}};
  std::printf(
      "%-12s %5s %5s %5s | %9s %9s %9s %9s %9s | TFLOP/s: ex_f32 ex_bf16 lt_f32 lt_bf16 "
      "| heur | maxdiff lt_f32 lt_bf16\n",
      "shape", "n", "k", "m", "ex_f32 us", "ex_bf16", "lt_f32", "lt_bf16", "");
  for (const Shape& sh : shapes) {
    const int n = sh.n, k = sh.k, m = sh.m;
    __nv_bfloat16 *w, *x, *ob;
    float *of, *of2, *ref;
    CK(cudaMalloc(&w, size_t(m) * k * 2));
    CK(cudaMalloc(&x, size_t(n) * k * 2));
    CK(cudaMalloc(&ob, size_t(n) * m * 2));
    CK(cudaMalloc(&of, size_t(n) * m * 4));
    CK(cudaMalloc(&of2, size_t(n) * m * 4));
    CK(cudaMalloc(&ref, size_t(n) * m * 4));
    fill_bf16<<<1024, 256, 0, s>>>(w, size_t(m) * k, 1234u + m);
    fill_bf16<<<1024, 256, 0, s>>>(x, size_t(n) * k, 99u + n);
    const float alpha = 1.f, beta = 0.f;
    auto ex = [&](cudaDataType_t ot, void* out) {
      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w, CUDA_R_16BF, k, x,
                      CUDA_R_16BF, k, &beta, out, ot, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    };
    // cuBLASLt with the heuristic's first algorithm of 8.
    const probe::LtProblem lf(lt, n, k, m, CUDA_R_32F, kWorkspace, 8);
    const probe::LtProblem lb(lt, n, k, m, CUDA_R_16BF, kWorkspace, 8);
    const int hf = static_cast<int>(lf.algos.size()), hb = static_cast<int>(lb.algos.size());
    auto run_lt = [&](const probe::LtProblem& l, void* out) {
      CB(cublasLtMatmul(lt, l.op, &alpha, w, l.a, x, l.b, &beta, out, l.c, out, l.c,
                        &l.algos[0].algo, ws, kWorkspace, s));
    };
    const double t1 = time_us([&] { ex(CUDA_R_32F, ref); }, s);
    const double t2 = time_us([&] { ex(CUDA_R_16BF, ob); }, s);
    const double t3 = hf > 0 ? time_us([&] { run_lt(lf, of); }, s) : -1;
    const double t4 = hb > 0 ? time_us([&] { run_lt(lb, ob); }, s) : -1;
    bf16_to_f32<<<1024, 256, 0, s>>>(ob, of2, size_t(n) * m);
    CK(cudaStreamSynchronize(s));
    std::vector<float> r(size_t(n) * m), a(r.size()), b(r.size());
    CK(cudaMemcpy(r.data(), ref, r.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(a.data(), of, r.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), of2, r.size() * 4, cudaMemcpyDeviceToHost));
    double da = 0, db = 0;
    for (size_t i = 0; i < r.size(); ++i) {
      da = std::max(da, double(std::fabs(a[i] - r[i])));
      db = std::max(db, double(std::fabs(b[i] - r[i])));
      if (std::isnan(a[i]) || std::isnan(b[i])) da = db = NAN;
    }
    const double fl = 2.0 * n * k * m;
    auto tf = [&](double us) { return us > 0 ? fl / us * 1e-6 : 0.0; };
    std::printf(
        "%-12s %5d %5d %5d | %9.1f %9.1f %9.1f %9.1f %9s | %6.0f %6.0f %6.0f %6.0f | %d/%d "
        "| %.2e %.2e\n",
        sh.what, n, k, m, t1, t2, t3, t4, "", tf(t1), tf(t2), tf(t3), tf(t4), hf, hb, da, db);
    cudaFree(w);
    cudaFree(x);
    cudaFree(ob);
    cudaFree(of);
    cudaFree(of2);
    cudaFree(ref);
  }
  return 0;
}
