// Host side of the TMA copies (mbarrier.cuh's tma_load_2d / _3d): 2D and 3D tensor maps made
// through the driver's cuTensorMapEncodeTiled, found at run time (the binary does not link
// libcuda).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace infera::cuda {

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                   const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                   const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                   CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// nullptr where the driver has no cuTensorMapEncodeTiled.
inline EncodeTiledFn encode_tiled_fn() {
  static EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// A 2-byte-element tensor of `rank` dimensions (dims[0] contiguous; byte_strides[i] between
// consecutive indices of dimension i + 1) read in boxes of `box` with 128-byte swizzle (box[0] x 2
// = 128 bytes); out-of-bounds elements read as zero. False where the driver refuses it.
inline bool encode_swizzled_map(CUtensorMap* map, CUtensorMapDataType type, const void* base,
                                cuuint32_t rank, const cuuint64_t* dims,
                                const cuuint64_t* byte_strides, const cuuint32_t* box) {
  EncodeTiledFn fn = encode_tiled_fn();
  if (!fn) return false;
  const cuuint32_t elem[3] = {1, 1, 1};
  return rank <= 3 &&
         fn(map, type, rank, const_cast<void*>(base), dims, byte_strides, box, elem,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A row-major [rows, cols] matrix with row stride `ld` elements, in boxes of box_rows x box_cols.
inline bool encode_2d_map(CUtensorMap* map, CUtensorMapDataType type, const void* base,
                          int64_t rows, int64_t cols, int64_t ld, int box_cols, int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows)};
  return encode_swizzled_map(map, type, base, 2, dims, strides, box);
}

// A [d2][d1][d0] tensor (d0 contiguous; stride1 / stride2 elements between consecutive d1 / d2
// indices) in boxes of box0 x box1 x box2.
inline bool encode_3d_map(CUtensorMap* map, CUtensorMapDataType type, const void* base, int64_t d0,
                          int64_t d1, int64_t d2, int64_t stride1, int64_t stride2, int box0,
                          int box1, int box2) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(d0), static_cast<cuuint64_t>(d1),
                              static_cast<cuuint64_t>(d2)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(stride1) * 2,
                                 static_cast<cuuint64_t>(stride2) * 2};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box0), static_cast<cuuint32_t>(box1),
                             static_cast<cuuint32_t>(box2)};
  return encode_swizzled_map(map, type, base, 3, dims, strides, box);
}

}  // namespace infera::cuda
