// Standalone probe of the batched-decode GEMM shapes (Qwen3-0.6B, 64 and 256 rows): which cuBLAS
// call is fastest when the weights come from DRAM, as in a decode step (each launch reads another
// copy of the weight, 160 MB of copies in rotation, so L2 never holds the one being read).
//   ex_f32    cublasGemmEx, bf16 in, f32 out, CUBLAS_GEMM_DEFAULT (the backend's decode call)
//   lt#0      cuBLASLt, the heuristic's first algorithm (f32 out)
//   lt best   the fastest of the heuristic's first 16 algorithms, and its index
//   ex_bf16   cublasGemmEx writing bf16
//   pair      two same-shape GEMMs (k and v, gate and up) as one cublasGemmBatchedEx launch, per
//             GEMM, against two ex_f32 launches
//   merged    one GEMM of the summed rows (q+k+v, gate+up), the bound for concatenated weights
// 30 launches in a CUDA graph (GPU time, not the host's calls), median of 7 replays; GB/s counts
// weight + x + out bytes.
//
//   cuda_decode_gemm_probe            (no arguments; ~10 s on an H200)
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cuda_probe_lt.h"
#include "cuda_probe_util.cuh"

namespace {

constexpr size_t kWorkspace = size_t{32} << 20;
constexpr size_t kRotationBytes = size_t{160} << 20;  // > 3x the H200's 50 MB L2
constexpr int kLaunches = 30;

using probe::fill_bf16;

template <typename F>
double time_us(F&& f, cudaStream_t s) {
  return probe::graph_time_us(f, s, kLaunches);
}

struct Weights {  // `copies` copies of an [m, k] bf16 weight, one after the other
  __nv_bfloat16* base = nullptr;
  int copies = 0;
  size_t elems = 0;
  Weights(int m, int k, cudaStream_t s) {
    elems = size_t(m) * k;
    copies = static_cast<int>(std::max<size_t>(2, kRotationBytes / (elems * 2)));
    CK(cudaMalloc(&base, elems * 2 * copies));
    fill_bf16<<<1024, 256, 0, s>>>(base, elems * copies, 1234u + m);
  }
  ~Weights() { cudaFree(base); }
  const __nv_bfloat16* at(int i) const { return base + size_t(i % copies) * elems; }
};

}  // namespace

int main() {
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
  struct Shape {
    int k, m;
    const char* what;
    int pair;  // 1: also time two of them as one batched launch
  };
  const Shape shapes[] = {{1024, 2048, "q", 0},
                          {1024, 1024, "k or v", 1},
                          {2048, 1024, "o", 0},
                          {1024, 3072, "gate or up", 1},
                          {3072, 1024, "down", 0},
                          {1024, 4096, "q+k+v merged", 0},
                          {1024, 6144, "gate+up merged", 0}};
  std::printf("%-15s %4s %5s %5s | %8s %8s %8s %4s %8s | %8s %8s | GB/s ex, best\n", "shape", "n",
              "k", "m", "ex_f32", "lt#0", "lt_best", "idx", "ex_bf16", "pair/gemm", "2x ex");
  const float alpha = 1.f, beta = 0.f;
  for (int n : {64, 256}) {
    __nv_bfloat16* x;
    float *out, *out2;
    CK(cudaMalloc(&x, size_t(n) * 6144 * 2));
    CK(cudaMalloc(&out, size_t(n) * 6144 * 4));
    CK(cudaMalloc(&out2, size_t(n) * 6144 * 4));
    fill_bf16<<<1024, 256, 0, s>>>(x, size_t(n) * 6144, 99u + n);
    void** ptrs;  // device pointer arrays of the batched pair: a[2], b[2], c[2] per launch index
    CK(cudaMalloc(&ptrs, sizeof(void*) * 6 * 64));
    for (const Shape& sh : shapes) {
      const int k = sh.k, m = sh.m;
      Weights w(m, k, s), w2(m, k, s);
      auto ex = [&](int i, cudaDataType_t ot) {
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w.at(i), CUDA_R_16BF, k, x,
                        CUDA_R_16BF, k, &beta, out, ot, m, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      };
      const double t_ex = time_us([&](int i) { ex(i, CUDA_R_32F); }, s);
      const double t_exb = time_us([&](int i) { ex(i, CUDA_R_16BF); }, s);
      // cuBLASLt: every heuristic algorithm (up to 16), timed.
      const probe::LtProblem lp(lt, n, k, m, CUDA_R_32F, kWorkspace, 16);
      const auto& r = lp.algos;
      const int found = static_cast<int>(r.size());
      double t_lt0 = -1, t_best = 1e30;
      int best = -1;
      for (int a = 0; a < found; ++a) {
        if (r[a].state != CUBLAS_STATUS_SUCCESS) continue;
        const double t = time_us(
            [&](int i) {
              CB(cublasLtMatmul(lt, lp.op, &alpha, w.at(i), lp.a, x, lp.b, &beta, out, lp.c, out,
                                lp.c, &r[a].algo, ws, kWorkspace, s));
            },
            s);
        if (a == 0) t_lt0 = t;
        if (t < t_best) t_best = t, best = a;
      }
      double t_pair = -1, t_two = -1;
      if (sh.pair) {
        std::vector<void*> host(6 * 64);
        for (int i = 0; i < 64; ++i) {
          host[6 * i + 0] = const_cast<__nv_bfloat16*>(w.at(i));
          host[6 * i + 1] = const_cast<__nv_bfloat16*>(w2.at(i));
          host[6 * i + 2] = x;
          host[6 * i + 3] = x;
          host[6 * i + 4] = out;
          host[6 * i + 5] = out2;
        }
        CK(cudaMemcpy(ptrs, host.data(), host.size() * sizeof(void*), cudaMemcpyHostToDevice));
        t_pair = time_us(
                     [&](int i) {
                       void** p = ptrs + 6 * (i % 64);
                       CB(cublasGemmBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, p,
                                              CUDA_R_16BF, k, p + 2, CUDA_R_16BF, k, &beta, p + 4,
                                              CUDA_R_32F, m, 2, CUBLAS_COMPUTE_32F,
                                              CUBLAS_GEMM_DEFAULT));
                     },
                     s) /
                 2;
        t_two = time_us(
                    [&](int i) {
                      ex(i, CUDA_R_32F);
                      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &alpha, w2.at(i),
                                      CUDA_R_16BF, k, x, CUDA_R_16BF, k, &beta, out2, CUDA_R_32F, m,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                    },
                    s) /
                2;
      }
      const double bytes = double(m) * k * 2 + double(n) * k * 2 + double(n) * m * 4;
      std::printf("%-15s %4d %5d %5d | %8.2f %8.2f %8.2f %4d %8.2f | %8.2f %8.2f | %6.0f %6.0f\n",
                  sh.what, n, k, m, t_ex, t_lt0, t_best, best, t_exb, t_pair, t_two,
                  bytes / t_ex * 1e-3, bytes / t_best * 1e-3);
    }
    cudaFree(ptrs);
    cudaFree(x);
    cudaFree(out);
    cudaFree(out2);
  }
  return 0;
}
