// The CPU backend: F32 activations, weights used in place (F32/F16/BF16), SIMD kernels from
// simd_kernels.cpp, work split over one thread pool by rows or heads.
#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/decode_prefetch.h"
#include "backend/cpu/encoder_ops.h"
#include "backend/cpu/matmul_bf16_dot.h"
#include "backend/cpu/matmul_bf16_packed.h"
#include "backend/cpu/matmul_int8_gemm.h"
#include "backend/cpu/quant_matmul.h"
#include "backend/cpu/repacked_weights.h"
#include "backend/cpu/simd_kernels.h"
#include "backend/cpu/thread_pool.h"
#include "backend/cpu/weight_rowgroups.h"
#include "core/float_scan.h"
#include "infera/error.h"
#include "ops/backend.h"

namespace infera {
namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw InvalidArgument(std::string("[") + op + "] " + what);
}
// Argument checks of every op. A macro so that the message (names, shapes.str(), numbers: a few
// allocations) is built only when the check fails: ops run a few hundred times per decoded token,
// and building every message eagerly cost ~1 % of a 2-thread decode profile, on the calling thread
// while the other threads waited (the issue-8-cpuq6 note).
#define INFERA_CPU_EXPECT(ok, op, what) \
  do {                                  \
    if (!(ok)) fail(op, what);          \
  } while (0)

void expect_f32_cpu(const Tensor& t, const char* op) {
  INFERA_CPU_EXPECT(!t.empty(), op, "tensor " + t.name() + " is empty");
  INFERA_CPU_EXPECT(t.device() == Device::CPU, op, "tensor " + t.name() + " is not on the cpu");
  INFERA_CPU_EXPECT(
      t.dtype() == DType::F32, op,
      "tensor " + t.name() + " must be F32, is " + std::string(dtype_name(t.dtype())));
}

void expect_i32_rows(const Tensor& t, int64_t n, const char* op, const char* what) {
  INFERA_CPU_EXPECT(
      !t.empty() && t.dtype() == DType::I32 && t.device() == Device::CPU && t.numel() == n, op,
      std::string(what) + " must be I32 [" + std::to_string(n) + "] on the cpu, is " +
          (t.empty() ? std::string("empty") : t.shape().str()));
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// A host vector of the batch as an I32 tensor, without a copy.
Tensor host_i32(const char* name, const std::vector<int32_t>& v) {
  if (v.empty()) return {};
  return Tensor(name, DType::I32, {static_cast<int64_t>(v.size())}, Device::CPU,
                const_cast<int32_t*>(v.data()), nullptr);
}

std::string shapes(const Tensor& a, const Tensor& b) {
  return a.name() + " " + a.shape().str() + " vs " + b.name() + " " + b.shape().str();
}

int64_t row_width(const Tensor& t) { return t.dim(t.rank() - 1); }
int64_t row_count(const Tensor& t) { return t.numel() / std::max<int64_t>(row_width(t), 1); }

struct HeapFree {
  void operator()(void* p) const { std::free(p); }
};

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, PackedAttentionSchedule schedule, MatmulPrecision precision)
      : pool_(threads),
        repacked_(precision == MatmulPrecision::BF16 && cpu::has_bf16_dot()),
        panels_(static_cast<size_t>(pool_.size())),
        schedule_(schedule),
        bf16_dot_(precision == MatmulPrecision::BF16 && cpu::has_bf16_dot()) {}

  std::string name() const override {
    return std::string("cpu (") + cpu::simd_target_name() + ", " + std::to_string(pool_.size()) +
           " threads" + (bf16_dot_ ? ", bf16 matmul" : "") + ")";
  }
  Device device() const override { return Device::CPU; }
  bool supports(Op op, std::initializer_list<DType> dtypes) const override {
    if (op == Op::SampleRows) return false;  // the Sampler runs on the host already
    for (DType t : dtypes) {
      const bool ok = (op == Op::Embedding || op == Op::Matmul) ? supports_weight(t)
                      : (op == Op::RmsNorm || op == Op::KvWrite || op == Op::Attention ||
                         op == Op::LayerNorm || op == Op::AddBias)
                          ? is_float(t)
                          : t == DType::F32;
      if (!ok) return false;
    }
    return true;
  }
  // Matmul and embedding weights: float, or block-quantized (quant_matmul.h).
  bool supports_weight(DType dtype) const { return is_float(dtype) || dtype_is_quantized(dtype); }

  Tensor alloc(const std::string& name, DType dtype, Shape shape) override {
    // calloc maps large blocks lazily as zero pages, so a KV cache sized for a long context costs
    // memory only as positions fill. Kernels use unaligned loads; 16-byte alignment suffices.
    const size_t bytes =
        std::max<size_t>(dtype_bytes(dtype, static_cast<size_t>(shape.numel())), 1);
    void* p = std::calloc(bytes, 1);
    if (!p) throw Error("out of memory allocating " + name + " " + shape.str());
    return Tensor(name, dtype, shape, Device::CPU, p, std::shared_ptr<void>(p, HeapFree{}));
  }

  Tensor prepare_weight(const Tensor& host_weight) override {
    INFERA_CPU_EXPECT(supports_weight(host_weight.dtype()), "prepare_weight",
                      "tensor " + host_weight.name() + ": dtype " +
                          std::string(dtype_name(host_weight.dtype())) +
                          " is not supported on the cpu");
    // Q4_0 / Q4_K into row groups where that pays; bf16 into pairs for the bf16 dot products.
    return repacked_.prepare(host_weight);
  }

  void to_host(const Tensor& src, std::span<float> dst) override {
    expect_f32_cpu(src, "to_host");
    INFERA_CPU_EXPECT(static_cast<int64_t>(dst.size()) == src.numel(), "to_host", "size mismatch");
    std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
  }

  // Greedy ids straight from the logits (the default copies them to a new host vector first),
  // in SIMD: the first largest value of each row, NaNs skipped, -1 where none is above -inf.
  void argmax_rows(const Tensor& x, std::span<int32_t> ids) override {
    expect_f32_cpu(x, "argmax_rows");
    INFERA_CPU_EXPECT(x.rank() == 2 && static_cast<int64_t>(ids.size()) == x.dim(0), "argmax_rows",
                      "x " + x.shape().str() + " for " + std::to_string(ids.size()) + " rows");
    const int64_t width = x.dim(1);
    const float* p = x.data_as<const float>();
    for (size_t r = 0; r < ids.size(); ++r)
      ids[r] = static_cast<int32_t>(first_argmax_f32(p + static_cast<int64_t>(r) * width, width));
  }

  Batch upload_batch(const BatchDesc& desc) override {
    Batch b;
    b.desc = &desc;
    b.tokens = host_i32("tokens", desc.tokens);
    b.positions = host_i32("positions", desc.positions);
    b.slots = host_i32("slots", desc.slots);
    b.query_start = host_i32("query_start", desc.query_start);
    b.seq_lens = host_i32("seq_lens", desc.seq_lens);
    b.block_table = host_i32("block_table", desc.block_table);
    b.output_rows = host_i32("output_rows", desc.output_rows);
    return b;
  }

  void embedding(const Tensor& table, const Tensor& ids, Tensor& out) override {
    expect_f32_cpu(out, "embedding");
    INFERA_CPU_EXPECT(table.rank() == 2 && out.rank() == 2 && out.dim(1) == table.dim(1) &&
                          supports_weight(table.dtype()),
                      "embedding", shapes(table, out));
    expect_i32_rows(ids, out.dim(0), "embedding", "ids");
    const int64_t dim = table.dim(1);
    const int32_t* id = ids.data_as<const int32_t>();
    const void* packed = nullptr;  // a packed bf16 table's start, the view's first row in it
    int64_t first_row = 0;
    const cpu::WeightLayout layout = repacked_.layout_of(table, &packed, &first_row);
    std::vector<uint8_t>& row_bytes = embedding_row_;  // a repacked table's row as in the file
    for (int64_t i = 0; i < out.dim(0); ++i) {
      INFERA_CPU_EXPECT(id[i] >= 0 && id[i] < table.dim(0), "embedding",
                        "token id " + std::to_string(id[i]) + " outside the vocabulary [0, " +
                            std::to_string(table.dim(0)) + ")");
      float* dst = out.data_as<float>() + i * dim;
      if (layout == cpu::WeightLayout::RowGroups) {
        row_bytes.resize(dtype_bytes(table.dtype(), static_cast<size_t>(dim)));
        cpu::rowgroups_row(table.dtype(), table.data(), dim, id[i], row_bytes.data());
        cpu::weight_row_to_f32(row_bytes.data(), table.dtype(), dim, dst);
        continue;
      }
      if (layout == cpu::WeightLayout::Bf16Pairs) {  // e.g. Qwen3's embedding tied to the head
        row_bytes.resize(static_cast<size_t>(dim) * sizeof(uint16_t));
        auto* row = reinterpret_cast<uint16_t*>(row_bytes.data());
        cpu::bf16_pairs_row(static_cast<const uint16_t*>(packed), dim, first_row + id[i], row);
        cpu::weight_row_to_f32(row, DType::BF16, dim, dst);
        continue;
      }
      const char* row = static_cast<const char*>(table.data()) +
                        dtype_bytes(table.dtype(), static_cast<size_t>(id[i] * dim));
      cpu::weight_row_to_f32(row, table.dtype(), dim, dst);
    }
  }

  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    expect_f32_cpu(x, "rmsnorm");
    expect_f32_cpu(out, "rmsnorm");
    const int64_t dim = row_width(x), rows = row_count(x);
    INFERA_CPU_EXPECT(weight.numel() == dim && out.numel() == x.numel(), "rmsnorm",
                      shapes(x, weight));
    const float* w = widened(weight, widened_weight_);
    const float* src = x.data_as<float>();
    float* dst = out.data_as<float>();
    pool_.parallel_for(rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* xr = src + r * dim;
        float* yr = dst + r * dim;
        // Same order as transformers' Qwen3RMSNorm: mean of squares in f32, rsqrt, then weight.
        const float mean = cpu::dot_f32(xr, xr, dim) / static_cast<float>(dim);
        const float inv = 1.0f / std::sqrt(mean + eps);
        for (int64_t i = 0; i < dim; ++i) yr[i] = w[i] * (xr[i] * inv);
      }
    });
  }

  // The checks of matmul(x, w, out); returns w's rows.
  int64_t check_matmul(const Tensor& x, const Tensor& w, const Tensor& out) const {
    expect_f32_cpu(x, "matmul");
    expect_f32_cpu(out, "matmul");
    INFERA_CPU_EXPECT(
        supports_weight(w.dtype()), "matmul",
        "weight " + w.name() + " dtype " + std::string(dtype_name(w.dtype())) + " unsupported");
    const int64_t k = row_width(x), n = row_count(x);
    INFERA_CPU_EXPECT(w.rank() == 2 && w.dim(1) == k, "matmul", shapes(x, w));
    const int64_t m = w.dim(0);
    INFERA_CPU_EXPECT(row_width(out) == m && row_count(out) == n, "matmul", shapes(out, w));
    return m;
  }

  // The jobs of matmul_quantized_multi for 1-4 quantized weights (each checked against x and its
  // output); false, with nothing checked, when a weight is not quantized or the counts differ.
  bool quantized_jobs(const Tensor& x, std::span<const Tensor* const> ws,
                      std::span<Tensor* const> outs, cpu::QuantMatmulJob (&jobs)[4]) {
    if (ws.size() != outs.size() || ws.empty() || ws.size() > 4) return false;
    for (const Tensor* w : ws)
      if (!dtype_is_quantized(w->dtype())) return false;
    for (size_t i = 0; i < ws.size(); ++i)
      jobs[i] = {ws[i]->data(), ws[i]->dtype(), check_matmul(x, *ws[i], *outs[i]),
                 outs[i]->data_as<float>(), repacked_.layout_of(*ws[i])};
    return true;
  }

  // Decode with quantized weights only: one parallel section for all of them, the input quantized
  // once (cpu::matmul_quantized_multi). False when that path does not apply.
  bool quantized_decode(const Tensor& x, std::span<const Tensor* const> ws,
                        std::span<Tensor* const> outs, bool swiglu) {
    const int64_t n = row_count(x);
    cpu::QuantMatmulJob jobs[4];
    if (n <= 0 || n >= cpu::kQuantPrefillRows || !quantized_jobs(x, ws, outs, jobs)) return false;
    cpu::GemvWeight reads[4];
    int64_t max_m = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
      reads[i] = quantized_rows(*ws[i]);
      max_m = std::max(max_m, jobs[i].m);
    }
    decode_prefetch_.before_gemv(std::span(reads, ws.size()),
                                 cpu::quantized_decode_slices(max_m, pool_.size()));
    const OpTimer timer(op_timing_, decode_matmul_, nbytes_of(ws));
    cpu::matmul_quantized_multi(pool_, x.data_as<float>(), n, row_width(x), jobs,
                                static_cast<int64_t>(ws.size()), swiglu);
    return true;
  }

  // Packed bf16 weights only (--matmul-precision bf16): x rounded to bf16 once and every weight's
  // groups in one parallel section, each thread its share of each weight (with `swiglu`, gate =
  // silu(gate) * up on its rows right after them), instead of a section and a rounding per
  // weight and a separate swiglu op. Each output is the one matmul()'s kernel computes, whatever
  // the split (matmul_bf16_packed.h), so the bits are the separate ops' (tested). False when
  // that path does not apply; INFERA_CPU_FUSED_BF16=0 turns it off (the separate ops).
  bool bf16_packed_multi(const Tensor& x, std::span<const Tensor* const> ws,
                         std::span<Tensor* const> outs, bool swiglu) {
    static const bool enabled = [] {
      const char* e = std::getenv("INFERA_CPU_FUSED_BF16");
      return !(e && std::string(e) == "0");
    }();
    if (!enabled || !bf16_dot_ || ws.size() != outs.size() || ws.empty() || ws.size() > 4)
      return false;
    const int64_t n = row_count(x), k = row_width(x);
    if (n <= 0) return false;
    struct Job {
      const uint16_t* w;
      int64_t r0, m;
      float* out;
    } jobs[4];
    cpu::GemvWeight reads[4];
    int64_t max_groups = 0;
    for (size_t i = 0; i < ws.size(); ++i) {
      if (ws[i]->dtype() != DType::BF16) return false;
      const int64_t m = check_matmul(x, *ws[i], *outs[i]);
      const void* packed = nullptr;
      int64_t r0 = 0;
      if (repacked_.layout_of(*ws[i], &packed, &r0) != cpu::WeightLayout::Bf16Pairs) return false;
      jobs[i] = {static_cast<const uint16_t*>(packed), r0, m, outs[i]->data_as<float>()};
      reads[i] = {packed, r0, m, 2.0 * static_cast<double>(k), decode_streams()};
      max_groups = std::max(max_groups, (m + cpu::kBf16GroupRows - 1) / cpu::kBf16GroupRows);
    }
    // The fused SwiGLU needs gate's and up's rows on the same thread: the same split.
    if (swiglu && (ws.size() != 2 || jobs[0].m != jobs[1].m || jobs[0].r0 != jobs[1].r0))
      return false;
    bf16_rows_.resize(static_cast<size_t>(n * cpu::bf16_pairs_width(k)));
    cpu::round_rows_to_bf16_pairs(x.data_as<float>(), n, k, bf16_rows_.data());
    const int streams = decode_streams();
    const int64_t threads = std::min<int64_t>(pool_.size(), max_groups);
    // Slice s of `slices`: its share of every weight's row groups (gate's and up's together).
    const int64_t slices = threads > 1 && cpu::decode_dynamic_rows()
                               ? std::min<int64_t>(threads * cpu::kDecodeItemsPerThread, max_groups)
                               : threads;
    if (n < cpu::kQuantPrefillRows)
      decode_prefetch_.before_gemv(std::span(reads, ws.size()), slices);
    const OpTimer timer(op_timing_ && n < cpu::kQuantPrefillRows, decode_matmul_, nbytes_of(ws));
    auto slice = [&](int64_t s) {
      for (size_t i = 0; i < ws.size(); ++i) {
        const Job& j = jobs[i];
        const int64_t g0 = j.r0 / cpu::kBf16GroupRows;
        const int64_t groups = (j.r0 + j.m + cpu::kBf16GroupRows - 1) / cpu::kBf16GroupRows - g0;
        const int64_t j_begin = std::max(j.r0, (g0 + groups * s / slices) * cpu::kBf16GroupRows);
        const int64_t j_end =
            std::min(j.r0 + j.m, (g0 + groups * (s + 1) / slices) * cpu::kBf16GroupRows);
        if (j_begin >= j_end) continue;
        cpu::matmul_rows_bf16_pairs(bf16_rows_.data(), n, k, j.w, j_begin, j_end, j.out, j.m, j.r0,
                                    streams);
        if (swiglu && i == 1)  // gate = silu(gate) * up on these rows, as the swiglu op
          for (int64_t row = 0; row < n; ++row) {
            float* g = jobs[0].out + row * j.m + (j_begin - j.r0);
            cpu::silu_mul_f32(g, j.out + row * j.m + (j_begin - j.r0), g, j_end - j_begin);
          }
      }
    };
    if (slices > threads)
      pool_.parallel_items(slices, slice);
    else
      pool_.parallel_for(threads, 1, [&](int64_t t_begin, int64_t t_end) {
        for (int64_t t = t_begin; t < t_end; ++t) slice(t);
      });
    return true;
  }

  // Prefill (n >= kQuantPrefillRows) on quantized weights where the CPU has the int8 GEMM: x is
  // quantized once for all the weights of a format instead of once a weight. The same bits as
  // one matmul() each. False where that does not apply.
  bool quantized_prefill(const Tensor& x, std::span<const Tensor* const> ws,
                         std::span<Tensor* const> outs) {
    const int64_t n = row_count(x);
    cpu::QuantMatmulJob jobs[4];
    if (n < cpu::kQuantPrefillRows || !cpu::has_int8_gemm() || !quantized_jobs(x, ws, outs, jobs))
      return false;
    cpu::matmul_quantized_multi(pool_, x.data_as<float>(), n, row_width(x), jobs,
                                static_cast<int64_t>(ws.size()));
    return true;
  }

  void matmul_multi(const Tensor& x, std::span<const Tensor* const> ws,
                    std::span<Tensor* const> outs) override {
    if (!quantized_decode(x, ws, outs, false) && !quantized_prefill(x, ws, outs) &&
        !bf16_packed_multi(x, ws, outs, false))
      Backend::matmul_multi(x, ws, outs);
  }

  void matmul_swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, Tensor& gate,
                     Tensor& up) override {
    const Tensor* ws[] = {&w_gate, &w_up};
    Tensor* outs[] = {&gate, &up};
    if (w_gate.rank() == 2 && w_up.rank() == 2 && w_gate.dim(0) == w_up.dim(0) &&
        (quantized_decode(x, ws, outs, true) || bf16_packed_multi(x, ws, outs, true)))
      return;
    if (quantized_prefill(x, ws, outs)) {  // as Backend::matmul_swiglu: both, then the swiglu op
      swiglu(gate, up, gate);
      return;
    }
    Backend::matmul_swiglu(x, w_gate, w_up, gate, up);
  }

  void matmul(const Tensor& x, const Tensor& w, Tensor& out) override {
    const int64_t m = check_matmul(x, w, out);
    const int64_t k = row_width(x), n = row_count(x);
    const OpTimer timer(op_timing_ && n < cpu::kQuantPrefillRows, decode_matmul_,
                        static_cast<double>(w.nbytes()));
    if (dtype_is_quantized(w.dtype())) {  // integer kernels on the blocks (quant_matmul.h)
      if (n < cpu::kQuantPrefillRows) {
        const cpu::GemvWeight read = quantized_rows(w);
        decode_prefetch_.before_gemv(std::span(&read, 1),
                                     cpu::quantized_decode_slices(m, pool_.size()));
      }
      return cpu::matmul_quantized(pool_, x.data_as<float>(), n, k, w.data(), w.dtype(), m,
                                   out.data_as<float>(), repacked_.layout_of(w));
    }
    const float* xs = x.data_as<float>();
    float* os = out.data_as<float>();
    // bf16 dot products: the activations rounded to bf16 once for every thread's panels.
    const bool bf16_dot = bf16_dot_ && w.dtype() == DType::BF16;
    const void* packed = nullptr;
    int64_t first_row = 0;
    if (bf16_dot && repacked_.layout_of(w, &packed, &first_row) == cpu::WeightLayout::Bf16Pairs)
      return matmul_bf16_pairs(xs, n, k, static_cast<const uint16_t*>(packed), first_row, m, os);
    if (bf16_dot) {
      bf16_rows_.resize(static_cast<size_t>(n * k));
      cpu::round_rows_to_bf16(xs, n * k, bf16_rows_.data());
    } else {
      for (auto& p : panels_) p.resize(static_cast<size_t>(cpu::kPanelRows * k));
    }
    // Split output columns (weight rows) over threads in whole panels.
    const int64_t panels = (m + cpu::kPanelRows - 1) / cpu::kPanelRows;
    std::atomic<int> slot{0};
    pool_.parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
      const int64_t j_begin = begin * cpu::kPanelRows, j_end = std::min(m, end * cpu::kPanelRows);
      if (bf16_dot) {
        cpu::matmul_rows_bf16_dot(bf16_rows_.data(), n, k, w.data_as<const uint16_t>(), j_begin,
                                  j_end, os, m);
        return;
      }
      std::vector<float>& panel = panels_[static_cast<size_t>(slot.fetch_add(1))];
      cpu::matmul_rows(xs, n, k, w.data(), w.dtype(), j_begin, j_end, os, m, panel.data());
    });
  }

  // bf16 weights packed at prepare time (matmul_bf16_packed.h): rows [r0, r0 + m) of the packed
  // matrix at `w` (r0 > 0 for a view); threads take whole 16-row groups.
  void matmul_bf16_pairs(const float* xs, int64_t n, int64_t k, const uint16_t* w, int64_t r0,
                         int64_t m, float* os) {
    bf16_rows_.resize(static_cast<size_t>(n * cpu::bf16_pairs_width(k)));
    cpu::round_rows_to_bf16_pairs(xs, n, k, bf16_rows_.data());
    const int64_t g0 = r0 / cpu::kBf16GroupRows;
    const int64_t groups = (r0 + m + cpu::kBf16GroupRows - 1) / cpu::kBf16GroupRows - g0;
    // The decode's weight streams in lockstep: INFERA_CPU_GEMV_STREAMS, as the quantized GEMVs.
    const int streams = decode_streams();
    auto rows = [&](int64_t begin, int64_t end) {  // row groups [begin, end)
      const int64_t j_begin = std::max(r0, (g0 + begin) * cpu::kBf16GroupRows);
      const int64_t j_end = std::min(r0 + m, (g0 + end) * cpu::kBf16GroupRows);
      cpu::matmul_rows_bf16_pairs(bf16_rows_.data(), n, k, w, j_begin, j_end, os, m, r0, streams);
    };
    // Decode sizes: slices taken in turn (cpu::decode_dynamic_rows), as bf16_packed_multi;
    // otherwise parallel_for's one chunk a thread.
    const bool dynamic =
        n < cpu::kQuantPrefillRows && pool_.size() > 1 && cpu::decode_dynamic_rows();
    const int64_t slices = std::min<int64_t>(
        dynamic ? pool_.size() * cpu::kDecodeItemsPerThread : pool_.size(), groups);
    if (n < cpu::kQuantPrefillRows) {
      const cpu::GemvWeight read{w, r0, m, 2.0 * static_cast<double>(k), streams};
      decode_prefetch_.before_gemv(std::span(&read, 1), slices);
    }
    if (dynamic) {
      pool_.parallel_items(
          slices, [&](int64_t s) { rows(groups * s / slices, groups * (s + 1) / slices); });
    } else {
      pool_.parallel_for(groups, 1, rows);
    }
  }

  void rope(Tensor& x, const Tensor& positions, double theta) override {
    expect_f32_cpu(x, "rope");
    INFERA_CPU_EXPECT(x.rank() == 3 && x.dim(2) % 2 == 0, "rope", "x " + x.shape().str());
    expect_i32_rows(positions, x.dim(0), "rope", "positions");
    const int64_t n = x.dim(0), heads = x.dim(1), d = x.dim(2), half = d / 2;
    const int32_t* pos = positions.data_as<const int32_t>();
    int32_t max_pos = 0;
    for (int64_t i = 0; i < n; ++i) {
      INFERA_CPU_EXPECT(pos[i] >= 0, "rope", "negative position " + std::to_string(pos[i]));
      max_pos = std::max(max_pos, pos[i]);
    }
    const RopeTable& table = rope_table(theta, d, max_pos);
    float* data = x.data_as<float>();
    pool_.parallel_for(n, 4, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float* cs = table.cos.data() + pos[i] * half;
        const float* sn = table.sin.data() + pos[i] * half;
        for (int64_t h = 0; h < heads; ++h) {
          float* v = data + (i * heads + h) * d;
          for (int64_t j = 0; j < half; ++j) {
            const float a = v[j], b = v[j + half];
            v[j] = a * cs[j] - b * sn[j];
            v[j + half] = b * cs[j] + a * sn[j];
          }
        }
      }
    });
  }

  void gather_rows(const Tensor& src, const Tensor& rows, Tensor& dst) override {
    expect_f32_cpu(src, "gather_rows");
    expect_f32_cpu(dst, "gather_rows");
    const int64_t width = row_width(src), n = row_count(src);
    INFERA_CPU_EXPECT(row_width(dst) == width, "gather_rows", shapes(src, dst));
    expect_i32_rows(rows, row_count(dst), "gather_rows", "rows");
    const int32_t* r = rows.data_as<const int32_t>();
    for (int64_t i = 0; i < row_count(dst); ++i) {
      INFERA_CPU_EXPECT(r[i] >= 0 && r[i] < n, "gather_rows",
                        "row " + std::to_string(r[i]) + " outside [0, " + std::to_string(n) + ")");
      std::memcpy(dst.data_as<float>() + i * width, src.data_as<float>() + r[i] * width,
                  static_cast<size_t>(width) * sizeof(float));
    }
  }

  void layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                 Tensor& out) override {
    expect_f32_cpu(x, "layernorm");
    expect_f32_cpu(out, "layernorm");
    const int64_t dim = row_width(x);
    INFERA_CPU_EXPECT(
        weight.numel() == dim && is_float(weight.dtype()) && out.numel() == x.numel() &&
            (bias.empty() || (bias.numel() == dim && is_float(bias.dtype()))),
        "layernorm", shapes(x, weight) + (bias.empty() ? "" : ", bias " + bias.shape().str()));
    const float* w = widened(weight, widened_weight_);
    const float* b = bias.empty() ? nullptr : widened(bias, widened_bias_);
    cpu::layernorm_rows(pool_, x.data_as<float>(), row_count(x), dim, w, b, eps,
                        out.data_as<float>());
  }

  void gelu(const Tensor& x, Tensor& out) override {
    expect_f32_cpu(x, "gelu");
    expect_f32_cpu(out, "gelu");
    INFERA_CPU_EXPECT(out.numel() == x.numel(), "gelu", shapes(x, out));
    cpu::gelu_erf(pool_, x.data_as<float>(), x.numel(), out.data_as<float>());
  }

  void geglu(const Tensor& input, const Tensor& gate, Tensor& out) override {
    expect_f32_cpu(input, "geglu");
    expect_f32_cpu(gate, "geglu");
    expect_f32_cpu(out, "geglu");
    INFERA_CPU_EXPECT(gate.numel() == input.numel() && out.numel() == input.numel(), "geglu",
                      shapes(input, gate));
    cpu::geglu_erf(pool_, input.data_as<float>(), gate.data_as<float>(), input.numel(),
                   out.data_as<float>());
  }

  void add_bias(const Tensor& x, const Tensor& bias, Tensor& out) override {
    expect_f32_cpu(x, "add_bias");
    expect_f32_cpu(out, "add_bias");
    const int64_t width = row_width(x);
    INFERA_CPU_EXPECT(bias.numel() == width && is_float(bias.dtype()) && out.numel() == x.numel(),
                      "add_bias", shapes(x, bias));
    cpu::add_bias_rows(pool_, x.data_as<float>(), row_count(x), width, widened(bias, widened_bias_),
                       out.data_as<float>());
  }

  void attention_packed(const Tensor& q, const Tensor& k, const Tensor& v, const Batch& batch,
                        const AttentionParams& params, Tensor& out) override;

  void mean_pool(const Tensor& x, const Batch& batch, Tensor& out) override {
    expect_f32_cpu(x, "mean_pool");
    expect_f32_cpu(out, "mean_pool");
    const int64_t width = row_width(x), seqs = batch.num_seqs();
    INFERA_CPU_EXPECT(
        row_count(x) == batch.num_tokens() && row_width(out) == width && row_count(out) == seqs,
        "mean_pool", shapes(x, out) + " for " + std::to_string(seqs) + " sequences");
    expect_i32_rows(batch.query_start, seqs + 1, "mean_pool", "query_start");
    cpu::mean_pool_rows(x.data_as<float>(), width, batch.query_start.data_as<const int32_t>(), seqs,
                        out.data_as<float>());
  }

  OpStats op_stats() const override {
    return {.packed_key_tiles = packed_key_tiles_,
            .packed_query_tile = cpu::kPackedQueryTile,
            .packed_key_tile = cpu::kPackedKeyTile,
            .decode_matmul = decode_matmul_,
            .decode_attention = decode_attention_};
  }
  void reset_op_stats() override {
    packed_key_tiles_ = 0;
    decode_matmul_ = decode_attention_ = {};
  }
  void set_op_timing(bool on) override { op_timing_ = on; }

  void kv_write(const Tensor& k, const Tensor& v, KvLayer& cache, const Batch& batch) override;
  void attention(const Tensor& q, const KvLayer& cache, const Batch& batch,
                 const AttentionParams& params, Tensor& out) override;

  void swiglu(const Tensor& gate, const Tensor& up, Tensor& out) override {
    expect_f32_cpu(gate, "swiglu");
    expect_f32_cpu(up, "swiglu");
    expect_f32_cpu(out, "swiglu");
    INFERA_CPU_EXPECT(gate.numel() == up.numel() && out.numel() == gate.numel(), "swiglu",
                      shapes(gate, up));
    const float* g = gate.data_as<float>();
    const float* u = up.data_as<float>();
    float* o = out.data_as<float>();
    pool_.parallel_for(gate.numel(), 4096, [&](int64_t begin, int64_t end) {
      cpu::silu_mul_f32(g + begin, u + begin, o + begin, end - begin);
    });
  }

  void add(const Tensor& a, const Tensor& b, Tensor& out) override {
    expect_f32_cpu(a, "add");
    expect_f32_cpu(b, "add");
    expect_f32_cpu(out, "add");
    INFERA_CPU_EXPECT(a.numel() == b.numel() && out.numel() == a.numel(), "add", shapes(a, b));
    const float* pa = a.data_as<float>();
    const float* pb = b.data_as<float>();
    float* po = out.data_as<float>();
    // numel() once: called in the loop condition (another translation unit) it kept the residual
    // add scalar, 2% of a 512-token prefill profile.
    const int64_t n = a.numel();
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + pb[i];
  }

 private:
  // cos and sin of pos * inv_freq[j] for every position up to the largest seen, computed once
  // per (theta, head_dim) in f32 exactly as transformers does, then only read.
  struct RopeTable {
    double theta;
    int64_t head_dim, positions = 0;
    std::vector<float> cos, sin;
  };
  const RopeTable& rope_table(double theta, int64_t d, int32_t max_pos) {
    RopeTable* t = nullptr;
    for (RopeTable& r : rope_tables_)
      if (r.theta == theta && r.head_dim == d) t = &r;
    if (!t) t = &rope_tables_.emplace_back(RopeTable{theta, d, 0, {}, {}});
    if (max_pos < t->positions) return *t;
    const int64_t half = d / 2;
    // Grow geometrically so that decode, one position at a time, rarely recomputes.
    const int64_t want = std::max<int64_t>(int64_t{max_pos} + 1, 2 * t->positions);
    std::vector<float> inv_freq(static_cast<size_t>(half));
    for (int64_t j = 0; j < half; ++j) {
      const float expo = static_cast<float>(2 * j) / static_cast<float>(d);
      inv_freq[static_cast<size_t>(j)] =
          1.0f / static_cast<float>(std::pow(static_cast<float>(theta), expo));
    }
    t->cos.resize(static_cast<size_t>(want * half));
    t->sin.resize(static_cast<size_t>(want * half));
    for (int64_t p = t->positions; p < want; ++p)
      for (int64_t j = 0; j < half; ++j) {
        const float angle = static_cast<float>(p) * inv_freq[static_cast<size_t>(j)];
        t->cos[static_cast<size_t>(p * half + j)] = std::cos(angle);
        t->sin[static_cast<size_t>(p * half + j)] = std::sin(angle);
      }
    t->positions = want;
    return *t;
  }

  // Adds one op's wall time and bytes to `into` when op timing is on (set_op_timing).
  class OpTimer {
   public:
    OpTimer(bool on, OpStats::Timed& into, double bytes)
        : into_(on ? &into : nullptr), bytes_(bytes) {
      if (into_) start_ = std::chrono::steady_clock::now();
    }
    ~OpTimer() {
      if (!into_) return;
      into_->seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      into_->bytes += bytes_;
      ++into_->calls;
    }
    OpTimer(const OpTimer&) = delete;
    OpTimer& operator=(const OpTimer&) = delete;

   private:
    OpStats::Timed* into_;
    double bytes_;
    std::chrono::steady_clock::time_point start_;
  };
  static double nbytes_of(std::span<const Tensor* const> ws) {
    double bytes = 0;
    for (const Tensor* w : ws) bytes += static_cast<double>(w->nbytes());
    return bytes;
  }

  // Where a quantized weight's rows lie (the file's rows and row groups alike: row r's bytes start
  // at r / m of the tensor, to within a group).
  static cpu::GemvWeight quantized_rows(const Tensor& w) {
    return {w.data(), 0, w.dim(0),
            static_cast<double>(w.nbytes()) / static_cast<double>(std::max<int64_t>(w.dim(0), 1)),
            decode_streams()};
  }
  // The lockstep streams of a single-row decode GEMV (every kernel's auto count is 4).
  static int decode_streams() {
    const int setting = cpu::quant_gemv_streams();
    return setting == 0 ? cpu::kAutoBf16GemvStreams : setting;
  }

  // A float vector (norm weight, bias) as f32: itself, or widened into `scratch`, which only grows
  // (no allocation per op once the widest has been seen).
  static const float* widened(const Tensor& t, std::vector<float>& scratch) {
    if (t.dtype() == DType::F32) return t.data_as<const float>();
    scratch.resize(static_cast<size_t>(t.numel()));
    cpu::widen_row(t.data(), t.dtype(), t.numel(), scratch.data());
    return scratch.data();
  }

  cpu::ThreadPool pool_;
  cpu::DecodePrefetch decode_prefetch_{pool_};
  cpu::RepackedWeights repacked_;
  std::vector<std::vector<float>> panels_;  // per-thread matmul scratch
  PackedAttentionSchedule schedule_;
  bool bf16_dot_;
  std::vector<uint16_t> bf16_rows_;  // matmul activations rounded to bf16
  std::vector<float> packed_kv_;     // attention_packed's head-major keys and values
  int64_t packed_key_tiles_ = 0;
  std::vector<RopeTable> rope_tables_;
  bool op_timing_ = false;                            // set_op_timing
  OpStats::Timed decode_matmul_, decode_attention_;   // with op_timing_
  std::vector<float> widened_weight_, widened_bias_;  // widened()'s scratch
  std::vector<uint8_t> embedding_row_;                // embedding()'s row of a repacked table
};

// The layer's pools must be [kv_heads, num_blocks, block_size, head_dim] of one float dtype.
void expect_pool(const KvLayer& cache, int64_t kv_heads, int64_t head_dim, const char* op) {
  const Tensor& k = cache.keys;
  INFERA_CPU_EXPECT(
      !k.empty() && k.device() == Device::CPU && k.rank() == 4 && is_float(k.dtype()) &&
          cache.values.shape() == k.shape() && cache.values.dtype() == k.dtype(),
      op, "cache pools must be [kv_heads, blocks, block_size, head_dim] of one float dtype");
  INFERA_CPU_EXPECT(k.dim(0) == kv_heads && k.dim(3) == head_dim, op,
                    "cache " + k.shape().str() + " for " + std::to_string(kv_heads) +
                        " kv heads of " + std::to_string(head_dim));
}

// The batch's slots and block ids must lie inside this pool: a batch validated against another
// cache must not write or read outside this one.
void expect_batch_fits(const Batch& batch, const KvLayer& cache, const char* op) {
  const int64_t blocks = cache.keys.dim(1), bs = cache.keys.dim(2);
  const BatchDesc& d = *batch.desc;
  for (int32_t s : d.slots)
    INFERA_CPU_EXPECT(
        s >= 0 && s < blocks * bs, op,
        "slot " + std::to_string(s) + " outside the cache's " + std::to_string(blocks * bs));
  for (int64_t b = 0; b < d.num_seqs(); ++b) {
    const int64_t used = (d.seq_lens[static_cast<size_t>(b)] + bs - 1) / bs;
    INFERA_CPU_EXPECT(used <= d.max_blocks, op, "a sequence is longer than its block table");
    for (int64_t k = 0; k < used; ++k) {
      const int32_t id = d.block_table[static_cast<size_t>(b * d.max_blocks + k)];
      INFERA_CPU_EXPECT(id >= 0 && id < blocks, op,
                        "block " + std::to_string(id) + " outside the cache");
    }
  }
}

void CpuBackend::kv_write(const Tensor& k, const Tensor& v, KvLayer& cache, const Batch& batch) {
  expect_f32_cpu(k, "kv_write");
  expect_f32_cpu(v, "kv_write");
  INFERA_CPU_EXPECT(k.rank() == 3 && v.shape() == k.shape() && k.dim(0) == batch.num_tokens(),
                    "kv_write", shapes(k, v));
  expect_pool(cache, k.dim(1), k.dim(2), "kv_write");
  expect_i32_rows(batch.slots, k.dim(0), "kv_write", "slots");
  expect_batch_fits(batch, cache, "kv_write");
  cpu::kv_write(k.data_as<float>(), v.data_as<float>(), k.dim(0), batch.slots.data_as<int32_t>(),
                {cache.keys.data(), cache.values.data(), cache.keys.dtype(), k.dim(1),
                 cache.keys.dim(1), cache.keys.dim(2), k.dim(2)});
}

void CpuBackend::attention(const Tensor& q, const KvLayer& cache, const Batch& batch,
                           const AttentionParams& params, Tensor& out) {
  expect_f32_cpu(q, "attention");
  expect_f32_cpu(out, "attention");
  INFERA_CPU_EXPECT(q.rank() == 3 && out.shape() == q.shape() && q.dim(0) == batch.num_tokens(),
                    "attention", shapes(q, out));
  const Tensor& k = cache.keys;
  INFERA_CPU_EXPECT(
      k.rank() == 4 && k.dim(0) > 0 && q.dim(1) % k.dim(0) == 0, "attention",
      "q heads " + std::to_string(q.dim(1)) + " must be a multiple of the cache's kv heads");
  expect_pool(cache, k.dim(0), q.dim(2), "attention");
  INFERA_CPU_EXPECT(!batch.desc->block_table.empty(), "attention", "the batch has no block table");
  expect_batch_fits(batch, cache, "attention");
  double kv_bytes = 0;  // the keys and values every sequence's last row sees
  if (op_timing_ && q.dim(0) < cpu::kQuantPrefillRows)
    for (const int32_t len : batch.desc->seq_lens)
      kv_bytes += 2.0 * static_cast<double>(len) * static_cast<double>(k.dim(0) * k.dim(3)) *
                  static_cast<double>(dtype_bytes(k.dtype(), 1));
  const OpTimer timer(op_timing_ && q.dim(0) < cpu::kQuantPrefillRows, decode_attention_, kv_bytes);
  cpu::attention_paged(
      pool_, q.data_as<float>(), q.dim(1),
      {k.data(), cache.values.data(), k.dtype(), k.dim(0), k.dim(1), k.dim(2), k.dim(3)},
      *batch.desc, params, out.data_as<float>());
}

void CpuBackend::attention_packed(const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Batch& batch, const AttentionParams& params, Tensor& out) {
  for (const Tensor* t : {&q, &k, &v, static_cast<const Tensor*>(&out)})
    expect_f32_cpu(*t, "attention_packed");
  INFERA_CPU_EXPECT(q.rank() == 3 && out.shape() == q.shape() && q.dim(0) == batch.num_tokens(),
                    "attention_packed",
                    shapes(q, out) + " for " + std::to_string(batch.num_tokens()) + " tokens");
  INFERA_CPU_EXPECT(
      k.rank() == 3 && v.shape() == k.shape() && k.dim(0) == q.dim(0) && k.dim(2) == q.dim(2) &&
          k.dim(1) > 0 && q.dim(1) % k.dim(1) == 0,
      "attention_packed",
      shapes(q, k) + ", " + shapes(k, v) + ": q heads must be a multiple of kv heads");
  const BatchDesc& d = *batch.desc;
  INFERA_CPU_EXPECT(
      d.num_seqs() > 0 && d.query_start.front() == 0 && d.query_start.back() == q.dim(0),
      "attention_packed", "query_start must run from 0 to the token count");
  for (int64_t b = 0; b < d.num_seqs(); ++b)
    INFERA_CPU_EXPECT(
        d.query_start[static_cast<size_t>(b)] < d.query_start[static_cast<size_t>(b + 1)],
        "attention_packed", "sequence " + std::to_string(b) + " has no rows");
  INFERA_CPU_EXPECT(params.scale > 0, "attention_packed", "scale must be positive");
  packed_key_tiles_ += cpu::attention_packed(pool_, q.data_as<float>(), k.data_as<float>(),
                                             v.data_as<float>(), q.dim(1), k.dim(1), q.dim(2), d,
                                             params, schedule_ == PackedAttentionSchedule::Windowed,
                                             out.data_as<float>(), packed_kv_);
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads, PackedAttentionSchedule schedule,
                                          MatmulPrecision precision) {
  return std::make_unique<CpuBackend>(threads, schedule, precision);
}

}  // namespace infera
