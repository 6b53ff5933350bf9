// Weights the CPU backend repacks at prepare time (Q4_0, Q4_K, Q6_K into the row groups of
// weight_rowgroups.h) and the record of which tensors hold a repacked layout. A repacked tensor
// keeps its dtype, shape and byte count, so the layout is known only here: matmul and embedding
// ask layout_of() before reading one. A view into a repacked tensor (Tensor::rows) would misread
// its bytes, so layout_of() refuses any pointer inside a repacked buffer other than its start.
// The repacked copy is new anonymous memory; the source's pages (the file mapping's) are handed
// back to the kernel once copied, so resident memory stays that of one copy.
//
// What is repacked by default (issue 8; numbers in the quant4 / quant5 notes): Q4_0 (whole-model
// decode x1.47 per CPU second at one thread) and Q4_K (level at one thread, x1.5 on
// cache-resident matrices, q4_k_m decode +6-12 % at two threads, prefill GEMM -1 to -6 %). Q6_K
// row groups are built and tested but off by default: slower than the plain Q6_K kernel on
// DRAM-streamed matrices (x0.84-0.96), which already streams at the core's rate.
// The environment variable INFERA_CPU_REPACK=0 turns repacking off, =all turns every type on,
// =q4_0,q6_k (any list of type names) exactly those (the A/B switches of the benchmarks; results
// agree to the kernels' rounding either way).
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
  RepackedWeights();
  // host_weight itself, or a repacked copy (freed with the returned tensor's last reference).
  Tensor prepare(const Tensor& host_weight);
  // The layout of t's bytes; throws InvalidArgument for a view inside a repacked tensor.
  WeightLayout layout_of(const Tensor& t) const;

 private:
  struct Registry {
    std::mutex mutex;
    std::map<uintptr_t, uintptr_t> spans;  // begin -> end of every live repacked buffer
  };
  std::shared_ptr<Registry> registry_;  // shared with the buffers' deleters
  bool enabled_q4_0_, enabled_q4_k_, enabled_q6_k_;
};

}  // namespace infera::cpu
