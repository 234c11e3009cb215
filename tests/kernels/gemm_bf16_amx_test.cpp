// The AMX-BF16 batch projection against a float64 product over the same bf16-rounded x:
// products of two bf16 values are exact, so the only error is f32 summation (bounded by
// k · 2^-24 · Σ|w·x| per output). Shapes: W rows that fill tile groups of 32, end on a lone
// block of 16 or short of a tile (the tail through gemm_bf16_dot), batches of 2 to 16 rows,
// 1 to 3 threads; and the products it refuses.
#include "kernels/weights/gemm_bf16_amx.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/weight_matrix.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {
namespace {

TEST(GemmBf16Amx, MatchesFloat64OverRoundedX) {
  if (!cpu_has(ComputeUnit::amx_bf16)) GTEST_SKIP() << "CPU lacks amx_bf16 (or tile data)";
  for (std::size_t k : {32, 96, 1024}) {
    for (std::size_t n : {16, 17, 32, 47, 48, 100}) {
      for (std::size_t m : {2, 3, 8, 16}) {
        std::vector<float> x(m * k), values(n * k), y(m * n, -1.0f);
        fill_uniform(x, k + m, -1.0f, 1.0f);
        fill_uniform(values, k * 7 + n, -1.0f, 1.0f);
        const WeightMatrix w(values, n, k, WeightDtype::bf16);
        const auto* bits = static_cast<const std::uint16_t*>(w.view().data);
        for (int threads : {1, 3}) {
          gemm_bf16_amx(x.data(), m, w.view(), y.data(), threads);
          for (std::size_t b = 0; b < m; ++b) {
            for (std::size_t r = 0; r < n; ++r) {
              double want = 0, magnitude = 0;
              for (std::size_t i = 0; i < k; ++i) {
                const double wi = bf16_bits_to_f32(bits[r * k + i]);
                const double xi = bf16_bits_to_f32(f32_to_bf16_bits(x[b * k + i]));
                want += wi * xi;
                magnitude += std::fabs(wi * xi);
              }
              const double bound = static_cast<double>(k) * 0x1p-24 * magnitude;
              ASSERT_LE(std::fabs(y[b * n + r] - want), bound)
                  << "k " << k << " n " << n << " m " << m << " batch row " << b << " W row " << r
                  << ", " << threads << " threads";
            }
          }
        }
      }
    }
  }
}

TEST(GemmBf16Amx, RefusesWhatItDoesNotTake) {
  const std::vector<float> values(32 * 64, 0.5f), x(17 * 64, 1.0f);
  std::vector<float> y(17 * 32);
  const WeightMatrix bf16(values, 32, 64, WeightDtype::bf16);
  const WeightMatrix f32(values, 32, 64, WeightDtype::f32);
  const WeightMatrix ragged(values, 32 * 2, 32 * 64 / (32 * 2), WeightDtype::bf16);  // 32 columns
  EXPECT_TRUE(gemm_bf16_amx_fits(2, bf16.view()));
  EXPECT_TRUE(gemm_bf16_amx_fits(16, bf16.view()));
  EXPECT_TRUE(gemm_bf16_amx_fits(2, ragged.view()));
  EXPECT_FALSE(gemm_bf16_amx_fits(1, bf16.view()));   // decode: the GEMV
  EXPECT_FALSE(gemm_bf16_amx_fits(17, bf16.view()));  // more than one B tile
  EXPECT_FALSE(gemm_bf16_amx_fits(8, f32.view()));
  const WeightMatrix odd(std::vector<float>(4 * 33, 0.5f), 4, 33, WeightDtype::bf16);
  EXPECT_FALSE(gemm_bf16_amx_fits(8, odd.view()));  // a row ends inside a tile step
  EXPECT_THROW(gemm_bf16_amx(x.data(), 17, bf16.view(), y.data(), 1), std::invalid_argument);
  EXPECT_THROW(gemm_bf16_amx(x.data(), 8, odd.view(), y.data(), 1), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
