// The AMX-BF16 prefill projection against a float64 product over the same bf16-rounded x:
// products of two bf16 values are exact, so the only error is f32 summation (bounded by
// k · 2^-24 · Σ|w·x| per output). Shapes cross every boundary of the blocking: x rows in
// whole pairs of 32 or ending short of one (the tail scratch), W rows within one packed
// block or past kAmxBlockRows, K within one block of kAmxBlockSteps steps or past it (C
// reloaded from y), 1 to 3 threads; a NaN in x; and the products it refuses.
#include "kernels/weights/gemm_bf16_amx_blocked.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/weight_matrix.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {
namespace {

TEST(GemmBf16AmxBlocked, MatchesFloat64OverRoundedX) {
  if (!cpu_has(ComputeUnit::amx_bf16)) GTEST_SKIP() << "CPU lacks amx_bf16 (or tile data)";
  constexpr std::size_t kPastBlock = kAmxBlockSteps * 32 + 32;
  for (std::size_t k : {std::size_t{32}, std::size_t{96}, kPastBlock}) {
    for (std::size_t n : {std::size_t{32}, std::size_t{96}, kAmxBlockRows + 32}) {
      for (std::size_t m : {17, 33, 64, 95}) {
        std::vector<float> x(m * k), values(n * k);
        fill_uniform(x, k + m, -1.0f, 1.0f);
        fill_uniform(values, k * 7 + n, -1.0f, 1.0f);
        const WeightMatrix w(values, n, k, WeightDtype::bf16);
        const auto* bits = static_cast<const std::uint16_t*>(w.view().data);
        std::vector<double> want(m * n), bound(m * n);
        for (std::size_t b = 0; b < m; ++b) {
          for (std::size_t r = 0; r < n; ++r) {
            double sum = 0, magnitude = 0;
            for (std::size_t i = 0; i < k; ++i) {
              const double product = double{bf16_bits_to_f32(bits[r * k + i])} *
                                     bf16_bits_to_f32(f32_to_bf16_bits(x[b * k + i]));
              sum += product;
              magnitude += std::fabs(product);
            }
            want[b * n + r] = sum;
            bound[b * n + r] = static_cast<double>(k) * 0x1p-24 * magnitude;
          }
        }
        AmxGemmScratch scratch;
        for (int threads : {1, 2, 3}) {
          std::vector<float> y(m * n, -1.0f);
          gemm_bf16_amx_blocked(x.data(), m, w.view(), y.data(), threads, scratch);
          for (std::size_t i = 0; i < m * n; ++i) {
            ASSERT_LE(std::fabs(y[i] - want[i]), bound[i])
                << "k " << k << " n " << n << " m " << m << ": x row " << i / n << ", W row "
                << i % n << ", " << threads << " threads";
          }
        }
      }
    }
  }
}

TEST(GemmBf16AmxBlocked, NanInXReachesOnlyItsRow) {
  if (!cpu_has(ComputeUnit::amx_bf16)) GTEST_SKIP() << "CPU lacks amx_bf16 (or tile data)";
  const std::size_t m = 40, k = 64, n = 64;
  std::vector<float> x(m * k, 0.5f), y(m * n);
  x[35 * k + 3] = std::numeric_limits<float>::quiet_NaN();  // in the short last row pair
  const WeightMatrix w(std::vector<float>(n * k, 0.25f), n, k, WeightDtype::bf16);
  AmxGemmScratch scratch;
  gemm_bf16_amx_blocked(x.data(), m, w.view(), y.data(), 2, scratch);
  for (std::size_t i = 0; i < m * n; ++i) {
    if (i / n == 35) {
      EXPECT_TRUE(std::isnan(y[i])) << "W row " << i % n;
    } else {
      EXPECT_EQ(y[i], 0.5f * 0.25f * k) << "x row " << i / n << ", W row " << i % n;
    }
  }
}

TEST(GemmBf16AmxBlocked, RefusesWhatItDoesNotTake) {
  const std::vector<float> values(64 * 64, 0.5f), x(17 * 64, 1.0f);
  std::vector<float> y(17 * 64);
  const WeightMatrix bf16(values, 64, 64, WeightDtype::bf16);
  const WeightMatrix f32(values, 64, 64, WeightDtype::f32);
  const WeightMatrix lone_tile(std::vector<float>(48 * 64, 0.5f), 48, 64, WeightDtype::bf16);
  const WeightMatrix odd(std::vector<float>(32 * 33, 0.5f), 32, 33, WeightDtype::bf16);
  EXPECT_TRUE(gemm_bf16_amx_blocked_fits(17, bf16.view()));
  EXPECT_TRUE(gemm_bf16_amx_blocked_fits(2000, bf16.view()));
  EXPECT_FALSE(gemm_bf16_amx_blocked_fits(16, bf16.view()));  // one B tile: gemm_bf16_amx
  EXPECT_FALSE(gemm_bf16_amx_blocked_fits(64, f32.view()));
  EXPECT_FALSE(gemm_bf16_amx_blocked_fits(64, lone_tile.view()));  // rows end on half a pair
  EXPECT_FALSE(gemm_bf16_amx_blocked_fits(64, odd.view()));        // a row ends inside a tile step
  AmxGemmScratch scratch;
  EXPECT_THROW(gemm_bf16_amx_blocked(x.data(), 16, bf16.view(), y.data(), 1, scratch),
               std::invalid_argument);
  EXPECT_THROW(gemm_bf16_amx_blocked(x.data(), 17, odd.view(), y.data(), 1, scratch),
               std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
