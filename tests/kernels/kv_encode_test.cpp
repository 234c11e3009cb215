// The SIMD row encoders (kernels/kv_encode.hpp) against the scalar reference: the same bytes
// and the same scale for every ISA, element type, row length and kind of data, including the
// values where rounding is decided (ties, the f16 overflow and subnormal edges) and the rows
// the reference handles its own way (NaN, infinities, rows too small for 1 / scale).
#include "kernels/kv_encode.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {
namespace {

const std::size_t kLengths[] = {1,  2,  3,  4,  7,  8,   15,  16,  17, 31,
                                32, 33, 63, 64, 65, 127, 128, 136, 256};

// Rows of every kind the tests feed: name and the values for length n.
std::vector<std::pair<std::string, std::vector<float>>> rows_of(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::pair<std::string, std::vector<float>>> rows;
  const auto add = [&](std::string name, auto value) {
    std::vector<float> row(n);
    for (std::size_t i = 0; i < n; ++i) row[i] = value(i);
    rows.emplace_back(std::move(name), std::move(row));
  };
  add("normal", [&](std::size_t) { return normal(rng); });
  add("outlier channel", [&](std::size_t i) { return i == n / 2 ? 40.0f : normal(rng) * 0.1f; });
  add("zeros", [](std::size_t) { return 0.0f; });
  add("negative zeros and zeros", [](std::size_t i) { return i % 2 ? -0.0f : 0.0f; });
  // int8: x · 127 / absmax lands on k + 0.5 (ties to even) for a max of 127.
  add("int8 ties",
      [&](std::size_t i) { return i == 0 ? 127.0f : static_cast<float>(i % 60) - 29.5f; });
  // bf16: the dropped 16 bits exactly half an ulp, with even and odd kept bits.
  add("bf16 ties", [](std::size_t i) {
    return std::bit_cast<float>(0x3f808000u + (static_cast<std::uint32_t>(i % 4) << 16));
  });
  // f16: ties of the normal range, the overflow edge (65504 stays, 65520 is infinity),
  // subnormal halves and the smallest normal one.
  add("f16 edges", [](std::size_t i) {
    const float values[] = {1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f,
                            65504.0f,        65519.9f,
                            65520.0f,        -70000.0f,
                            0x1p-14f,        0x1p-15f + 0x1p-25f,
                            0x1p-24f,        0x1p-25f,
                            0x1.8p-25f,      -0x1p-20f,
                            1e-30f,          -1e-30f};
    return values[i % (sizeof values / sizeof values[0])];
  });
  add("subnormal floats", [](std::size_t i) {
    return std::numeric_limits<float>::denorm_min() * static_cast<float>(i + 1);
  });
  add("huge", [&](std::size_t) { return normal(rng) * 1e37f; });
  add("with NaN", [&](std::size_t i) { return i == n - 1 ? std::nanf("") : normal(rng); });
  add("with infinity", [&](std::size_t i) {
    return i == 0 ? -std::numeric_limits<float>::infinity() : normal(rng);
  });
  return rows;
}

using Param = std::tuple<Isa, KvDtype>;
class KvEncode : public ::testing::TestWithParam<Param> {};

TEST_P(KvEncode, EqualsReferenceBitForBit) {
  const auto [isa, dtype] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const EncodeRowFn encode = encode_row_for(isa);
  unsigned seed = 3;
  for (std::size_t n : kLengths) {
    for (const auto& [name, row] : rows_of(n, ++seed)) {
      SCOPED_TRACE(name + ", n = " + std::to_string(n));
      const std::size_t bytes = kv_row_bytes(dtype, n);
      // Four guard bytes on either side (keeping the row's 16-bit elements aligned, as cache
      // rows are): nothing is written outside the row.
      std::vector<std::byte> want(bytes + 8, std::byte{0x5a}), got(bytes + 8, std::byte{0x5a});
      // Unaligned source: one float into a buffer.
      std::vector<float> src(n + 1);
      std::copy(row.begin(), row.end(), src.begin() + 1);
      const float want_scale = encode_row_ref(dtype, src.data() + 1, n, want.data() + 4);
      const float got_scale = encode(dtype, src.data() + 1, n, got.data() + 4);
      EXPECT_EQ(std::bit_cast<std::uint32_t>(got_scale), std::bit_cast<std::uint32_t>(want_scale));
      EXPECT_EQ(got, want);
    }
  }
}

// Random rows at the row lengths of the model presets, many of them: any lane or tail error
// shows.
TEST_P(KvEncode, ManyRandomRowsEqualReference) {
  const auto [isa, dtype] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const EncodeRowFn encode = encode_row_for(isa);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::size_t n : {64, 96, 128, 136, 256}) {
    std::vector<float> row(n);
    std::vector<std::byte> want(kv_row_bytes(dtype, n)), got(want.size());
    for (int r = 0; r < 300; ++r) {
      const float magnitude = std::exp2(exponent(rng));
      for (float& x : row) x = normal(rng) * magnitude;
      const float want_scale = encode_row_ref(dtype, row.data(), n, want.data());
      ASSERT_EQ(encode(dtype, row.data(), n, got.data()), want_scale) << "n " << n << ", row " << r;
      ASSERT_EQ(got, want) << "n " << n << ", row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    IsasTypes, KvEncode,
    ::testing::Combine(::testing::Values(Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512),
                       ::testing::Values(KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8,
                                         KvDtype::int4)),
    [](const ::testing::TestParamInfo<Param>& info) {
      return std::string(to_string(std::get<0>(info.param))) + "_" +
             std::string(to_string(std::get<1>(info.param)));
    });

}  // namespace
}  // namespace kvscope
