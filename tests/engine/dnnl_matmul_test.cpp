// oneDNN projections and the Projector's choice of path, against a float64 reference.
#include "engine/dnnl_matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/projector.hpp"

namespace kvscope {
namespace {

// y = x · Wᵀ in double, with the sum of |terms| per output as the error scale.
void reference(const std::vector<float>& x, const std::vector<float>& w, std::size_t m,
               std::size_t k, std::size_t n, std::vector<double>& y, std::vector<double>& scale) {
  y.assign(m * n, 0.0);
  scale.assign(m * n, 0.0);
  for (std::size_t r = 0; r < m; ++r)
    for (std::size_t c = 0; c < n; ++c)
      for (std::size_t i = 0; i < k; ++i) {
        const double t = static_cast<double>(x[r * k + i]) * w[c * k + i];
        y[r * n + c] += t;
        scale[r * n + c] += std::abs(t);
      }
}

TEST(DnnlMatmul, MatchesFloat64ReferenceAndCachesPrimitives) {
  DnnlMatmul dnnl;
  const std::size_t shapes[][3] = {{1, 64, 96}, {7, 64, 96}, {2, 3, 5}, {17, 127, 33}, {1, 1, 1}};
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& s : shapes) {
      const std::size_t m = s[0], k = s[1], n = s[2];
      std::vector<float> x(m * k), w(n * k), y(m * n);
      fill_uniform(x, m + k, -1.0f, 1.0f);
      fill_uniform(w, n + k, -1.0f, 1.0f);
      dnnl.multiply(x.data(), w.data(), m, k, n, y.data(), 2);
      std::vector<double> want, scale;
      reference(x, w, m, k, n, want, scale);
      for (std::size_t i = 0; i < m * n; ++i) {
        EXPECT_NEAR(y[i], want[i], 1e-6 * scale[i] + 1e-7) << m << "×" << k << "×" << n;
      }
    }
    // One primitive per distinct shape, reused on the second pass.
    EXPECT_EQ(dnnl.cached_primitives(), std::size(shapes));
  }
}

class Projector : public ::testing::TestWithParam<Isa> {};

TEST_P(Projector, EveryPathAgrees) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const std::size_t k = 40, n = 24;
  for (std::size_t m : {1, 6}) {
    std::vector<float> x(m * k), w(n * k);
    fill_uniform(x, 1, -1.0f, 1.0f);
    fill_uniform(w, 2, -1.0f, 1.0f);
    std::vector<double> want, scale;
    reference(x, w, m, k, n, want, scale);
    kvscope::Projector project(isa, 2);
    std::vector<float> y(m * n);
    project(x.data(), w.data(), m, k, n, y.data());
    for (std::size_t i = 0; i < m * n; ++i) {
      EXPECT_NEAR(y[i], want[i], 1e-6 * scale[i]) << "m=" << m;
    }
    // The scalar reference never touches oneDNN.
    if (isa == Isa::scalar) {
      EXPECT_EQ(project.dnnl().cached_primitives(), 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, Projector,
                         ::testing::Values(Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kvscope
