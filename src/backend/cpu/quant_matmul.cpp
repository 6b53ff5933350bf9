// The quantized matmul op: activation quantization, the split over threads, and the dispatch to
// the per-type kernel files.
#include "backend/cpu/quant_matmul.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/env_switch.h"
#include "backend/cpu/matmul_int8_gemm.h"
#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/weight_rowgroups.h"
#include "infera/error.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera::cpu {

// Defined in matmul_q8_0.cpp, matmul_q4_0.cpp, matmul_q4_k.cpp, matmul_q6_k.cpp.
void matmul_rows_q8_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo);
void matmul_rows_q4_0(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo);
void matmul_rows_q4_k(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo);
void matmul_rows_q6_k(const void* acts, int64_t n, int64_t k, const void* w, int64_t j_begin,
                      int64_t j_end, float* out, int64_t ldo);

namespace {

void quantize_row_q4_0_groups(const float* x, int64_t k, ActGroupQ4_0* out) {
  const int64_t blocks = k / 32;
  for (int64_t g = 0; g < (blocks + 3) / 4; ++g) {
    ActGroupQ4_0& grp = out[g];
    std::memset(&grp, 0, sizeof(grp));
    for (int64_t b = 0; b < 4 && 4 * g + b < blocks; ++b) {
      int8_t q[32];
      const float d = quantize_activation_group(x + 32 * (4 * g + b), 32, q);
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) sum += q[i];
      std::memcpy(grp.lo + 16 * b, q, 16);
      std::memcpy(grp.hi + 16 * b, q + 16, 16);
      grp.offset[4 * b] = -8 * sum;
      for (int l = 0; l < 4; ++l) grp.d[4 * b + l] = d;
    }
  }
}

void quantize_row_q8k(const float* x, int64_t k, ActBlockQ8K* out) {
  for (int64_t b = 0; b < k / 256; ++b) {
    out[b].d = quantize_activation_group(x + 256 * b, 256, out[b].qs);
    for (int g = 0; g < 16; ++g) {
      int32_t sum = 0;
      for (int i = 0; i < 16; ++i) sum += out[b].qs[16 * g + i];
      out[b].bsums[g] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace

bool valid_gemv_streams(int s) { return s == 0 || s == 1 || s == 2 || s == 4 || s == 8; }

namespace {

int gemv_streams_from_env() {
  const char* v = std::getenv("INFERA_CPU_GEMV_STREAMS");
  if (!v || !*v || std::strcmp(v, "auto") == 0) return 0;
  char* end = nullptr;
  const long s = std::strtol(v, &end, 10);
  if (*end != '\0' || s == 0 || !valid_gemv_streams(static_cast<int>(s)))
    throw InvalidArgument("INFERA_CPU_GEMV_STREAMS must be auto, 1, 2, 4 or 8, not '" +
                          std::string(v) + "'");
  return static_cast<int>(s);
}

std::atomic<int>& gemv_streams_setting() {
  static std::atomic<int> streams{gemv_streams_from_env()};
  return streams;
}
}  // namespace

int quant_gemv_streams() { return gemv_streams_setting().load(std::memory_order_relaxed); }

void set_quant_gemv_streams(int streams) {
  if (!valid_gemv_streams(streams))
    throw InvalidArgument("[matmul] GEMV streams must be 0 (auto), 1, 2, 4 or 8, not " +
                          std::to_string(streams));
  gemv_streams_setting().store(streams, std::memory_order_relaxed);
}

namespace {
std::atomic<bool>& dynamic_rows_setting() {
  // Off by default: measured slower on this project's 2-core VM (bench/reference/lead11_cpu/quiet:
  // q8_0 decode x0.93 of the fixed split in each of 3 quiet rounds).
  static std::atomic<bool> on{on_off_from_env("INFERA_CPU_DYNAMIC_ROWS", false)};
  return on;
}
}  // namespace

bool decode_dynamic_rows() { return dynamic_rows_setting().load(std::memory_order_relaxed); }
void set_decode_dynamic_rows(bool on) {
  dynamic_rows_setting().store(on, std::memory_order_relaxed);
}

namespace {
std::atomic<bool>& q6_k_gfni_setting() {
  static std::atomic<bool> on{on_off_from_env("INFERA_CPU_Q6K_GFNI", true)};
  return on;
}
}  // namespace

bool cpu_has_gfni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = __builtin_cpu_supports("gfni");
  return has;
#else
  return false;
#endif
}

bool q6_k_gfni_unpack() {
  return cpu_has_gfni() && q6_k_gfni_setting().load(std::memory_order_relaxed);
}

void set_q6_k_gfni_unpack(bool on) { q6_k_gfni_setting().store(on, std::memory_order_relaxed); }

bool uses_q8k_activations(DType weight_type) {
  return weight_type == DType::Q4_K || weight_type == DType::Q6_K;
}

int64_t activation_row_bytes(DType weight_type, int64_t k) {
  if (weight_type == DType::Q4_0)
    return (k / 32 + 3) / 4 * static_cast<int64_t>(sizeof(ActGroupQ4_0));
  return uses_q8k_activations(weight_type) ? k / 256 * static_cast<int64_t>(sizeof(ActBlockQ8K))
                                           : k / 32 * static_cast<int64_t>(sizeof(ActBlockQ8));
}

void quantize_activation_row(DType weight_type, const float* x, int64_t k, void* out) {
  if (uses_q8k_activations(weight_type)) {
    quantize_row_q8k(x, k, static_cast<ActBlockQ8K*>(out));
  } else if (weight_type == DType::Q4_0) {
    quantize_row_q4_0_groups(x, k, static_cast<ActGroupQ4_0*>(out));
  } else {
    quantize_activation_row_q8(x, k, static_cast<ActBlockQ8*>(out));
  }
}

void activation_element(DType weight_type, const void* row, int64_t p, float& d, int& q) {
  if (uses_q8k_activations(weight_type)) {
    const auto& blk = static_cast<const ActBlockQ8K*>(row)[p / 256];
    d = blk.d;
    q = blk.qs[p % 256];
  } else if (weight_type == DType::Q4_0) {
    const auto& grp = static_cast<const ActGroupQ4_0*>(row)[p / 128];
    const int64_t b = (p % 128) / 32, e = p % 32;
    d = grp.d[4 * b];
    q = e < 16 ? grp.lo[16 * b + e] : grp.hi[16 * b + e - 16];
  } else {
    const auto& blk = static_cast<const ActBlockQ8*>(row)[p / 32];
    d = blk.d;
    q = blk.qs[p % 32];
  }
}

void matmul_rows_quantized(const void* acts, int64_t n, int64_t k, const void* w, DType wtype,
                           int64_t j_begin, int64_t j_end, float* out, int64_t ldo) {
  switch (wtype) {
    case DType::Q8_0:
      return matmul_rows_q8_0(acts, n, k, w, j_begin, j_end, out, ldo);
    case DType::Q4_0:
      return matmul_rows_q4_0(acts, n, k, w, j_begin, j_end, out, ldo);
    case DType::Q4_K:
      return matmul_rows_q4_k(acts, n, k, w, j_begin, j_end, out, ldo);
    case DType::Q6_K:
      return matmul_rows_q6_k(acts, n, k, w, j_begin, j_end, out, ldo);
    default:
      throw InvalidArgument("[matmul] weight type " + std::string(dtype_name(wtype)) +
                            " has no quantized kernel");
  }
}

const uint8_t* plain_weight_rows(const void* w, DType wtype, WeightLayout layout, int64_t k,
                                 int64_t j, int64_t rows, std::vector<uint8_t>& scratch) {
  const size_t row_bytes = dtype_bytes(wtype, static_cast<size_t>(k));
  if (layout == WeightLayout::Rows) return static_cast<const uint8_t*>(w) + row_bytes * j;
  scratch.resize(row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    rowgroups_row(wtype, w, k, j + r, scratch.data() + row_bytes * r);
  return scratch.data();
}

namespace {
// matmul_quantized's checks of one weight against rows of k.
void check_quantized_job(const QuantMatmulJob& j, int64_t k) {
  if (j.layout == WeightLayout::RowGroups && !rowgroups_fit(j.wtype, j.m, k))
    throw InvalidArgument("[matmul] a " + std::string(dtype_name(j.wtype)) + " [" +
                          std::to_string(j.m) + ", " + std::to_string(k) +
                          "] weight cannot be in row groups");
  if (!dtype_is_quantized(j.wtype))
    throw InvalidArgument("[matmul] " + std::string(dtype_name(j.wtype)) +
                          " is not a quantized weight type");
  const int64_t block = dtype_block_size(j.wtype);
  if (k % block != 0)
    throw InvalidArgument("[matmul] " + std::string(dtype_name(j.wtype)) + " weight rows of " +
                          std::to_string(k) + " elements are not whole blocks of " +
                          std::to_string(block));
}
}  // namespace

void matmul_quantized(ThreadPool& pool, const float* x, int64_t n, int64_t k, const void* w,
                      DType wtype, int64_t m, float* out, WeightLayout layout) {
  check_quantized_job({w, wtype, m, out, layout}, k);
  if (n >= kQuantPrefillRows) {
    if (has_int8_gemm()) return matmul_quantized_int8_gemm(pool, x, n, k, w, wtype, m, out, layout);
    return matmul_quantized_f32_panels(pool, x, n, k, w, wtype, m, out, layout);
  }
  const QuantMatmulJob job{w, wtype, m, out, layout};
  matmul_quantized_multi(pool, x, n, k, &job, 1);
}

namespace {

// Which activation buffer a weight type reads: Q4_K and Q6_K share the Q8K blocks.
int activation_format(DType weight_type) {
  if (uses_q8k_activations(weight_type)) return 0;
  return weight_type == DType::Q4_0 ? 1 : 2;
}
constexpr int kActivationFormats = 3;

// Thread t of `threads`' share of [0, count), boundaries at multiples of `align` (except count).
int64_t split_point(int64_t count, int64_t t, int64_t threads, int64_t align) {
  if (t >= threads) return count;
  return count * t / threads / align * align;
}

}  // namespace

namespace {
// At least 16 rows of the largest weight per thread, so that small matrices stay on one core.
int64_t decode_threads(int64_t max_m, int pool_threads) {
  return std::clamp<int64_t>(max_m / 16, 1, pool_threads);
}
}  // namespace

int64_t quantized_decode_slices(int64_t max_m, int pool_threads) {
  const int64_t threads = decode_threads(max_m, pool_threads);
  return threads > 1 && decode_dynamic_rows() ? threads * kDecodeItemsPerThread : threads;
}

void matmul_quantized_multi(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                            const QuantMatmulJob* jobs, int64_t count, bool swiglu) {
  if (n >= kQuantPrefillRows && !swiglu && has_int8_gemm() && count <= 8) {
    // Prefill: the int8 GEMM quantizes x once per format for all the weights.
    for (int64_t i = 0; i < count; ++i) check_quantized_job(jobs[i], k);
    return matmul_quantized_int8_gemm_multi(pool, x, n, k, jobs, count);
  }
  if (n <= 0 || n >= kQuantPrefillRows)
    throw InvalidArgument("[matmul] the multi-weight quantized path takes 1.." +
                          std::to_string(kQuantPrefillRows - 1) +
                          " rows (more without swiglu where the CPU has the int8 GEMM), not " +
                          std::to_string(n));
  if (swiglu && (count != 2 || jobs[0].m != jobs[1].m))
    throw InvalidArgument("[matmul_swiglu] gate and up must be two weights of equal rows");
  // Activation rows per format in use, in one buffer reused across calls by this (calling)
  // thread: a forward pass allocates nothing here once the largest activation has been seen.
  int64_t offset[kActivationFormats], act_bytes[kActivationFormats] = {};
  DType format_type[kActivationFormats] = {};
  bool used[kActivationFormats] = {};
  for (int64_t i = 0; i < count; ++i) {
    const QuantMatmulJob& j = jobs[i];
    check_quantized_job(j, k);
    const int f = activation_format(j.wtype);
    used[f] = true;
    format_type[f] = j.wtype;
  }
  int64_t total = 0;
  for (int f = 0; f < kActivationFormats; ++f) {
    offset[f] = total;
    if (used[f]) act_bytes[f] = activation_row_bytes(format_type[f], k);
    total += n * act_bytes[f];
  }
  thread_local std::vector<uint8_t> acts;
  if (acts.size() < static_cast<size_t>(total)) acts.resize(static_cast<size_t>(total));
  uint8_t* a = acts.data();

  // Quantized here, once per format, before the workers start: splitting it over the threads
  // (tried: a barrier inside the section) saves half of ~1 us per matmul on a quiet machine but
  // makes the caller wait for a descheduled worker before its own rows on a loaded one.
  for (int f = 0; f < kActivationFormats; ++f)
    if (used[f])
      for (int64_t i = 0; i < n; ++i)
        quantize_activation_row(format_type[f], x + i * k, k, a + offset[f] + i * act_bytes[f]);
  int64_t max_m = 0;
  for (int64_t i = 0; i < count; ++i) max_m = std::max(max_m, jobs[i].m);
  const int64_t threads = decode_threads(max_m, pool.size());
  // Slice s of `slices`: its share of every weight's rows (whole row groups; gate's and up's
  // rows together for the SwiGLU).
  const int64_t slices = quantized_decode_slices(max_m, pool.size());
  auto slice = [&](int64_t s) {
    for (int64_t i = 0; i < count; ++i) {
      const QuantMatmulJob& j = jobs[i];
      const int64_t r0 = split_point(j.m, s, slices, kGroupRows),
                    r1 = split_point(j.m, s + 1, slices, kGroupRows);
      if (r0 == r1) continue;
      const uint8_t* ja = a + offset[activation_format(j.wtype)];
      if (j.layout == WeightLayout::RowGroups)
        matmul_rows_rowgroups(j.wtype, ja, n, k, j.w, r0, r1, j.out, j.m);
      else
        matmul_rows_quantized(ja, n, k, j.w, j.wtype, r0, r1, j.out, j.m);
      if (swiglu && i == 1)  // gate = silu(gate) * up on these rows, as the swiglu op
        for (int64_t row = 0; row < n; ++row) {
          float* g = jobs[0].out + row * j.m;
          const float* u = j.out + row * j.m;
          silu_mul_f32(g + r0, u + r0, g + r0, r1 - r0);
        }
    }
  };
  if (slices > threads)
    pool.parallel_items(slices, slice);
  else
    pool.parallel_for(threads, 1, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) slice(t);
    });
}

void matmul_quantized_f32_panels(ThreadPool& pool, const float* x, int64_t n, int64_t k,
                                 const void* w, DType wtype, int64_t m, float* out,
                                 WeightLayout layout) {
  const int64_t panels = (m + kPanelRows - 1) / kPanelRows;
  pool.parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> panel;  // one panel per thread, reused across calls
    thread_local std::vector<uint8_t> restored;
    panel.resize(static_cast<size_t>(kPanelRows * k));
    for (int64_t p = begin; p < end; ++p) {
      const int64_t j = p * kPanelRows, rows = std::min(kPanelRows, m - j);
      dequantize_rows(plain_weight_rows(w, wtype, layout, k, j, rows, restored), wtype, rows, k,
                      panel.data());
      matmul_rows(x, n, k, panel.data(), DType::F32, 0, rows, out + j, m, nullptr);
    }
  });
}

void weight_row_to_f32(const void* row, DType dtype, int64_t n, float* out) {
  if (dtype_is_quantized(dtype)) {
    quant::dequantize_row(dtype, row, n, out);
  } else {
    widen_row(row, dtype, n, out);
  }
}

}  // namespace infera::cpu
