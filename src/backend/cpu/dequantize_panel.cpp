// Dequantization of weight panels for the prefill path (quant_matmul.h), compiled for every
// Highway target so the compiler vectorizes the reference loops (quant/dequantize_blocks-inl.h)
// with the instructions the CPU has. Values may differ from the reference by one rounding where
// the target fuses a multiply-add; the embedding and the tests use the reference itself.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/dequantize_panel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "backend/cpu/quant_matmul.h"
#include "quant/block_formats.h"

HWY_BEFORE_NAMESPACE();
namespace infera::cpu {
namespace HWY_NAMESPACE {

#include "quant/dequantize_blocks-inl.h"

void DequantizeRows(const void* w, DType dtype, int64_t rows, int64_t k, float* out) {
  const size_t row_bytes = dtype_bytes(dtype, static_cast<size_t>(k));
  const auto* src = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r, src += row_bytes, out += k) {
    switch (dtype) {
      case DType::Q8_0:
        DequantizeQ8_0(src, k, out);
        break;
      case DType::Q4_0:
        DequantizeQ4_0(src, k, out);
        break;
      case DType::Q4_K:
        DequantizeQ4_K(src, k, out);
        break;
      case DType::Q6_K:
        DequantizeQ6_K(src, k, out);
        break;
      default:
        return;  // matmul_quantized only calls this for the types above
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace infera::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace infera::cpu {
HWY_EXPORT(DequantizeRows);
void dequantize_rows(const void* w, DType dtype, int64_t rows, int64_t k, float* out) {
  HWY_DYNAMIC_DISPATCH(DequantizeRows)(w, dtype, rows, k, out);
}
}  // namespace infera::cpu
#endif
