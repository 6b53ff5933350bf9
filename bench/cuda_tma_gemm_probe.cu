// Probe of the TMA GEMMs (src/backend/cuda/tma_gemm.cuh) against what the backend runs without
// them, each at every tile width, the width its rule picks, and on the kernel's ping-pong
// schedule:
//   - the GLU GEMM (glu_gemm.cu) against the gate/up (or Wi) pair as one strided-batched
//     cublasGemmStridedBatchedEx writing bf16, then the SwiGLU / GeGLU kernel (the glu_bf16_gemm
//     path, record_glu_bf16): Qwen3-0.6B's gate/up (1024 -> 2 x 3072, SwiGLU) at decode and
//     prefill rows, ModernBERT-large's Wi (1024 -> 2 x 2624, GeGLU) at its benchmark batches;
//     TFLOP/s counts both products; the bf16 outputs' largest |difference| over the largest
//     |value| (the pair rounds both products to bf16 before the gated unit, the kernel applies it
//     to the f32 sums: ~1e-2 is rounding, ~1 a wrong tile);
//   - the residual GEMM (residual_gemm.cu) against cublasGemmEx with beta 1 into f32 (the stacks'
//     o / down / Wo projections); the difference after one launch of each from the same output
//     (f32 sums in two orders: ~1e-6).
// 20 launches in a CUDA graph, median of 7 replays. The weights stay in L2 between launches,
// which within a step they do not: compare the variants, not the absolute GB/s.
//
//   cuda_tma_gemm_probe            (no arguments; ~20 s on an H100)
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/glu_gemm.h"
#include "backend/cuda/kernels.h"
#include "backend/cuda/residual_gemm.h"
#include "cuda_probe_util.cuh"

namespace {

constexpr int kLaunches = 20;

struct Shape {
  int m, k, f;
  bool gelu;
  const char* what;
};

std::vector<float> to_host(const __nv_bfloat16* p, size_t n) {
  std::vector<__nv_bfloat16> h(n);
  CK(cudaMemcpy(h.data(), p, n * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __bfloat162float(h[i]);
  return out;
}

std::vector<float> f32_to_host(const float* p, size_t n) {
  std::vector<float> out(n);
  CK(cudaMemcpy(out.data(), p, n * 4, cudaMemcpyDeviceToHost));
  return out;
}

// max |a - b| / max |b|; NaN where either holds a NaN.
double relative_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return std::nan("");
    d = std::max(d, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? d / scale : std::nan("");
}

// One kernel's row of the table: its schedule's name (tile width, auto, ping-pong), us and
// TFLOP/s of launch() in a replayed graph, the difference diff() reports after one launch from
// the state prepare() restores, and the speed against the cuBLAS path's base_us.
template <class Launch, class Prepare, class Diff>
void print_variant(const char* shape, const char* kernel, int tile, double flop, double base_us,
                   cudaStream_t s, Launch launch, Prepare prepare, Diff diff) {
  const double t = probe::graph_time_us([&](int) { launch(); }, s, kLaunches);
  prepare();
  launch();
  char name[32];
  if (tile < 0)
    std::snprintf(name, sizeof name, "%s pingpong", kernel);
  else if (tile > 0)
    std::snprintf(name, sizeof name, "%s tile %d", kernel, tile);
  else
    std::snprintf(name, sizeof name, "%s auto", kernel);
  std::printf("%-24s %-12s %9.2f %9.1f %10.2e  x%.3f\n", shape, name, t, flop / t * 1e-6, diff(),
              base_us / t);
}

void probe_glu(const cudaDeviceProp& prop, cudaStream_t s, cublasHandle_t h) {
  using namespace infera::cuda;
  const Shape shapes[] = {{64, 1024, 3072, false, "qwen3 gate/up b64"},
                          {256, 1024, 3072, false, "qwen3 gate/up b256"},
                          {512, 1024, 3072, false, "qwen3 gate/up 1x512"},
                          {2048, 1024, 3072, false, "qwen3 gate/up 1x2048"},
                          {4096, 1024, 3072, false, "qwen3 gate/up 8x512"},
                          {93, 1024, 2624, true, "modernbert Wi 1x93"},
                          {4650, 1024, 2624, true, "modernbert Wi 50x93"},
                          {5120, 1024, 2624, true, "modernbert Wi 10x512"},
                          {32768, 1024, 2624, true, "modernbert Wi 64x512"}};
  std::printf("%-24s %-12s %9s %9s %10s\n", "shape", "variant", "us", "TFLOP/s", "rel diff");
  for (const Shape& sh : shapes) {
    const size_t xs = size_t(sh.m) * sh.k, ws = size_t(sh.f) * sh.k, os = size_t(sh.m) * sh.f;
    __nv_bfloat16 *x, *w, *pair_out, *h16, *ours;
    CK(cudaMalloc(&x, xs * 2));
    CK(cudaMalloc(&w, 2 * ws * 2));  // w0 then w1, one after the other (as the loader places them)
    CK(cudaMalloc(&pair_out, 2 * os * 2));
    CK(cudaMalloc(&h16, os * 2));
    CK(cudaMalloc(&ours, os * 2));
    probe::fill_bf16<<<1024, 256, 0, s>>>(x, xs, 7u + sh.m);
    probe::fill_bf16<<<1024, 256, 0, s>>>(w, 2 * ws, 11u + sh.f);
    // The backend's path: the pair (w0's product in pair_out, w1's after it), then the gated unit.
    const auto pair = [&](int) {
      const float alpha = 1.0f, beta = 0.0f;
      CB(cublasGemmStridedBatchedEx(
          h, CUBLAS_OP_T, CUBLAS_OP_N, sh.f, sh.m, sh.k, &alpha, w, CUDA_R_16BF, sh.k,
          static_cast<long long>(ws), x, CUDA_R_16BF, sh.k, 0, &beta, pair_out, CUDA_R_16BF, sh.f,
          static_cast<long long>(os), 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      const SwigluBf16Args g{pair_out, pair_out + os, nullptr, static_cast<int64_t>(os), h16};
      sh.gelu ? launch_geglu_bf16(&g, s) : launch_swiglu_bf16(&g, s);
    };
    const double t_pair = probe::graph_time_us(pair, s, kLaunches);
    const double flop = 2.0 * 2.0 * sh.m * double(sh.k) * sh.f;
    CK(cudaStreamSynchronize(s));
    const std::vector<float> want = to_host(h16, os);
    std::printf("%-24s %-12s %9.2f %9.1f %10s\n", sh.what, "cublas+glu", t_pair,
                flop / t_pair * 1e-6, "-");
    for (int tile : {0, 64, 128, -1}) {  // -1: the ping-pong schedule
      GluGemmArgs a{};
      a.x = x;
      a.w0 = w;
      a.w1 = w + ws;
      a.out_bf16 = ours;
      a.m = sh.m;
      a.k = a.ldx = sh.k;
      a.f = sh.f;
      a.act = sh.gelu ? kGluGemmGelu : kGluGemmSilu;
      a.schedule = {tile, prop.multiProcessorCount, tile < 0 ? 1 : 0};
      if (const char* why = glu_gemm_unsupported(a, prop.major, prop.minor)) {
        std::printf("%-24s glu_gemm not run: %s\n", sh.what, why);
        break;
      }
      print_variant(
          sh.what, "glu", tile, flop, t_pair, s, [&] { launch_glu_gemm(&a, s); },
          [&] { CK(cudaMemsetAsync(ours, 0xff, os * 2, s)); },  // NaNs: a tile left unwritten shows
          [&] { return relative_max_diff(to_host(ours, os), want); });
    }
    CK(cudaFree(x));
    CK(cudaFree(w));
    CK(cudaFree(pair_out));
    CK(cudaFree(h16));
    CK(cudaFree(ours));
  }
}

void probe_residual(const cudaDeviceProp& prop, cudaStream_t s, cublasHandle_t h) {
  using namespace infera::cuda;
  struct Residual {
    int m, k, n;
    const char* what;
  };
  const Residual shapes[] = {
      {256, 2048, 1024, "qwen3 o b256"},          {2048, 2048, 1024, "qwen3 o 1x2048"},
      {2048, 3072, 1024, "qwen3 down 1x2048"},    {4096, 2048, 1024, "qwen3 o 8x512"},
      {4096, 3072, 1024, "qwen3 down 8x512"},     {93, 1024, 1024, "modernbert o 1x93"},
      {93, 2624, 1024, "modernbert Wo 1x93"},     {5120, 1024, 1024, "modernbert o 10x512"},
      {32768, 2624, 1024, "modernbert Wo 64x512"}};
  std::printf("%-24s %-12s %9s %9s %10s\n", "shape (x += . W^T)", "variant", "us", "TFLOP/s",
              "rel diff");
  for (const Residual& sh : shapes) {
    const size_t xs = size_t(sh.m) * sh.k, ws = size_t(sh.n) * sh.k, os = size_t(sh.m) * sh.n;
    __nv_bfloat16 *x, *w, *init16;
    float *out, *init;
    CK(cudaMalloc(&x, xs * 2));
    CK(cudaMalloc(&w, ws * 2));
    CK(cudaMalloc(&init16, os * 2));
    CK(cudaMalloc(&init, os * 4));
    CK(cudaMalloc(&out, os * 4));
    probe::fill_bf16<<<1024, 256, 0, s>>>(x, xs, 17u + sh.m);
    probe::fill_bf16<<<1024, 256, 0, s>>>(w, ws, 19u + sh.k);
    probe::fill_bf16<<<1024, 256, 0, s>>>(init16, os, 23u);
    probe::bf16_to_f32<<<1024, 256, 0, s>>>(init16, init, os);
    const auto cublas = [&](int) {
      const float alpha = 1.0f, beta = 1.0f;
      CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, sh.n, sh.m, sh.k, &alpha, w, CUDA_R_16BF, sh.k,
                      x, CUDA_R_16BF, sh.k, &beta, out, CUDA_R_32F, sh.n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT));
    };
    const double flop = 2.0 * sh.m * double(sh.k) * sh.n;
    const double t_cublas = probe::graph_time_us(cublas, s, kLaunches);
    CK(cudaMemcpyAsync(out, init, os * 4, cudaMemcpyDeviceToDevice, s));
    cublas(0);
    const std::vector<float> want = f32_to_host(out, os);
    std::printf("%-24s %-12s %9.2f %9.1f %10s\n", sh.what, "cublas b=1", t_cublas,
                flop / t_cublas * 1e-6, "-");
    for (int tile : {0, 128, 256, -1}) {  // -1: the ping-pong schedule
      const ResidualGemmArgs a{
          x, w, out, sh.m, sh.k, sh.n, {tile, prop.multiProcessorCount, tile < 0 ? 1 : 0}};
      if (const char* why = residual_gemm_unsupported(a, prop.major, prop.minor)) {
        std::printf("%-24s residual_gemm not run: %s\n", sh.what, why);
        break;
      }
      print_variant(
          sh.what, "tma", tile, flop, t_cublas, s, [&] { launch_residual_gemm(&a, s); },
          [&] { CK(cudaMemcpyAsync(out, init, os * 4, cudaMemcpyDeviceToDevice, s)); },
          [&] { return relative_max_diff(f32_to_host(out, os), want); });
    }
    CK(cudaFree(x));
    CK(cudaFree(w));
    CK(cudaFree(init16));
    CK(cudaFree(init));
    CK(cudaFree(out));
  }
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  cudaStream_t s;
  CK(cudaStreamCreate(&s));
  cublasHandle_t h;
  CB(cublasCreate(&h));
  CB(cublasSetStream(h, s));
  probe_glu(prop, s, h);
  probe_residual(prop, s, h);
  CK(cudaGetLastError());
  cublasDestroy(h);
  return 0;
}
