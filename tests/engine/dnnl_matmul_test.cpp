// oneDNN projections and the Projector's choice of path, against a float64 reference.
#include "engine/dnnl_matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/projector.hpp"
#include "engine/weight_matrix.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/units/cpu_features.hpp"
#include "kernels/weights/gemv_bf16_dot.hpp"

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

struct ProjectorCase {
  Isa isa;
  WeightDtype dtype;
  ComputeMode compute;
};

class Projector : public ::testing::TestWithParam<ProjectorCase> {};

// Every path (scalar reference, GEMV, oneDNN f32, blocks widened to f32, bf16 × bf16)
// against float64 over the weights as stored. Exact paths: within f32 summation error.
// The bf16 paths (fast, bf16 weights: m > 1, or m = 1 on AVX512-BF16) must equal float64 over
// x rounded to bf16 to the same bound, which also proves they took that path: with x
// unrounded they are off by ~2^-9.
TEST_P(Projector, EveryPathAgrees) {
  const auto [isa, dtype, compute] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const std::size_t k = 40, n = 40;
  std::vector<float> values(n * k);
  fill_uniform(values, 2, -1.0f, 1.0f);
  const WeightMatrix w(values, n, k, dtype);
  for (std::size_t m : {1, 6}) {
    std::vector<float> x(m * k);
    fill_uniform(x, 1, -1.0f, 1.0f);
    // m > 1 rounds x where oneDNN has a bf16 matmul (elsewhere fast runs exact); m = 1
    // (decode) where the GEMV runs on AVX512-BF16 (gemv_bf16_dot.hpp).
    const bool bf16_unit =
        (m > 1 && DnnlMatmul::has_bf16()) || (isa == Isa::avx512 && cpu_features().avx512_bf16);
    const bool rounds_x = bf16_unit && isa != Isa::scalar && dtype == WeightDtype::bf16 &&
                          compute == ComputeMode::fast;
    std::vector<float> x_seen = x;
    if (rounds_x) {
      for (float& v : x_seen) v = bf16_bits_to_f32(f32_to_bf16_bits(v));
    }
    std::vector<double> want, scale;
    reference(x_seen, w.to_f32(), m, k, n, want, scale);
    // 16 rows per widened block: W's 40 rows take blocks of 16, 16 and 8.
    kvscope::Projector project(isa, 2, compute, 16 * k * sizeof(float));
    std::vector<float> y(m * n);
    project(x.data(), w.view(), m, y.data());
    for (std::size_t i = 0; i < m * n; ++i) {
      EXPECT_NEAR(y[i], want[i], 1e-6 * scale[i]) << "m=" << m << " output " << i;
    }
    // The scalar reference never touches oneDNN.
    if (isa == Isa::scalar) {
      EXPECT_EQ(project.dnnl().cached_primitives(), 0u);
    }
  }
}

// oneDNN 2.6 has bf16 matmuls from AVX-512 (avx512_core, emulated without AVX512-BF16) and
// none below: the fast path's fallback to exact must fire on AVX2-only CPUs and only there.
// Without AMX, batches of up to 32 rows stay on our AVX512-BF16 kernel (tiles of 8 rows beat
// oneDNN there): each row of the product is bit for bit that row's GEMV, so a batch gives each
// sequence exactly what it gets alone.
TEST(ProjectorBatch, UpTo32RowsEachRowIsItsGemvWithoutAmx) {
  if (!cpu_supports(Isa::avx512) || !cpu_features().avx512_bf16) {
    GTEST_SKIP() << "this CPU lacks avx512_bf16";
  }
  if (cpu_features().amx_bf16) GTEST_SKIP() << "this CPU has amx_bf16: batches take AMX tiles";
  const std::size_t k = 100, n = 20;
  std::vector<float> values(n * k);
  fill_uniform(values, 5, -1.0f, 1.0f);
  const WeightMatrix w(values, n, k, WeightDtype::bf16);
  kvscope::Projector project(Isa::avx512, 2, ComputeMode::fast, 16 * k * sizeof(float));
  for (std::size_t m : {17, 24, 32}) {
    std::vector<float> x(m * k), y(m * n), one(n);
    fill_uniform(x, m, -1.0f, 1.0f);
    project(x.data(), w.view(), m, y.data());
    for (std::size_t b = 0; b < m; ++b) {
      gemv_bf16_dot(x.data() + b * k, w.view(), one.data(), 1);
      for (std::size_t r = 0; r < n; ++r)
        EXPECT_EQ(y[b * n + r], one[r]) << "m " << m << " row " << b;
    }
  }
}

TEST(DnnlMatmul, HasBf16ExactlyWhereTheCpuHasAvx512) {
  EXPECT_EQ(DnnlMatmul::has_bf16(), cpu_supports(Isa::avx512));
  if (!DnnlMatmul::has_bf16()) {
    DnnlMatmul dnnl;
    const std::vector<std::uint16_t> x(2 * 8), w(8 * 8);
    std::vector<float> y(2 * 8);
    EXPECT_THROW(dnnl.multiply_bf16(x.data(), w.data(), 2, 8, 8, y.data(), 1), std::runtime_error);
  }
}

std::vector<ProjectorCase> projector_cases() {
  std::vector<ProjectorCase> cases;
  for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512})
    for (WeightDtype dtype : {WeightDtype::f32, WeightDtype::bf16, WeightDtype::f16})
      for (ComputeMode compute : {ComputeMode::exact, ComputeMode::fast})
        cases.push_back({isa, dtype, compute});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryPath, Projector, ::testing::ValuesIn(projector_cases()),
                         [](const auto& info) {
                           return std::string(to_string(info.param.isa)) + "_" +
                                  std::string(to_string(info.param.dtype)) + "_" +
                                  std::string(to_string(info.param.compute));
                         });

}  // namespace
}  // namespace kvscope
