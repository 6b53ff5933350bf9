// Per-launch probe of the weight-streaming GEMM (src/backend/cuda/stream_gemm.cuh) against
// cuBLAS at the Qwen3-0.6B decode shapes (issue 11, session 10). For each (k, m, n): checks the
// kernel against a scalar double reference (sampled columns, every row) and bit-for-bit
// determinism, then times a CUDA graph of L launches over R rotating weight copies (more bytes
// than the 50 MB L2, as in a real decode step) for the kernel (PDL on and off) and cuBLAS
// (bf16 x bf16 -> f32, as the backend's matmul calls it). Prints us per launch and GB/s of
// weight bytes.
// Build: nvcc -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I src
//        bench/probes/sgemm_probe.cu -lcublas -o sgemm_probe
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "backend/cuda/stream_gemm_launch.cuh"

using namespace infera::cuda::sgemm;

#define CK(x)                                                                           \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

static float bf(uint16_t v) {
  uint32_t u = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

int main(int argc, char** argv) {
  int dev = 0, sms = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int plant = std::getenv("SGEMM_PLANT") ? std::atoi(std::getenv("SGEMM_PLANT")) : 0;
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cublasSetStream(h, st);

  struct Shape { int k, m; const char* what; };
  std::vector<Shape> shapes = {{1024, 2048, "q"},  {1024, 1024, "k/v"}, {1024, 3072, "gate/up"},
                               {2048, 1024, "o"},  {3072, 1024, "down"}};
  std::vector<int> ns = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::vector<int> wgs = {1, 2};
  bool check_odd = true;
  if (argc > 1 && std::string(argv[1]) == "quick") { ns = {8, 64, 256}; check_odd = false; }
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  int failures = 0;

  // Correctness on odd shapes first (m not a multiple of 64, k not a multiple of 64, odd n).
  if (check_odd) {
    struct Odd { int n, k, m; };
    std::vector<Odd> odd = {{1, 1024, 1024}, {3, 72, 100}, {7, 136, 129},  {33, 2048, 200},
                            {64, 4096, 64},  {100, 520, 333}, {255, 1024, 96}, {256, 3072, 1000},
                            {17, 8, 65}};
    for (auto o : odd) {
      for (int wg : wgs) {
        std::vector<uint16_t> hw((size_t)o.m * o.k), hx((size_t)o.n * o.k);
        for (auto& v : hw) { float f = U(rng); uint32_t u; std::memcpy(&u, &f, 4); v = u >> 16; }
        for (auto& v : hx) { float f = U(rng); uint32_t u; std::memcpy(&u, &f, 4); v = u >> 16; }
        __nv_bfloat16 *dw, *dx; float* dout;
        CK(cudaMalloc(&dw, hw.size() * 2)); CK(cudaMalloc(&dx, hx.size() * 2));
        CK(cudaMalloc(&dout, (size_t)o.n * o.m * 4));
        CK(cudaMemcpy(dw, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
        CK(cudaMemset(dout, 0xFF, (size_t)o.n * o.m * 4));  // NaN poison: unwritten shows
        StreamGemmProblem q{dw, dx, dout, o.n, o.m, o.k, o.k, o.m};
        int splits = 0;
        CK(launch_stream_gemm(q, sms, wg, false, st, &splits));
        CK(cudaStreamSynchronize(st));
        std::vector<float> ho((size_t)o.n * o.m);
        CK(cudaMemcpy(ho.data(), dout, ho.size() * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0; bool nan = false;
        for (int r = 0; r < o.n; ++r)
          for (int c = 0; c < o.m; ++c) {
            double s = 0;
            for (int t = 0; t < o.k; ++t) s += (double)bf(hx[(size_t)r * o.k + t]) * bf(hw[(size_t)c * o.k + t]);
            double d = ho[(size_t)r * o.m + c];
            if (std::isnan(d)) nan = true;
            num += (d - s) * (d - s); den += s * s;
          }
        double nmse = nan ? INFINITY : num / std::max(den, 1e-30);
        bool ok = nmse <= 1e-6 && !std::isnan(nmse);
        failures += !ok;
        std::printf("check n=%d k=%d m=%d wg=%d splits=%d nmse=%.3g %s\n", o.n, o.k, o.m, wg, splits,
                    nmse, ok ? "ok" : "FAIL");
        cudaFree(dw); cudaFree(dx); cudaFree(dout);
      }
    }
  }

  std::printf("\n%-8s %5s %5s %4s %3s %6s | %9s %9s %9s | %7s %7s | %6s\n", "what", "k", "m", "n",
              "wg", "splits", "sg us", "sg+pdl", "cublas", "sg GB/s", "cb GB/s", "cb/sg");
  for (auto sh : shapes) {
    const size_t wbytes = (size_t)sh.m * sh.k * 2;
    const int R = (int)std::min<size_t>(64, (256u << 20) / wbytes + 1);
    std::vector<__nv_bfloat16*> ws(R);
    {
      std::vector<uint16_t> hw((size_t)sh.m * sh.k);
      for (int r = 0; r < R; ++r) {
        for (auto& v : hw) { float f = U(rng); uint32_t u; std::memcpy(&u, &f, 4); v = u >> 16; }
        CK(cudaMalloc(&ws[r], wbytes));
        CK(cudaMemcpy(ws[r], hw.data(), wbytes, cudaMemcpyHostToDevice));
      }
    }
    for (int n : ns) {
      std::vector<uint16_t> hx((size_t)n * sh.k);
      for (auto& v : hx) { float f = U(rng); uint32_t u; std::memcpy(&u, &f, 4); v = u >> 16; }
      __nv_bfloat16* dx; float *dout, *dref;
      CK(cudaMalloc(&dx, hx.size() * 2));
      CK(cudaMalloc(&dout, (size_t)n * sh.m * 4));
      CK(cudaMalloc(&dref, (size_t)n * sh.m * 4));
      CK(cudaMemcpy(dx, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
      const float one = 1.f, zero = 0.f;
      auto cublas = [&](int r) {
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.m, n, sh.k, &one, ws[r], CUDA_R_16BF,
                            sh.k, dx, CUDA_R_16BF, sh.k, &zero, dref, CUDA_R_32F, sh.m,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      };
      auto time_graph = [&](auto&& launch) {
        const int L = 2 * R > 40 ? 2 * R : 40;
        cudaGraph_t g; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < L; ++i) launch(i % R);
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiate(&ge, g, 0));
        CK(cudaGraphLaunch(ge, st));
        CK(cudaStreamSynchronize(st));
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        std::vector<float> t;
        for (int rep = 0; rep < 15; ++rep) {
          cudaEventRecord(a, st); cudaGraphLaunch(ge, st); cudaEventRecord(b, st);
          CK(cudaEventSynchronize(b));
          float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1000.f / L);
        }
        std::sort(t.begin(), t.end());
        cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaEventDestroy(a); cudaEventDestroy(b);
        return t[t.size() / 2];
      };
      float tc = time_graph([&](int r) { cublas(r); });
      for (int wg : wgs) {
        if (wg == 2 && sh.m < 128) continue;
        StreamGemmProblem q{ws[0], dx, dout, n, sh.m, sh.k, sh.k, sh.m};
        int splits = 0;
        CK(cudaMemset(dout, 0xFF, (size_t)n * sh.m * 4));
        CK(launch_stream_gemm(q, sms, wg, false, st, &splits));
        if (cublas(0) != CUBLAS_STATUS_SUCCESS) return 1;
        CK(cudaStreamSynchronize(st));
        std::vector<float> o1((size_t)n * sh.m), o2(o1.size()), ref(o1.size());
        CK(cudaMemcpy(o1.data(), dout, o1.size() * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(ref.data(), dref, ref.size() * 4, cudaMemcpyDeviceToHost));
        CK(launch_stream_gemm(q, sms, wg, true, st));
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(o2.data(), dout, o2.size() * 4, cudaMemcpyDeviceToHost));
        bool same = std::memcmp(o1.data(), o2.data(), o1.size() * 4) == 0;
        // double reference on every 13th column (all rows), plus NMSE vs cuBLAS on all outputs
        std::vector<uint16_t> hw0((size_t)sh.m * sh.k);
        CK(cudaMemcpy(hw0.data(), ws[0], wbytes, cudaMemcpyDeviceToHost));
        double num = 0, den = 0, cnum = 0, cden = 0;
        for (int r = 0; r < n; ++r)
          for (int c = 0; c < sh.m; c += 13) {
            double s = 0;
            for (int t = 0; t < sh.k; ++t) s += (double)bf(hx[(size_t)r * sh.k + t]) * bf(hw0[(size_t)c * sh.k + t]);
            double d = o1[(size_t)r * sh.m + c];
            num += std::isnan(d) ? INFINITY : (d - s) * (d - s); den += s * s;
          }
        for (size_t i = 0; i < o1.size(); ++i) {
          double d = o1[i] - (double)ref[i];
          cnum += std::isnan(d) ? INFINITY : d * d; cden += (double)ref[i] * ref[i];
        }
        const double nmse = num / std::max(den, 1e-30), cn = cnum / std::max(cden, 1e-30);
        const bool ok = nmse <= 1e-6 && cn <= 1e-6 && same;
        failures += !ok;
        float ts = time_graph([&](int r) {
          StreamGemmProblem qq = q; qq.w = ws[r];
          CK(launch_stream_gemm(qq, sms, wg, false, st));
        });
        float tp = time_graph([&](int r) {
          StreamGemmProblem qq = q; qq.w = ws[r];
          CK(launch_stream_gemm(qq, sms, wg, true, st));
        });
        const float best = std::min(ts, tp);
        std::printf("%-8s %5d %5d %4d %3d %6d | %9.2f %9.2f %9.2f | %7.0f %7.0f | %6.2f  nmse %.2g/%.2g%s%s\n",
                    sh.what, sh.k, sh.m, n, wg, splits, ts, tp, tc, wbytes / best / 1e3,
                    wbytes / tc / 1e3, tc / best, nmse, cn, same ? "" : " NONDET", ok ? "" : " FAIL");
      }
      cudaFree(dx); cudaFree(dout); cudaFree(dref);
    }
    for (auto w : ws) cudaFree(w);
  }
  (void)plant;  // planted bugs are compile-time: -DSTREAM_GEMM_PLANT=1 (stream_gemm.cuh)
  std::printf("\nfailures: %d\n", failures);
  return failures ? 2 : 0;
}
