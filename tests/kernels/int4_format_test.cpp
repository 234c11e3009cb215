// The int4 cache format (kernels/ref/kv_row_ref.cpp): q4_0's block layout with symmetric
// levels −7…7, one f16 scale per group of 32 elements along head_dim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/kv_dtype.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {
namespace {

float group_scale(const std::vector<std::byte>& row, std::size_t group) {
  std::uint16_t bits;
  std::memcpy(&bits, row.data() + group * kInt4GroupBytes, 2);
  return f16_bits_to_f32(bits);
}

// Every element within half a step of its value, the step being its own group's scale:
// absmax(group) / 7. Odd head_dims end with a shorter group that has its own scale.
TEST(Int4Format, EachElementWithinHalfItsGroupsStep) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (std::size_t d : {6, 24, 32, 40, 72, 128, 136}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    std::vector<float> x(d), back(d);
    for (std::size_t j = 0; j < d; ++j) x[j] = unit(rng) * (j / 32 + 1) * (j == 3 ? 9.0f : 1.0f);
    std::vector<std::byte> row(kv_row_bytes(KvDtype::int4, d));
    EXPECT_EQ(encode_row_ref(KvDtype::int4, x.data(), d, row.data()), 1.0f);
    decode_row_ref(KvDtype::int4, row.data(), 1.0f, d, back.data());
    for (std::size_t g0 = 0; g0 < d; g0 += 32) {
      const std::size_t g1 = std::min(d, g0 + 32);
      float absmax = 0.0f;
      for (std::size_t j = g0; j < g1; ++j) absmax = std::max(absmax, std::fabs(x[j]));
      const float scale = group_scale(row, g0 / 32);
      EXPECT_NEAR(scale, absmax / 7, absmax / 7 * 0x1p-11) << "group " << g0 / 32;
      for (std::size_t j = g0; j < g1; ++j) {
        EXPECT_LE(std::fabs(back[j] - x[j]), scale / 2 * (1 + 0x1p-10)) << "element " << j;
      }
    }
  }
}

// Byte j of a block holds element j in its low nibble and element j + 16 in its high nibble,
// each as q + 8; the f16 scale comes first.
TEST(Int4Format, NibbleOrderIsQ4_0s) {
  std::vector<float> x(32, 0.0f);
  x[0] = 7.0f;    // q 7  → nibble 15, low nibble of byte 0
  x[16] = -7.0f;  // q −7 → nibble 1, high nibble of byte 0
  x[1] = 3.0f;    // q 3  → nibble 11, low nibble of byte 1
  std::vector<std::byte> row(kInt4GroupBytes);
  encode_row_ref(KvDtype::int4, x.data(), 32, row.data());
  EXPECT_EQ(group_scale(row, 0), 1.0f);
  EXPECT_EQ(static_cast<unsigned>(row[2]), 0x1fu);
  EXPECT_EQ(static_cast<unsigned>(row[3]), 0x8bu);
  EXPECT_EQ(static_cast<unsigned>(row[4]), 0x88u);  // zeros
}

// An all-zero group gets scale 0 and decodes to 0 (no NaN), beside a nonzero group.
TEST(Int4Format, AllZeroGroupHasScaleZero) {
  std::vector<float> x(40, 0.0f), back(40, -1.0f);
  x[35] = 2.0f;
  std::vector<std::byte> row(kv_row_bytes(KvDtype::int4, 40));
  encode_row_ref(KvDtype::int4, x.data(), 40, row.data());
  EXPECT_EQ(group_scale(row, 0), 0.0f);
  EXPECT_EQ(group_scale(row, 1), f16_bits_to_f32(f32_to_f16_bits(2.0f / 7)));
  decode_row_ref(KvDtype::int4, row.data(), 1.0f, 40, back.data());
  for (std::size_t j = 0; j < 32; ++j) EXPECT_EQ(back[j], 0.0f) << j;
  EXPECT_NEAR(back[35], 2.0f, 2.0f / 14);
}

TEST(KvTypes, ParseAndNamePairs) {
  EXPECT_EQ(parse_kv_types("int8:f16"), KvTypes(KvDtype::int8, KvDtype::f16));
  EXPECT_EQ(parse_kv_types("int4"), KvTypes(KvDtype::int4));
  EXPECT_EQ(to_string(KvTypes(KvDtype::int8, KvDtype::f16)), "int8:f16");
  EXPECT_EQ(to_string(KvTypes(KvDtype::bf16, KvDtype::bf16)), "bf16");
  EXPECT_THROW(parse_kv_types("int8:q4"), std::invalid_argument);
  EXPECT_THROW(parse_kv_types("int3"), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
