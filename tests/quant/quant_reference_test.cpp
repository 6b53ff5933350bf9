// Block formats against the `gguf` Python package (llama.cpp's reference), from the files that
// tests/data/make_quant_reference.py wrote with it:
//  - dequantization of random blocks of every type: bit-identical (compared as bit patterns, so a
//    NaN or a -0 would have to match too);
//  - Q8_0 and Q4_0 quantization: byte-identical blocks (gguf has reference quantizers for these);
//  - Q4_K and Q6_K quantization (gguf has none): error bounds derived from the formats below, and
//    the blocks must decode (through the checked dequantizer) close to the input;
//  - the f16 rounding of block scales: bit-identical to numpy's float16 cast.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "infera/error.h"
#include "quant/block_formats.h"
#include "quant/quantize.h"

namespace infera {
namespace {

std::vector<uint8_t> read_bytes(const std::string& name) {
  const auto path = std::filesystem::path(INFERA_SOURCE_DIR) / "tests/data/quant" / name;
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "missing " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

template <typename T>
std::vector<T> read_array(const std::string& name) {
  const auto bytes = read_bytes(name);
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

struct TypeCase {
  const char* name;
  DType dtype;
};
const TypeCase kTypes[] = {
    {"q8_0", DType::Q8_0}, {"q4_0", DType::Q4_0}, {"q4_k", DType::Q4_K}, {"q6_k", DType::Q6_K}};

TEST(QuantReference, HalfRoundingMatchesNumpy) {
  const auto values = read_array<float>("f16.f32");
  const auto want = read_array<uint16_t>("f16.f16");
  ASSERT_EQ(values.size(), want.size());
  ASSERT_GT(values.size(), 2000u);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(quant::float_to_half(values[i]), want[i]) << "value " << values[i] << " at " << i;
    const float back = quant::half_to_float(want[i]);
    if (std::isfinite(back)) ASSERT_EQ(quant::float_to_half(back), want[i]) << "round trip " << i;
  }
}

TEST(QuantReference, DequantizeMatchesGgufBitForBit) {
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(t.name);
    const auto blocks = read_bytes(std::string(t.name) + ".random.blocks");
    const auto want = read_array<float>(std::string(t.name) + ".random.f32");
    ASSERT_EQ(want.size(), 4096u);
    ASSERT_EQ(blocks.size(), dtype_bytes(t.dtype, want.size()));
    std::vector<float> got(want.size(), NAN);
    quant::dequantize_row(t.dtype, blocks.data(), static_cast<int64_t>(got.size()), got.data());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(bits_of(got[i]), bits_of(want[i]))
          << "element " << i << ": " << got[i] << " vs " << want[i];
  }
}

TEST(QuantReference, Q8_0AndQ4_0QuantizeMatchGgufByteForByte) {
  const auto input = read_array<float>("input.f32");
  ASSERT_EQ(input.size(), 4096u);
  for (const TypeCase& t : {kTypes[0], kTypes[1]}) {
    SCOPED_TRACE(t.name);
    const auto want = read_bytes(std::string(t.name) + ".blocks");
    ASSERT_EQ(want.size(), dtype_bytes(t.dtype, input.size()));
    std::vector<uint8_t> got(want.size(), 0xAA);
    quant::quantize_row(t.dtype, input.data(), static_cast<int64_t>(input.size()), got.data());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << "byte " << i << " (block " << i / (want.size() / (4096 / 32))
                                 << ")";
  }
}

// Q4_K: a 32-element sub-block spans [min, max] (min clamped to <= 0) in 15 steps; the scale and
// the min are each rounded to 6 bits of the super-block's largest and then to f16, which moves
// the grid by at most ~1/63 of the largest scale times 15 levels. An element may therefore sit at
// most one full step of its own sub-block plus that grid shift away from its value.
// Q6_K: a 16-element group spans [-32, 31] steps of amax/32 (ideal), with an int8 group scale
// relative to the super-block's largest: error <= one ideal step + 32 half-units of scale rounding.
// Both store their super-block scales as f16: relative error 2^-11, and for tiny rows (scales
// below 2^-14, f16 subnormals) an absolute error up to 2^-25 per scale, multiplied by the largest
// integer factor it meets (Q4_K: 63 * 15 for d and 63 for dmin; Q6_K: 128 * 32).
TEST(QuantReference, KQuantsStayWithinTheirStepBounds) {
  const auto input = read_array<float>("input.f32");
  for (const TypeCase& t : {kTypes[2], kTypes[3]}) {
    SCOPED_TRACE(t.name);
    std::vector<uint8_t> blocks(dtype_bytes(t.dtype, input.size()));
    quant::quantize_row(t.dtype, input.data(), static_cast<int64_t>(input.size()), blocks.data());
    std::vector<float> back(input.size(), NAN);
    quant::dequantize_row(t.dtype, blocks.data(), static_cast<int64_t>(input.size()), back.data());
    const int group = t.dtype == DType::Q4_K ? 32 : 16;
    double sum_err2 = 0, sum_x2 = 0;
    for (size_t sb = 0; sb < input.size(); sb += 256) {
      float sb_amax = 0;
      for (size_t i = sb; i < sb + 256; ++i) sb_amax = std::max(sb_amax, std::fabs(input[i]));
      for (size_t g = sb; g < sb + 256; g += group) {
        float lo = 0, hi = 0, amax = 0;
        for (size_t i = g; i < g + group; ++i) {
          lo = std::min(lo, input[i]);
          hi = std::max(hi, input[i]);
          amax = std::max(amax, std::fabs(input[i]));
        }
        const float f16_abs = std::ldexp(1.0f, -25) * (t.dtype == DType::Q4_K ? 63 * 16 : 128 * 32);
        const float bound =
            (t.dtype == DType::Q4_K ? (hi - lo) / 15.0f + 2.0f * 15.0f * (sb_amax / 63.0f) / 63.0f
                                    : amax / 31.0f + 32.0f * (sb_amax / 32.0f) / 128.0f) +
            sb_amax * std::ldexp(1.0f, -10) + f16_abs;
        for (size_t i = g; i < g + group; ++i) {
          const float err = std::fabs(back[i] - input[i]);
          ASSERT_TRUE(err <= bound * 1.001f + 1e-30f)
              << "element " << i << ": " << input[i] << " -> " << back[i] << ", bound " << bound;
          sum_err2 += double(err) * err;
          sum_x2 += double(input[i]) * input[i];
        }
      }
    }
    // Overall: 4-bit with min about 1/30 of the rms, 6-bit about 1/100 (uniform-rounding noise
    // step/sqrt(12) of the ranges above, with room for the outlier rows).
    const double rel = std::sqrt(sum_err2 / sum_x2);
    EXPECT_LT(rel, t.dtype == DType::Q4_K ? 0.06 : 0.015) << "relative rms error";
    std::printf("[ info ] %s relative rms error %.5f\n", t.name, rel);
  }
}

TEST(QuantReference, RowsMustBeWholeBlocks) {
  std::vector<float> x(64, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_THROW(quant::quantize_row(DType::Q8_0, x.data(), 33, out.data()), InvalidArgument);
  EXPECT_THROW(quant::quantize_row(DType::Q4_K, x.data(), 64, out.data()), InvalidArgument);
  EXPECT_THROW(quant::dequantize_row(DType::Q6_K, out.data(), 32, x.data()), InvalidArgument);
  EXPECT_EQ(dtype_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(dtype_bytes(DType::Q4_K, 512), 288u);
  EXPECT_EQ(dtype_bytes(DType::Q6_K, 1), 210u);  // rounds up to a whole block
}

}  // namespace
}  // namespace infera
