#include "backend/op_harness.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/matmul_bf16_dot.h"
#include "backend/cpu/simd_kernels.h"
#include "backend/registry.h"
#ifdef INFERA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif
#include "core/dtype_convert.h"
#include "test_compare.h"

namespace infera::test {

#ifdef INFERA_WITH_CUDA
namespace {
CudaOptions harness_cuda_options(const std::string& name) {
  CudaOptions o = cuda_options_from_env();
  if (name == "cuda_exact") o.exact_f32 = true;
  if (name == "cuda_skinny") {  // 9..256-row bf16 matmuls (the stream GEMM's rows too)
    o.skinny_gemm = true;
    o.stream_gemm = false;
  }
  if (name == "cuda_stream") {  // 1..256-row bf16 matmuls on the weight-streaming GEMM
    o.stream_gemm = true;
    o.stream_gemm_min_rows = 1;
    o.stream_gemm_max_rows = 256;
  }
  if (name == "cuda_glu_gemm") {  // gate/up + SwiGLU / GeGLU past the GEMV on the GLU GEMM
    o.glu_gemm = true;
    o.stream_gemm = false;  // (its rows too)
  }
  if (name == "cuda_unstaged") {  // the register decode attention, and GEMMs one per launch
    o.decode_staged = false;
    o.paired_gemm = false;  // (the staged kernel's bf16 shadow does not apply here)
  }
  if (name == "cuda_decode_mma") o.decode_mma = true;  // the tensor-core decode attention
  if (name == "cuda_interleaved") {  // the interleaved tile of the 64-vector flash kernel
    o.flash_interleaved = true;
    o.flash_key_halves = false;
  }
  if (name == "cuda_flash_split") {  // the 64-vector flash kernel with long query tiles split
    o.flash_split_keys = true;
    o.flash_key_halves = false;
  }
  if (name == "cuda_flash_wide") o.flash_wide = 4;  // 128-vector tiles, 4 warps
  if (name == "cuda_flash_wide_split") {            // ... with long query tiles split (and merged)
    o.flash_wide = 4;
    o.flash_split_keys = true;
  }
  if (name == "cuda_flash_halves") {  // the key-halves kernel for the encoders' attention too
    o.flash_key_halves = true;
    o.packed_flash_halves = true;
  }
  if (name == "cuda_flash_wgmma") o.flash_wgmma = true;  // Hopper warpgroup-MMA prefill kernel
  if (name.starts_with("cuda_flash_tma")) {  // ... its TMA / producer-warp form, every length
    o.flash_wgmma = true;
    o.flash_tma = true;
    o.flash_tma_min_rows = 0;
    o.flash_tma_stages = name == "cuda_flash_tma3" ? 3 : 2;
    o.flash_tma_pingpong = name == "cuda_flash_tma_pp";
    o.flash_tma_persistent = name == "cuda_flash_tma_persist" || name == "cuda_flash_tma3_persist";
    if (name == "cuda_flash_tma3_persist") o.flash_tma_stages = 3;
    o.flash_tma_max_blocks = 3;  // (persistent: every block walks many work items)
  }
  if (name == "cuda_flash_wgmma128") {  // ... with 128-vector tiles (2 warpgroups) at any size
    o.flash_wgmma = true;
    o.flash_wgmma_vectors = 128;
  }
  // The encoders' packed attention on the wgmma kernel (on by default on sm_90, so the plain
  // "cuda" target runs it with its tile shape chosen): 128 vectors forced, 64 with the pipelined
  // loop; and the mma.sync flash kernel it replaced there (every other GPU's kernel).
  if (name.starts_with("cuda_packed_wgmma")) o.packed_wgmma = true;
  if (name == "cuda_packed_mma") o.packed_wgmma = false;
  if (name == "cuda_packed_wgmma128") o.flash_wgmma_vectors = 128;
  if (name == "cuda_packed_wgmma_pipe") {
    o.flash_wgmma_vectors = 64;
    o.flash_wgmma_pipeline = true;
  }
  if (name == "cuda_flash_wgmma_pipe") {  // ... 64-vector tiles, the pipelined loop
    o.flash_wgmma = true;
    o.flash_wgmma_vectors = 64;
    o.flash_wgmma_pipeline = true;
  }
  if (name == "cuda_flash_wgmma_qlate" || name == "cuda_flash_wgmma128_qlate") {
    o.flash_wgmma = true;  // ... with the queries staged after the first K/V tile (the old path)
    o.flash_wgmma_vectors = name == std::string("cuda_flash_wgmma128_qlate") ? 128 : 0;
    o.flash_wgmma_q_prefetch = false;
  }
  // The wgmma kernel (on by default on sm_90) takes precedence over the mma.sync flash kernels:
  // the targets that test those turn it off.
  for (const char* other :
       {"cuda_interleaved", "cuda_flash_split", "cuda_flash_wide", "cuda_flash_wide_split",
        "cuda_flash_halves", "cuda_flash_wide8_plain", "cuda_flash_wide8"})
    if (name == other) o.flash_wgmma = false;
  if (name == "cuda_flash_wide8_plain") o.flash_wide = 8;  // ... unsplit (flash_wide_auto's)
  if (name == "cuda_flash_wide8") {                        // 128-vector tiles, 8 warps, split
    o.flash_wide = 8;
    o.flash_split_keys = true;
  }
  if (name == "cuda_prefill_toggled") {  // the prefill switches of cudapf and cudafa, each flipped
    o.glu_bf16_gemm = !o.glu_bf16_gemm;
    o.qk_norm_by_token = !o.qk_norm_by_token;
    o.flash_key_halves = !o.flash_key_halves;  // on by default: flipped, the 64-vector kernel
    o.mlp_bf16_only = !o.mlp_bf16_only;
    o.flash_wide_auto = !o.flash_wide_auto;
    o.flash_wgmma = !o.flash_wgmma;  // on by default: flipped, the mma.sync kernels above
  }
  if (name == "cuda_b1") {  // the batch-1 decode-chain switches that are off (kernels.h kTune*)
    o.pdl_early_trigger = 2;
    o.decode_kv_prefetch = true;
    o.params_early = true;
    o.fuse_qk_attention = true;
    o.residual_mlp = true;      // residual_mlp as one kernel on 5 blocks: several rows each,
    o.residual_mlp_blocks = 5;  // uneven slices
  }
  if (name == "cuda_b1fuse")
    o.b1_fused_chain = true;  // the b1 chain's fused GEMVs (off by default)
  if (name == "cuda_exact") {
    o.gemv_preload = false;  // the GEMV without the preload
    o.residual_mlp = true;   // residual_mlp as one kernel (f32 arithmetic), one block per SM
  }
  return o;
}
}  // namespace
#endif

bool skip_under_sanitizer(const Backend& b, int64_t macs) {
#if defined(__SANITIZE_ADDRESS__)
  return b.device() == Device::CPU && macs > kSanitizerCpuMacs;
#else
  (void)b;
  (void)macs;
  return false;
#endif
}

bool tensor_core_cuda_target(const std::string& name) {
  return name.starts_with("cuda") && name != "cuda_exact";
}

std::vector<HarnessBackend> harness_backends() {
  std::vector<HarnessBackend> list = {
      {"cpu_1t", [] { return make_cpu_backend(1); }, true},
      {"cpu_2t", [] { return make_cpu_backend(2); }, true},
  };
  // bf16 weights through AVX512-BF16 dot products (activations rounded to bf16) where present.
  if (cpu::has_bf16_dot())
    list.push_back({"cpu_bf16dot_2t", [] {
                      return make_cpu_backend(2, PackedAttentionSchedule::Windowed,
                                              MatmulPrecision::BF16);
                    }});
  else
    std::printf("[op harness] cpu_bf16dot not tested here: this CPU has no AVX512-BF16\n");
  for (const std::string& d : known_devices()) {
    if (d == "cpu") continue;
    try {
      auto probe = make_backend({.device = d});
      if (probe->device() != Device::CPU)
        list.push_back({d, [d] { return make_backend({.device = d}); }, false});
    } catch (const std::exception& e) {
      std::printf("[op harness] %s backend not tested here: %s\n", d.c_str(), e.what());
    }
  }
#ifdef INFERA_WITH_CUDA
  // cuda_exact: the CUDA backend's f32 paths (tiled GEMM instead of cuBLAS, CUDA-core attention
  // instead of tensor cores), which the default configuration reaches only for some shapes. The
  // others keep the kernels that are off by default tested: each turns one of them on (or the
  // default one off) and runs every case.
  if (cuda_device_count() > 0)
    for (const char* name : {"cuda_exact",
                             "cuda_skinny",
                             "cuda_stream",
                             "cuda_glu_gemm",
                             "cuda_unstaged",
                             "cuda_decode_mma",
                             "cuda_interleaved",
                             "cuda_prefill_toggled",
                             "cuda_b1",
                             "cuda_flash_split",
                             "cuda_flash_wide",
                             "cuda_flash_wide_split",
                             "cuda_flash_wide8",
                             "cuda_flash_wide8_plain",
                             "cuda_flash_halves",
                             "cuda_flash_wgmma",
                             "cuda_flash_wgmma128",
                             "cuda_flash_tma",
                             "cuda_flash_tma3",
                             "cuda_flash_tma_pp",
                             "cuda_flash_tma_persist",
                             "cuda_flash_tma3_persist",
                             "cuda_flash_wgmma_pipe",
                             "cuda_flash_wgmma_qlate",
                             "cuda_flash_wgmma128_qlate",
                             "cuda_packed_wgmma128",
                             "cuda_packed_wgmma_pipe",
                             "cuda_packed_mma",
                             "cuda_b1fuse"})
      list.push_back({name, [name] { return make_cuda_backend(0, harness_cuda_options(name)); }});
#endif
  return list;
}

std::unique_ptr<Backend> dense_schedule_backend(const HarnessBackend& hb) {
  if (hb.simd_targets) return make_cpu_backend(2, PackedAttentionSchedule::Dense);
#ifdef INFERA_WITH_CUDA
  if (hb.name.starts_with("cuda")) {
    CudaOptions o = harness_cuda_options(hb.name);
    o.packed_dense = true;
    return make_cuda_backend(0, o);
  }
#endif
  return nullptr;
}

std::string dims(std::initializer_list<int64_t> ds) {
  std::string s;
  for (int64_t d : ds) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

std::vector<double> rmsnorm_reference(const std::vector<double>& x, const std::vector<float>& w,
                                      int n, int d, double eps) {
  std::vector<double> out(x.size());
  for (int r = 0; r < n; ++r) {
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += x[size_t(r * d + i)] * x[size_t(r * d + i)];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int i = 0; i < d; ++i) out[size_t(r * d + i)] = w[size_t(i)] * x[size_t(r * d + i)] * inv;
  }
  return out;
}

std::vector<double> matvec_reference(const std::vector<double>& x, const std::vector<float>& w,
                                     int n, int k, int m) {
  std::vector<double> out(size_t(n * m));
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < m; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += x[size_t(r * k + p)] * w[size_t(j * k + p)];
      out[size_t(r * m + j)] = s;
    }
  return out;
}

std::vector<double> as_doubles(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<double> matmul_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     int n, int k, int m) {
  // The double matmul is the harness's slowest reference (O(n k m), most of the fused-op cases'
  // time under ASan), and the CPU backend's SIMD targets draw the same inputs in turn: results are
  // kept for inputs seen before, matched in full (not by hash), oldest dropped past a byte cap.
  struct Entry {
    int n, k, m;
    std::vector<float> x, w;
    std::vector<double> out;
    size_t bytes() const { return (x.size() + w.size()) * 4 + out.size() * 8; }
  };
  constexpr size_t kCacheBytes = size_t(192) << 20;
  thread_local std::deque<Entry> cache;
  thread_local size_t cached_bytes = 0;
  for (const Entry& e : cache)
    if (e.n == n && e.k == k && e.m == m && e.x == x && e.w == w) return e.out;

  std::vector<double> out(size_t(n * m));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < m; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) s += double(x[size_t(i * k + p)]) * w[size_t(j * k + p)];
      out[size_t(i * m + j)] = s;
    }
  cache.push_back({n, k, m, x, w, out});
  cached_bytes += cache.back().bytes();
  while (cached_bytes > kCacheBytes && cache.size() > 1) {
    cached_bytes -= cache.front().bytes();
    cache.pop_front();
  }
  return out;
}

double nmse_bound(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 1e-7;
    case DType::F16:
      return 1e-5;
    case DType::BF16:
      return 1e-4;
    default:
      return 1e-4;
  }
}

HostData make_host_data(DType dtype, size_t count, std::mt19937& rng, float scale) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  HostData d;
  d.values.resize(count);
  d.bytes.resize(dtype_bytes(dtype, count));
  for (size_t i = 0; i < count; ++i) {
    const float v = dist(rng);
    if (dtype == DType::F32) {
      d.values[i] = v;
      std::memcpy(d.bytes.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = dtype == DType::BF16 ? f32_to_bf16(v) : f32_to_f16(v);
      d.values[i] = dtype == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
      std::memcpy(d.bytes.data() + 2 * i, &h, 2);
    }
  }
  return d;
}

Tensor to_backend(Backend& backend, const std::string& name, DType dtype, Shape shape,
                  HostData& data) {
  // The host tensor borrows `data`; prepare_weight either uses it in place (CPU) or copies it.
  const Tensor host(name, dtype, shape, Device::CPU, data.bytes.data(), nullptr);
  return backend.prepare_weight(host);
}

std::vector<float> read_back(Backend& backend, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  backend.to_host(t, v);
  return v;
}

OpReport::Entry& OpReport::entry(Op op, DType dtype) {
  for (Entry& e : entries_)
    if (e.op == op && e.dtype == dtype) return e;
  return entries_.emplace_back(Entry{op, dtype});
}

bool OpReport::check(Op op, DType dtype, const std::string& case_name, std::span<const float> got,
                     std::span<const double> want) {
  const double err = nmse(got, want);
  Entry& e = entry(op, dtype);
  ++e.cases;
  e.worst = std::max(e.worst, err);  // err is +inf, never NaN, on a non-finite value
  const double bound = nmse_bound(dtype);
  if (!(err <= bound)) {
    ADD_FAILURE() << label_ << " " << op_name(op) << " " << dtype_name(dtype) << " " << case_name
                  << ": NMSE " << err << " over the bound " << bound;
    return false;
  }
  return true;
}

void OpReport::declined(Op op, DType dtype) { entry(op, dtype).declined = true; }

OpReport::~OpReport() {
  for (const Entry& e : entries_) {
    if (e.declined && e.cases == 0)
      std::printf("[op harness] %s %s %s: declined by the backend\n", label_.c_str(),
                  std::string(op_name(e.op)).c_str(), std::string(dtype_name(e.dtype)).c_str());
    else
      std::printf("[op harness] %s %s %s: %d cases, worst NMSE %.2e (bound %.0e)\n", label_.c_str(),
                  std::string(op_name(e.op)).c_str(), std::string(dtype_name(e.dtype)).c_str(),
                  e.cases, e.worst, nmse_bound(e.dtype));
  }
}

void for_each_target(const HarnessBackend& hb,
                     const std::function<void(Backend&, const std::string&)>& body) {
  auto backend = hb.make();
  if (!hb.simd_targets) {
    body(*backend, hb.name);
    return;
  }
  int tested = 0;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    const std::string label = hb.name + "/" + hwy::TargetName(target);
    SCOPED_TRACE(label);
    EXPECT_STREQ(cpu::simd_target_name(), hwy::TargetName(target));
    body(*backend, label);
    ++tested;
  }
  hwy::SetSupportedTargetsForTest(0);
  // Every x86-64 CPU supports at least the SSE4/SSSE3 baseline besides its best target.
  EXPECT_GE(tested, 2);
}

}  // namespace infera::test
