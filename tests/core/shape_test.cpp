// Shape arithmetic, the one place it is overflow-checked: every dimension >= 0 and the product of
// the non-zero dimensions within int64, so that no product of dimensions, in any order, overflows.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "infera/error.h"
#include "infera/tensor.h"

namespace infera {
namespace {

constexpr int64_t k2_40 = int64_t{1} << 40;
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeArithmetic, OrdinaryShapes) {
  EXPECT_EQ(Shape({3, 4, 5}).numel(), 60);
  EXPECT_EQ(Shape().numel(), 1);  // a scalar
  EXPECT_EQ(Shape({0, 7}).numel(), 0);
  EXPECT_EQ(Shape({kMax}).numel(), kMax);
  EXPECT_EQ(shape_nbytes(DType::BF16, Shape({151936, 1024})), 151936u * 1024u * 2u);
  EXPECT_EQ(shape_nbytes(DType::F32, Shape({0, k2_40})), 0u);
}

// The review's case: with a zero dimension the product is 0 whatever the others are, but a
// left-to-right product of [2^40, 2^40, 0] overflowed int64 before reaching the zero
// (undefined behaviour), and so would any row width or stride taken from the other dimensions.
TEST(ShapeArithmetic, ZeroDimensionDoesNotMakeHugeOthersValid) {
  for (const Shape& s :
       {Shape({k2_40, k2_40, 0}), Shape({0, k2_40, k2_40}), Shape({k2_40, 0, k2_40})}) {
    EXPECT_THROW(s.numel(), InvalidArgument) << s.str();
    EXPECT_THROW(shape_nbytes(DType::F32, s), InvalidArgument) << s.str();
  }
}

TEST(ShapeArithmetic, OverflowAndNegativeDimensionsThrow) {
  EXPECT_THROW(Shape({k2_40, k2_40}).numel(), InvalidArgument);
  EXPECT_THROW(Shape({kMax, 2}).numel(), InvalidArgument);
  EXPECT_THROW(Shape({-1, 4}).numel(), InvalidArgument);
  EXPECT_THROW(Shape({4, -1}).numel(), InvalidArgument);
  // Fits as elements, not as bytes.
  EXPECT_EQ(Shape({int64_t{1} << 62}).numel(), int64_t{1} << 62);
  EXPECT_THROW(shape_nbytes(DType::F32, Shape({int64_t{1} << 62})), InvalidArgument);
  EXPECT_THROW(dtype_bytes(DType::F32, size_t{1} << 62), InvalidArgument);
  EXPECT_EQ(dtype_bytes(DType::BF16, size_t{1} << 61), size_t{1} << 62);
  try {
    Shape({k2_40, k2_40}).numel();
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "shape [1099511627776, 1099511627776]: a negative dimension, or more than "
                 "2^63-1 elements");
  }
}

TEST(ShapeArithmetic, TensorBytesUseTheCheckedPath) {
  const Tensor ok("t", DType::BF16, Shape({int64_t{1} << 61}), Device::CPU, nullptr, {});
  EXPECT_EQ(ok.nbytes(), size_t{1} << 62);
  const Tensor bad("t", DType::F32, Shape({0, k2_40, k2_40}), Device::CPU, nullptr, {});
  EXPECT_THROW(bad.nbytes(), InvalidArgument);
  EXPECT_THROW(bad.numel(), InvalidArgument);
}

}  // namespace
}  // namespace infera
