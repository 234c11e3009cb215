#include "kernels/number_formats.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kvscope {
namespace {

TEST(NumberFormats, F16ExactValuesRoundTrip) {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0x1p-14f, 0x1p-24f, 0.333251953125f}) {
    EXPECT_EQ(f16_bits_to_f32(f32_to_f16_bits(x)), x) << x;
  }
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(0x1p-24f), 0x0001);  // smallest subnormal
}

TEST(NumberFormats, F16RoundsToNearestEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to the even significand (1).
  EXPECT_EQ(f32_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);
  // 1 + 3·2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(f32_to_f16_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // above halfway: up
  EXPECT_EQ(f32_to_f16_bits(0x1p-25f), 0x0000);                    // tie at the bottom: 0
  EXPECT_EQ(f32_to_f16_bits(3 * 0x1p-25f), 0x0002);                // tie: even subnormal
}

TEST(NumberFormats, F16OverflowInfinityAndNaN) {
  EXPECT_EQ(f32_to_f16_bits(65519.0f), 0x7bff);  // just below the rounding threshold
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-1e30f), 0xfc00);
  EXPECT_TRUE(std::isinf(f16_bits_to_f32(0x7c00)));
  EXPECT_TRUE(
      std::isnan(f16_bits_to_f32(f32_to_f16_bits(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(NumberFormats, F16RelativeErrorIsAtMostHalfAnUlp) {
  for (float x = 1e-4f; x < 6e4f; x *= 1.0137f) {
    const float back = f16_bits_to_f32(f32_to_f16_bits(x));
    EXPECT_LE(std::fabs(back - x), x * 0x1p-11f + 0x1p-25f) << x;
  }
}

TEST(NumberFormats, Bf16RoundsToNearestEvenAndKeepsNaN) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);             // tie: even
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);         // tie: even
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // above: up
  EXPECT_EQ(bf16_bits_to_f32(0xc040), -3.0f);
  EXPECT_TRUE(
      std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()))));
  for (float x = 1e-30f; x < 1e30f; x *= 1.37f) {
    EXPECT_LE(std::fabs(bf16_bits_to_f32(f32_to_bf16_bits(x)) - x), x * 0x1p-8f) << x;
  }
}

}  // namespace
}  // namespace kvscope
