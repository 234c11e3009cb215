// The full layer's decode timing: batch sizes stepped in turn, their bookkeeping, bad input.
#include "engine/measure/layer_timing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/kv_footprint.hpp"

namespace kvscope {
namespace {

LayerConfig small_config(std::size_t capacity) {
  return LayerConfig({.hidden_size = 64,
                      .n_heads = 4,
                      .n_kv_heads = 2,
                      .head_dim = 16,
                      .ffn_size = 96,
                      .capacity = static_cast<std::int64_t>(capacity)});
}

// One timing per batch size, in the order asked, each with its own tokens per second
// (batch ÷ median step) and bytes (the weights once, a cache per sequence).
TEST(LayerTiming, BatchSizesSteppedInTurnEachKeepTheirFigures) {
  const std::int64_t context = 40;
  const int steps = 3;
  const LayerConfig c = small_config(context + steps + 2);
  const LayerWeights w = LayerWeights::random(c, 5, WeightDtype::bf16);
  const std::vector<std::int64_t> batches{1, 3, 2};
  const std::vector<LayerTiming> t = time_layer_decode_batches(
      c, w, context, KvDtype::f32, Isa::scalar, 1, steps, ComputeMode::exact, batches);
  ASSERT_EQ(t.size(), batches.size());
  const std::uint64_t cache =
      kv_footprint({.n_kv_heads = 2, .head_dim = 16, .tokens = context, .dtype = KvDtype::f32})
          .total_bytes;
  for (std::size_t i = 0; i < t.size(); ++i) {
    EXPECT_GT(t[i].median_s, 0.0) << i;
    EXPECT_NEAR(t[i].tokens_per_s * t[i].median_s, static_cast<double>(batches[i]), 1e-9) << i;
    EXPECT_EQ(t[i].weight_bytes, c.weight_bytes(WeightDtype::bf16)) << i;
    EXPECT_EQ(t[i].bytes_per_step,
              t[i].weight_bytes + static_cast<std::uint64_t>(batches[i]) * cache)
        << i;
    EXPECT_GE(t[i].projection_share, 0.0) << i;
    EXPECT_GE(t[i].attention_share, 0.0) << i;
    EXPECT_LE(t[i].projection_share + t[i].attention_share, 1.0 + 1e-9) << i;
  }
  // time_layer_decode is the one-batch case of the same measurement.
  const LayerTiming one =
      time_layer_decode(c, w, context, KvDtype::f32, Isa::scalar, 1, steps, ComputeMode::exact, 3);
  EXPECT_EQ(one.bytes_per_step, t[1].bytes_per_step);
  EXPECT_NEAR(one.tokens_per_s * one.median_s, 3.0, 1e-9);
}

TEST(LayerTiming, RefusesBadBatchesStepsAndContexts) {
  const LayerConfig c = small_config(20);
  const LayerWeights w = LayerWeights::random(c, 5, WeightDtype::f32);
  const auto batches = [&](std::vector<std::int64_t> b, int steps = 2, std::int64_t context = 8) {
    return time_layer_decode_batches(c, w, context, KvDtype::f32, Isa::scalar, 1, steps,
                                     ComputeMode::exact, b);
  };
  EXPECT_THROW(batches({}), std::invalid_argument);
  EXPECT_THROW(batches({1, 0}), std::invalid_argument);
  EXPECT_THROW(batches({1, -2}), std::invalid_argument);
  EXPECT_THROW(batches({1}, 0), std::invalid_argument);
  EXPECT_THROW(batches({1}, 2, 0), std::invalid_argument);
  EXPECT_THROW(batches({1}, 2, 18), std::invalid_argument);  // 18 + 3 rows exceed 20
  EXPECT_NO_THROW(batches({1}, 2, 17));
}

}  // namespace
}  // namespace kvscope
