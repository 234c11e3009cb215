// The GEMV kernel of every ISA this CPU runs, against a float64 reference, over awkward
// lengths (tails shorter than a vector, row counts not a multiple of 4).
#include "kernels/gemv.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/layer_weights.hpp"

namespace kvscope {
namespace {

class Gemv : public ::testing::TestWithParam<Isa> {};

TEST_P(Gemv, MatchesFloat64Reference) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  for (std::size_t k : {1, 2, 3, 7, 15, 17, 127, 256, 1000}) {
    for (std::size_t n : {1, 3, 4, 5, 9, 33}) {
      std::vector<float> w(n * k + 1), x(k + 1);
      fill_uniform(w, k * 131 + n, -1.0f, 1.0f);
      fill_uniform(x, k, -1.0f, 1.0f);
      std::vector<double> want(n, 0.0);
      double scale = 0;
      for (std::size_t r = 0; r < n; ++r) {
        for (std::size_t i = 0; i < k; ++i) {
          want[r] += static_cast<double>(w[r * k + i + 1]) * x[i + 1];
          scale += std::abs(static_cast<double>(w[r * k + i + 1]) * x[i + 1]);
        }
      }
      std::vector<float> y(n, -1.0f);
      // Offsets by one float: misaligned rows and input.
      gemv(x.data() + 1, w.data() + 1, k, n, y.data(), isa, 2);
      for (std::size_t r = 0; r < n; ++r) {
        EXPECT_NEAR(y[r], want[r], 1e-6 * scale + 1e-7) << "k=" << k << " n=" << n << " row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, Gemv,
                         ::testing::Values(Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kvscope
