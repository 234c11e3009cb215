// softmax_exp (kernels/softmax_exp.hpp) on the build's baseline SIMD batch: the code is the
// same template for every ISA; the attention tests run it inside each ISA's kernels.
#include "kernels/softmax_exp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <limits>
#include <vector>

namespace kvscope {
namespace {

using B = xsimd::batch<float>;

std::vector<float> apply(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (std::size_t i = 0; i < x.size(); i += B::size) {
    float lanes[B::size] = {};
    for (std::size_t j = 0; j < B::size && i + j < x.size(); ++j) lanes[j] = x[i + j];
    simd::softmax_exp(B::load_unaligned(lanes)).store_unaligned(lanes);
    for (std::size_t j = 0; j < B::size && i + j < x.size(); ++j) out[i + j] = lanes[j];
  }
  return out;
}

// Against float64 over [−87, 0]: the polynomial's 2e-7, plus the rounding of x·log2 e (half
// an ulp of |x|·1.44, up to 4e-6 in the exponent at x = −87, so |x|·6e-8 relative). As a
// softmax weight beside the block maximum's 1, the absolute error stays under 2.5e-7.
TEST(SoftmaxExp, MatchesFloat64BelowZero) {
  std::vector<float> x;
  for (int i = 0; i < 87000; ++i) x.push_back(-0.001f * static_cast<float>(i));
  x.push_back(-1e-30f);
  x.push_back(-86.999f);
  x.push_back(-87.0f);
  const std::vector<float> y = apply(x);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(static_cast<double>(x[i]));
    const double err = std::abs(static_cast<double>(y[i]) - want);
    EXPECT_LE(err, want * (2.5e-7 + 7e-8 * std::abs(x[i]))) << "x = " << x[i];
    EXPECT_LE(err, 2.5e-7) << "x = " << x[i];
  }
}

TEST(SoftmaxExp, ZeroIsOneAndMaskedKeysWeighNothing) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> y = apply({0.0f, -inf, -87.5f, -88.0f, -1000.0f, -3.0e38f});
  EXPECT_EQ(y[0], 1.0f);  // the block maximum's own weight, exactly
  for (std::size_t i = 1; i < y.size(); ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

// A NaN score (from a NaN in the cache or the query) reaches the output, as in the scalar
// reference, instead of weighing nothing.
TEST(SoftmaxExp, NanStaysNan) {
  const std::vector<float> y = apply({std::numeric_limits<float>::quiet_NaN(), -1.0f});
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_NEAR(y[1], std::exp(-1.0), 1e-7);
}

// The dot units' shorter polynomial for their weights (kExp2ForWeights), evaluated as the
// kernels do (Horner's rule in float with fused multiply-adds) over f ∈ [−½, ½]: within 7.5e-5
// of 2^f (8e-5 with the float rounding), where bf16 rounds the weight by up to 2^-9.
TEST(SoftmaxExp, WeightsPolynomialWithin8e5Relative) {
  double worst = 0.0;
  for (int i = -5000; i <= 5000; ++i) {
    const float f = static_cast<float>(i) / 10000.0f;
    float p = simd::kExp2ForWeights[0];
    for (std::size_t k = 1; k < std::size(simd::kExp2ForWeights); ++k) {
      p = std::fma(p, f, simd::kExp2ForWeights[k]);
    }
    const double want = std::exp2(static_cast<double>(f));
    worst = std::max(worst, std::abs(static_cast<double>(p) - want) / want);
  }
  EXPECT_LE(worst, 8e-5);
  EXPECT_GE(worst, 1e-5);  // the short fit, not the full polynomial
}

}  // namespace
}  // namespace kvscope
