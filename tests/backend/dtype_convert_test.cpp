// The core dtype conversions against properties that do not depend on the code under test:
// every finite f16/bf16 value survives a round trip, and an f32 halfway between two neighbours
// rounds to the one with an even mantissa (IEEE round-to-nearest-even, as torch casts).
#include "core/dtype_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace infera {
namespace {

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

TEST(DTypeConvert, F16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00u) == 0x7c00u) continue;  // inf / NaN
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_f16(f), h) << "h=" << h;
  }
}

TEST(DTypeConvert, F16RoundsHalfwayToEven) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {  // positive finite, below the largest
    const double lo = f16_to_f32(static_cast<uint16_t>(h)),
                 hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in f32: f16 has 11 bits
    ASSERT_EQ(double(mid), (lo + hi) / 2);
    const uint32_t even = (h & 1u) ? h + 1 : h;
    ASSERT_EQ(f32_to_f16(mid), even) << "between " << h << " and " << h + 1;
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 0.0f)), h);
    ASSERT_EQ(f32_to_f16(std::nextafter(mid, 1e9f)), h + 1);
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00u);  // halfway past the largest finite: inf
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bffu);
  EXPECT_EQ(f32_to_f16(-1e-10f), 0x8000u);
  EXPECT_EQ(f32_to_f16(bits_to_float(0x7fc00000u)) & 0x7e00u, 0x7e00u);  // NaN stays NaN
}

TEST(DTypeConvert, Bf16RoundsHalfwayToEven) {
  for (uint32_t h = 0; h < 0x7f7f; h += 7) {
    const float lo = bf16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32_to_bf16(lo), h);
    const float mid = bits_to_float((h << 16) | 0x8000u);
    ASSERT_EQ(f32_to_bf16(mid), (h & 1u) ? h + 1 : h);
  }
}

}  // namespace
}  // namespace infera
