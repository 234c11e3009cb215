// The AVX512-BF16 decode GEMV against a float64 product over the same bf16-rounded x: every
// product of two bf16 values is exact in f32, so the only error is f32 summation (bounded by
// k · 2^-24 · Σ|w·x| per row); against the unrounded x it adds x's rounding, at most 2^-8
// relative per element (half of bf16's 2^-7 spacing).
#include "kernels/weights/gemv_bf16_dot.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/weight_matrix.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/units/cpu_features.hpp"

namespace kvscope {
namespace {

// Rows go in 5 streams per thread (row_streams.hpp): n = 9 and 33 leave the last streams
// shorter or empty, with one thread and with two.
TEST(GemvBf16Dot, MatchesFloat64OverRoundedXForOddShapes) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "this CPU lacks avx512_bf16";
  for (std::size_t k : {1, 2, 3, 31, 32, 33, 63, 100, 1000}) {
    for (std::size_t n : {1, 3, 4, 5, 9, 33}) {
      std::vector<float> x(k), values(n * k), y(n);
      fill_uniform(x, k, -1.0f, 1.0f);
      fill_uniform(values, k * 7 + n, -1.0f, 1.0f);
      const WeightMatrix w(values, n, k, WeightDtype::bf16);
      const auto* bits = static_cast<const std::uint16_t*>(w.view().data);
      for (int threads : {1, 2}) {
        gemv_bf16_dot(x.data(), w.view(), y.data(), threads);
        for (std::size_t r = 0; r < n; ++r) {
          double want = 0, magnitude = 0, want_unrounded = 0;
          for (std::size_t i = 0; i < k; ++i) {
            const double wi = bf16_bits_to_f32(bits[r * k + i]);
            const double xi = bf16_bits_to_f32(f32_to_bf16_bits(x[i]));
            want += wi * xi;
            want_unrounded += wi * x[i];
            magnitude += std::fabs(wi * xi);
          }
          const double bound = static_cast<double>(k) * 0x1p-24 * magnitude + 1e-30;
          EXPECT_LE(std::fabs(y[r] - want), bound) << "k " << k << " n " << n << " row " << r;
          EXPECT_LE(std::fabs(y[r] - want_unrounded), 0x1p-8 * magnitude + bound)
              << "k " << k << " n " << n << " row " << r;
        }
      }
    }
  }
}

// A batch of rows: row b of the product is gemv_bf16_dot of row b, bit for bit, for batches
// that fill the tiles (4 rows up to 4, else 8), end partway through one (a last tile of 4
// after tiles of 8 too), and weight blocks (4 rows, or 3 beside tiles of 8) that end early.
// Tiles of 8 run over panels of 8 blocks of 3 rows in chunks of 32 lines (1,024 values):
// k = 2,100 takes three chunks, the last partial and ending in a partial line, and 53 rows
// make panels of 8, 8 and 1 blocks and 2 rows past them.
TEST(GemmBf16Dot, EachRowIsTheGemvOfThatRow) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "this CPU lacks avx512_bf16";
  for (std::size_t k : {3, 33, 100, 1000, 2100}) {
    for (std::size_t n : {1, 5, 7, 9, 53}) {
      for (std::size_t m : {2, 3, 4, 5, 8, 9, 12, 17}) {
        std::vector<float> x(m * k), values(n * k), y(m * n, -1.0f), one(n);
        fill_uniform(x, k + m, -1.0f, 1.0f);
        fill_uniform(values, k * 7 + n, -1.0f, 1.0f);
        const WeightMatrix w(values, n, k, WeightDtype::bf16);
        gemm_bf16_dot(x.data(), m, w.view(), y.data(), 2);
        for (std::size_t b = 0; b < m; ++b) {
          gemv_bf16_dot(x.data() + b * k, w.view(), one.data(), 1);
          for (std::size_t r = 0; r < n; ++r) {
            EXPECT_EQ(y[b * n + r], one[r])
                << "k " << k << " n " << n << " m " << m << " row " << b;
          }
        }
      }
    }
  }
}

TEST(GemvBf16Dot, RefusesOtherWeightTypes) {
  if (!cpu_features().avx512_bf16) GTEST_SKIP() << "this CPU lacks avx512_bf16";
  const std::vector<float> values(8, 1.0f), x(4, 1.0f);
  std::vector<float> y(2);
  const WeightMatrix w(values, 2, 4, WeightDtype::f32);
  EXPECT_THROW(gemv_bf16_dot(x.data(), w.view(), y.data(), 1), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
