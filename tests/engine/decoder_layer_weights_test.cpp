// The decoder layer over bf16 and f16 weights held in their own type (as checkpoints ship
// them), on every ISA, against the independent float64 layer over the same stored values.
// Exact: activations stay f32, 1e-4 as with f32 weights. Fast with bf16 weights: prefill
// rounds activations to bf16 for the bf16 units, so the bound is 2^-8 (each product carries
// up to 2^-9 relative error); decode's GEMV widens in registers and stays exact.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/decoder_layer.hpp"
#include "engine/dnnl_matmul.hpp"
#include "kernels/units/cpu_features.hpp"
#include "support/reference_layer.hpp"

namespace kvscope {
namespace {

struct WeightsCase {
  Isa isa;
  WeightDtype dtype;
  ComputeMode compute;
};

class LayerWeightsTypes : public ::testing::TestWithParam<WeightsCase> {};

TEST_P(LayerWeightsTypes, MatchFloat64LayerForEverySplit) {
  const auto [isa, dtype, compute] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const std::size_t n = 40, H = 64;
  const LayerShape shape{.hidden_size = static_cast<std::int64_t>(H),
                         .n_heads = 4,
                         .n_kv_heads = 2,
                         .head_dim = 16,
                         .ffn_size = 96,
                         .capacity = static_cast<std::int64_t>(n)};
  const LayerConfig c(shape);
  const LayerWeights w = LayerWeights::random(c, 5, dtype);
  ASSERT_EQ(w.wq.dtype(), dtype);
  std::vector<float> x(n * H);
  fill_uniform(x, 9, -1, 1);
  const std::vector<double> want = test::reference_layer(shape, w, x, n);
  const bool rounds_activations = compute == ComputeMode::fast && dtype == WeightDtype::bf16;
  for (std::size_t p : {n, std::size_t{7}, std::size_t{1}}) {
    DecoderLayer layer(c, w, {.isa = isa, .threads = 2, .compute = compute});
    std::vector<float> y = layer.prefill(x.data(), p);
    for (std::size_t t = p; t < n; ++t) {
      const std::vector<float> row = layer.decode(x.data() + t * H);
      y.insert(y.end(), row.begin(), row.end());
    }
    const double error = test::relative_error(y, want);
    // Prefill rounds on the bf16 units (where oneDNN has them; elsewhere fast runs exact and
    // must meet the exact bound); decode too where its GEMV runs on AVX512-BF16.
    const bool prefill_rounds = p > 1 && DnnlMatmul::has_bf16();
    const bool decode_rounds = isa == Isa::avx512 && cpu_features().avx512_bf16;
    const bool rounded =
        rounds_activations && (prefill_rounds || decode_rounds) && isa != Isa::scalar;
    std::printf("%s %s %s prefill %zu: relative error %.3g\n", std::string(to_string(isa)).c_str(),
                std::string(to_string(dtype)).c_str(), std::string(to_string(compute)).c_str(), p,
                error);
    EXPECT_LT(error, rounded ? 0x1p-8 : 1e-4) << "prefill " << p;
  }
}

std::vector<WeightsCase> weights_cases() {
  std::vector<WeightsCase> cases;
  for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512})
    for (WeightDtype dtype : {WeightDtype::bf16, WeightDtype::f16})
      for (ComputeMode compute : {ComputeMode::exact, ComputeMode::fast})
        cases.push_back({isa, dtype, compute});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, LayerWeightsTypes, ::testing::ValuesIn(weights_cases()),
                         [](const auto& info) {
                           return std::string(to_string(info.param.isa)) + "_" +
                                  std::string(to_string(info.param.dtype)) + "_" +
                                  std::string(to_string(info.param.compute));
                         });

// The bytes a step reads: projections in their type, norms in f32.
TEST(LayerWeightsTypes, BytesCountEachTypeOnce) {
  const LayerConfig c({.hidden_size = 64,
                       .n_heads = 4,
                       .n_kv_heads = 2,
                       .head_dim = 16,
                       .ffn_size = 96,
                       .capacity = 4});
  const std::uint64_t projections = 64 * 64 * 2 + 64 * 32 * 2 + 64 * 96 * 3, norms = 2 * 64 * 4;
  for (WeightDtype dtype : {WeightDtype::f32, WeightDtype::bf16, WeightDtype::f16}) {
    const std::uint64_t want = projections * weight_element_bytes(dtype) + norms;
    EXPECT_EQ(c.weight_bytes(dtype), want) << to_string(dtype);
    EXPECT_EQ(LayerWeights::random(c, 1, dtype).bytes(), want) << to_string(dtype);
  }
}

}  // namespace
}  // namespace kvscope
