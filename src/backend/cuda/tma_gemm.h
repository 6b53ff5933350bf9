// What the TMA GEMMs' launch records (glu_gemm.h, qkv_gemm.h, residual_gemm.h) share: how a launch
// of tma_gemm.cuh's kernel is scheduled. Host code only.
#pragma once

#include <cstdint>

namespace infera::cuda {

struct TmaGemmSchedule {
  int64_t tile_cols;  // output columns a tile, of the kernel's widths; anything else: by shape
  int64_t sm_count;   // the device's SMs: the persistent grid's size at most
  // 1: the ping-pong schedule (tma_gemm.cuh; CudaOptions::tma_gemm_pingpong): each consumer
  // warpgroup a whole tile of at most 128 weight rows, one's epilogue under the other's products.
  int64_t pingpong;
};

}  // namespace infera::cuda
