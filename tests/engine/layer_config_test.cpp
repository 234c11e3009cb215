#include "engine/layer_config.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace kvscope {
namespace {

LayerShape small_shape() {
  return {.hidden_size = 64,
          .n_heads = 8,
          .n_kv_heads = 2,
          .head_dim = 16,
          .ffn_size = 128,
          .capacity = 100};
}

// Expects construction to throw E with a message containing `needle`.
template <class E>
void expect_rejected(const LayerShape& shape, const std::string& needle) {
  try {
    LayerConfig config(shape);
    FAIL() << "accepted an invalid shape; expected an error mentioning '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LayerConfig, AcceptsValidShapeAndDerivesWidths) {
  const LayerConfig c(small_shape());
  EXPECT_EQ(c.q_width(), 128u);
  EXPECT_EQ(c.kv_width(), 32u);
  EXPECT_EQ(c.group_size(), 4u);
  EXPECT_FALSE(c.is_mha());
  EXPECT_FALSE(c.is_mqa());
  // K and V: 2 kv heads × 16 × 4 bytes × 100 tokens each.
  EXPECT_EQ(c.kv_cache_bytes(KvDtype::f32), 2u * 2 * 16 * 4 * 100);
  // int8: 1 byte per element plus one f32 scale per token per kv head for K and V.
  EXPECT_EQ(c.kv_cache_bytes(KvDtype::int8), 2u * 2 * 16 * 100 + 2u * 2 * 4 * 100);
}

TEST(LayerConfig, HeadDimNeedNotBeHiddenOverHeads) {
  LayerShape s = small_shape();
  s.head_dim = 24;  // 8 × 24 = 192 ≠ 64
  EXPECT_EQ(LayerConfig(s).q_width(), 192u);
}

TEST(LayerConfig, MhaAndMqaAreRecognized) {
  LayerShape s = small_shape();
  s.n_kv_heads = 8;
  EXPECT_TRUE(LayerConfig(s).is_mha());
  s.n_kv_heads = 1;
  EXPECT_TRUE(LayerConfig(s).is_mqa());
}

TEST(LayerConfig, RejectsZeroAndNegativeSizesByName) {
  const std::pair<std::int64_t LayerShape::*, const char*> fields[] = {
      {&LayerShape::hidden_size, "hidden_size"}, {&LayerShape::n_heads, "n_heads"},
      {&LayerShape::n_kv_heads, "n_kv_heads"},   {&LayerShape::head_dim, "head_dim"},
      {&LayerShape::ffn_size, "ffn_size"},       {&LayerShape::capacity, "capacity"}};
  for (const auto& [field, name] : fields) {
    for (std::int64_t bad : {0, -1}) {
      LayerShape s = small_shape();
      s.*field = bad;
      expect_rejected<std::invalid_argument>(s, name);
    }
  }
}

TEST(LayerConfig, RejectsHeadsThatDoNotDivide) {
  LayerShape s = small_shape();
  s.n_kv_heads = 3;
  expect_rejected<std::invalid_argument>(s, "multiple of n_kv_heads (3)");
}

TEST(LayerConfig, RejectsOddHeadDimForRope) {
  LayerShape s = small_shape();
  s.head_dim = 15;
  expect_rejected<std::invalid_argument>(s, "head_dim must be even");
}

TEST(LayerConfig, RejectsBadEpsAndTheta) {
  LayerShape s = small_shape();
  s.rms_norm_eps = 0;
  expect_rejected<std::invalid_argument>(s, "rms_norm_eps");
  s = small_shape();
  s.rope_theta = -1;
  expect_rejected<std::invalid_argument>(s, "rope_theta");
  s = small_shape();
  s.rms_norm_eps = std::numeric_limits<double>::quiet_NaN();
  expect_rejected<std::invalid_argument>(s, "rms_norm_eps");
}

TEST(LayerConfig, RejectsByteCountsThatOverflow) {
  LayerShape s = small_shape();
  s.capacity = std::int64_t{1} << 60;
  s.n_kv_heads = 8;
  expect_rejected<std::overflow_error>(s, "overflows 64 bits");
  s = small_shape();
  s.hidden_size = std::int64_t{1} << 40;
  s.ffn_size = std::int64_t{1} << 40;
  expect_rejected<std::overflow_error>(s, "overflows 64 bits");
}

}  // namespace
}  // namespace kvscope
