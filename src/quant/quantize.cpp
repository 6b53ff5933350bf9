// Dispatch of the reference conversions by dtype, with the whole-blocks check.
#include "quant/quantize.h"

#include <cstring>
#include <string>

#include "infera/error.h"
#include "quant/block_formats.h"

namespace infera::quant {
namespace {

void check_whole_blocks(DType dtype, int64_t k, const char* what) {
  const int64_t block = dtype_block_size(dtype);
  if (k < 0 || k % block != 0)
    throw InvalidArgument(std::string(what) + ": a row of " + std::to_string(k) +
                          " elements is not " + "a whole number of " +
                          std::string(dtype_name(dtype)) + " blocks of " + std::to_string(block));
}

uint16_t to_bf16(float f) {  // round to nearest even, NaN kept quiet (as torch and gguf do)
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

void quantize_row(DType dtype, const float* x, int64_t k, void* out) {
  check_whole_blocks(dtype, k, "quantize_row");
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, x, static_cast<size_t>(k) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(out)[i] = float_to_half(x[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) static_cast<uint16_t*>(out)[i] = to_bf16(x[i]);
      return;
    case DType::Q8_0:
      return quantize_row_q8_0(x, k, out);
    case DType::Q4_0:
      return quantize_row_q4_0(x, k, out);
    case DType::Q4_K:
      return quantize_row_q4_k(x, k, out);
    case DType::Q6_K:
      return quantize_row_q6_k(x, k, out);
    case DType::I32:
      break;
  }
  throw InvalidArgument("quantize_row: cannot convert f32 to " + std::string(dtype_name(dtype)));
}

void dequantize_row(DType dtype, const void* in, int64_t k, float* out) {
  check_whole_blocks(dtype, k, "dequantize_row");
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, in, static_cast<size_t>(k) * 4);
      return;
    case DType::F16:
      for (int64_t i = 0; i < k; ++i) out[i] = half_to_float(static_cast<const uint16_t*>(in)[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < k; ++i) {
        const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(in)[i]) << 16;
        std::memcpy(out + i, &bits, 4);
      }
      return;
    case DType::Q8_0:
      return dequantize_row_q8_0(in, k, out);
    case DType::Q4_0:
      return dequantize_row_q4_0(in, k, out);
    case DType::Q4_K:
      return dequantize_row_q4_k(in, k, out);
    case DType::Q6_K:
      return dequantize_row_q6_k(in, k, out);
    case DType::I32:
      break;
  }
  throw InvalidArgument("dequantize_row: cannot convert " + std::string(dtype_name(dtype)) +
                        " to f32");
}

}  // namespace infera::quant
