// The report's accuracy columns: one decode step with a reduced cache against the same step
// with an f32 cache over the same data.
#include "engine/measure/attn_accuracy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/measure/kv_data.hpp"

namespace kvscope {
namespace {

AttnAccuracy accuracy(KvTypes types, KvData data, std::int64_t kv_heads = 4) {
  return measure_attn_accuracy({.n_heads = 8,
                                .n_kv_heads = kv_heads,
                                .head_dim = 72,
                                .tokens = 700,
                                .types = types,
                                .data = data,
                                .isa = best_isa(),
                                .threads = 2});
}

TEST(AttnAccuracy, F32IsExactAndReducedTypesOrderByTheirStep) {
  const AttnAccuracy f32 = accuracy(KvDtype::f32, KvData::realistic);
  EXPECT_EQ(f32.rel_error, 0.0);
  EXPECT_EQ(f32.weight_kl, 0.0);
  const AttnAccuracy f16 = accuracy(KvDtype::f16, KvData::realistic);
  const AttnAccuracy int8 = accuracy(KvDtype::int8, KvData::realistic);
  const AttnAccuracy int4 = accuracy(KvDtype::int4, KvData::realistic);
  EXPECT_GT(f16.rel_error, 0.0);
  EXPECT_LT(f16.rel_error, int8.rel_error);
  EXPECT_LT(int8.rel_error, int4.rel_error);
  EXPECT_LT(f16.weight_kl, int8.weight_kl);
  EXPECT_LT(int8.weight_kl, int4.weight_kl);
  // Errors stay within a few of their format's steps (int4: 1/14 of a group's absmax).
  EXPECT_LT(int4.rel_error, 0.5);
  // Only K changes the weights: int8 keys give the same KL whatever the values' type.
  const AttnAccuracy int8_f16 = accuracy(KvTypes(KvDtype::int8, KvDtype::f16), KvData::realistic);
  EXPECT_DOUBLE_EQ(int8_f16.weight_kl, int8.weight_kl);
  EXPECT_LT(int8_f16.rel_error, int8.rel_error);
}

// Outlier channels set every int8 row scale, so per-token int8 keys lose more on realistic
// keys than on uniform ones.
TEST(AttnAccuracy, RealisticKeysHurtPerTokenInt8MoreThanUniformOnes) {
  EXPECT_GT(accuracy(KvDtype::int8, KvData::realistic).weight_kl,
            accuracy(KvDtype::int8, KvData::uniform).weight_kl);
}

TEST(KvData, RealisticKeysHaveAHandfulOfOutlierChannels) {
  const std::size_t d = 64, tokens = 512;
  std::vector<double> mean_abs(d, 0.0);
  append_kv_data(KvData::realistic, tokens, 1, d, 5,
                 [&](const float* k, const float*, std::size_t n) {
                   for (std::size_t i = 0; i < n * d; ++i) mean_abs[i % d] += std::fabs(k[i]);
                 });
  int outliers = 0;
  for (double m : mean_abs) outliers += m / tokens > 5.0;
  EXPECT_EQ(outliers, 4);
  EXPECT_EQ(parse_kv_data("uniform"), KvData::uniform);
  EXPECT_THROW(parse_kv_data("normal"), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
