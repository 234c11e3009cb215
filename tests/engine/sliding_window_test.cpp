// A sliding window W on every attention path: each ISA (scalar, SSE2, AVX2, AVX-512), each
// cache type, exact and fast (decode on the dot units: 8 query heads per kv head), one
// prefill and prefill/decode splits on both sides of the window boundary, against the
// float64 layer of tests/support; and the cache stops growing at W rows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/decoder_layer.hpp"
#include "support/reference_layer.hpp"
#include "support/run_split.hpp"

namespace kvscope {
namespace {

constexpr std::size_t kTokens = 50, kWindow = 16, kHidden = 64;

LayerShape window_shape(std::int64_t window) {
  return {.hidden_size = kHidden,
          .n_heads = 8,
          .n_kv_heads = 1,
          .head_dim = 40,
          .ffn_size = 96,
          .rms_norm_eps = 1e-5,
          .rope_theta = 10000.0,
          .capacity = kTokens,
          .sliding_window = window};
}

TEST(SlidingWindow, EveryIsaCacheTypeAndSplitMatchesFloat64) {
  const LayerShape shape = window_shape(kWindow);
  const LayerConfig config(shape);
  const LayerWeights w = LayerWeights::random(config, 5);
  std::vector<float> x(kTokens * kHidden);
  fill_uniform(x, 9, -1.0f, 1.0f);
  const std::vector<double> want = test::reference_layer(shape, w, x, kTokens);
  const std::vector<double> unwindowed = test::reference_layer(window_shape(0), w, x, kTokens);
  EXPECT_GT(test::relative_error(std::vector<float>(unwindowed.begin(), unwindowed.end()), want),
            1e-3);

  for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) continue;
    for (KvDtype dtype : {KvDtype::f32, KvDtype::bf16, KvDtype::int8}) {
      // Reduced caches: about one step of the format (README: bf16 2e-3, int8 4e-3).
      const double bound = dtype == KvDtype::f32 ? 1e-4 : 1e-2;
      for (ComputeMode mode : {ComputeMode::exact, ComputeMode::fast}) {
        for (std::size_t p : {kTokens, kWindow, kWindow - 1, std::size_t{20}, std::size_t{0}}) {
          SCOPED_TRACE(std::string(to_string(isa)) + " " + std::string(to_string(dtype)) +
                       (mode == ComputeMode::fast ? " fast" : " exact") + " prefill " +
                       std::to_string(p));
          DecoderLayer layer(config, w,
                             {.kv_dtype = dtype, .isa = isa, .threads = 2, .compute = mode});
          EXPECT_LT(test::relative_error(test::run_split(layer, x, kTokens, p), want), bound);
          EXPECT_EQ(layer.cache().size(), kWindow);
          EXPECT_EQ(layer.position(), kTokens);
        }
      }
    }
  }
}

TEST(SlidingWindow, CacheMemoryStopsAtTheWindow) {
  const LayerConfig windowed(window_shape(kWindow));
  const LayerConfig full(window_shape(0));
  EXPECT_EQ(windowed.cache_rows(), kWindow);
  EXPECT_EQ(full.cache_rows(), kTokens);
  EXPECT_EQ(windowed.kv_cache_bytes(KvDtype::f32), 2u * kWindow * 40 * 4);
  EXPECT_EQ(KvCache(windowed, KvDtype::f32).capacity(), kWindow);
  // A window longer than the capacity never slides: the cache is the capacity.
  EXPECT_EQ(LayerConfig(window_shape(4 * kTokens)).cache_rows(), kTokens);
}

}  // namespace
}  // namespace kvscope
