// Weights the CPU backend repacks at prepare time (Q4_0, Q4_K, Q6_K, Q8_0 into the row groups of
// weight_rowgroups.h; bf16 into the pairs of matmul_bf16_packed.h when the backend computes bf16
// matmuls with AVX512-BF16 dot products) and the record of which tensors hold a repacked layout. A
// repacked tensor keeps its dtype, shape and byte count, so the layout is known only here: matmul
// and embedding ask layout_of() before reading one. A view into a repacked tensor (Tensor::rows)
// would misread its bytes, so layout_of() refuses any pointer inside a repacked buffer other than
// its start. The repacked copy is new anonymous memory; the source's pages (the file mapping's) are
// handed back to the kernel once copied, so resident memory stays that of one copy.
//
// What is repacked by default (issue 8; numbers in the quant4 / quant5 notes): Q4_0 (whole-model
// decode x1.47 per CPU second at one thread) and Q4_K (level at one thread, x1.5 on
// cache-resident matrices, q4_k_m decode +6-12 % at two threads, prefill GEMM -1 to -6 %). Q6_K
// (the LM head and half of v / down in Q4_K_M files, 45 % of the 0.6B file's bytes): row groups
// since session 19, when their unit's scales moved ahead of its quants (weight_rowgroups.h); on
// the old layout they streamed slower than the file's rows (x0.84-0.96), now faster (2 threads
// from DRAM x1.06 in a 35 GB/s window, x1.20 at 48 GB/s: bench/probes/rowgroup_dram_probe.cpp;
// q4_k_m decode x1.018, 42 of 60 rounds, prefill level). Q8_0 (issue 8,
// the cpuq8 note): row groups by default; the file layout's kernel is compute-bound (~34 GB/s per
// core) where the row-group kernel needs a quarter of its instructions per byte.
// The environment variable INFERA_CPU_REPACK=0 turns repacking off, =all turns every type on,
// =q4_0,q6_k (any list of type names) exactly those (the A/B switches of the benchmarks; results
// agree to the kernels' rounding either way).
//
// bf16 (issue 8, the bf16pk note): packed by default when the backend was made with bf16 matmul
// precision on a CPU with AVX512-BF16 (prepare-time cost: one pass over the weights; the copy
// replaces the file's pages, released as for the row groups). Decode and prefill both read the
// packed form, so they keep one summation order. A bf16 tensor keeps dtype and shape; its buffer
// is bf16_pairs_bytes(m, k) (the file's byte count when m % 16 == 0 and k is even). Embedding
// lookups read their rows back out of it (bf16_pairs_row), so a tied embedding / LM head is packed
// once and serves both. INFERA_CPU_REPACK=0 (or a list without bf16) keeps the rows.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cpu/quant_matmul.h"
#include "infera/tensor.h"

namespace infera::cpu {

class RepackedWeights {
 public:
  // pack_bf16: the backend computes bf16 matmuls on packed weights (has_bf16_dot() required).
  explicit RepackedWeights(bool pack_bf16 = false);
  // host_weight itself, or a repacked copy (freed with the returned tensor's last reference).
  Tensor prepare(const Tensor& host_weight);
  // The layout of t's bytes; throws InvalidArgument for a view inside a repacked tensor, except
  // whole-row views (Tensor::rows) of packed bf16, which read the packed matrix: then *base (if
  // given) is its start and *first_row the view's first row in it.
  WeightLayout layout_of(const Tensor& t, const void** base = nullptr,
                         int64_t* first_row = nullptr) const;

 private:
  struct Registry {
    std::mutex mutex;
    struct Span {
      uintptr_t end;
      WeightLayout layout;
      int64_t row_width;  // k of a packed bf16 [m, k] (its views' row width)
    };
    std::map<uintptr_t, Span> spans;  // begin -> end and layout of every live repacked buffer
  };
  std::shared_ptr<Registry> registry_;  // shared with the buffers' deleters
  bool enabled_q4_0_, enabled_q4_k_, enabled_q6_k_, enabled_q8_0_, enabled_bf16_;
};

}  // namespace infera::cpu
