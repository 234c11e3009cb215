// The GEMV kernel of every ISA this CPU runs and every weight type, against a float64
// reference, over awkward lengths (tails shorter than a vector, row counts that leave the last
// of the four streams of rows per thread short or empty).
#include "kernels/weights/gemv.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/weight_matrix.hpp"

namespace kvscope {
namespace {

struct GemvCase {
  Isa isa;
  WeightDtype dtype;
};

class Gemv : public ::testing::TestWithParam<GemvCase> {};

// Widening bf16/f16 is exact, so every type meets the f32 bound against float64 over the
// weights as stored. Rows start one element off alignment (misaligned loads).
TEST_P(Gemv, MatchesFloat64Reference) {
  const auto [isa, dtype] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  for (std::size_t k : {1, 2, 3, 7, 15, 17, 127, 256, 1000}) {
    for (std::size_t n : {1, 3, 4, 5, 9, 33}) {
      std::vector<float> values(n * k + 1), x(k + 1);
      fill_uniform(values, k * 131 + n, -1.0f, 1.0f);
      fill_uniform(x, k, -1.0f, 1.0f);
      const WeightMatrix stored(values, n * k + 1, 1, dtype);
      const std::vector<float> w = stored.to_f32();
      std::vector<double> want(n, 0.0);
      double scale = 0;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < k; ++i) {
          want[r] += static_cast<double>(w[r * k + i + 1]) * x[i + 1];
          scale += std::abs(static_cast<double>(w[r * k + i + 1]) * x[i + 1]);
        }
      }
      std::vector<float> y(n, -1.0f);
      const auto* first =
          static_cast<const char*>(stored.view().data) + weight_element_bytes(dtype);
      gemv(x.data() + 1, {first, dtype, n, k}, y.data(), isa, 2);
      for (std::size_t r = 0; r < n; ++r) {
        EXPECT_NEAR(y[r], want[r], 1e-6 * scale + 1e-7) << "k=" << k << " n=" << n << " row " << r;
      }
    }
  }
}

std::vector<GemvCase> gemv_cases() {
  std::vector<GemvCase> cases;
  for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512})
    for (WeightDtype dtype : {WeightDtype::f32, WeightDtype::bf16, WeightDtype::f16})
      cases.push_back({isa, dtype});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryIsaAndType, Gemv, ::testing::ValuesIn(gemv_cases()),
                         [](const auto& info) {
                           return std::string(to_string(info.param.isa)) + "_" +
                                  std::string(to_string(info.param.dtype));
                         });

}  // namespace
}  // namespace kvscope
