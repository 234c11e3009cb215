// The decoder layer against the independent float64 layer of tests/support, and the
// prefill/decode equivalence: any split of a sequence gives one prefill's outputs.
#include "engine/decoder_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "support/reference_layer.hpp"

namespace kvscope {
namespace {

double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    mag = std::max(mag, std::fabs(want[i]));
  }
  return err / mag;
}

struct Shape {
  std::int64_t heads, kv_heads, head_dim;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << s.heads << " heads, " << s.kv_heads << " kv heads, d_head " << s.head_dim;
}

class DecoderLayerTest : public ::testing::TestWithParam<Shape> {
 protected:
  LayerShape shape(std::int64_t capacity) const {
    const Shape s = GetParam();
    return {.hidden_size = 48,
            .n_heads = s.heads,
            .n_kv_heads = s.kv_heads,
            .head_dim = s.head_dim,
            .ffn_size = 80,
            .capacity = capacity};
  }
  LayerConfig config(std::int64_t capacity) const { return LayerConfig(shape(capacity)); }
};

TEST_P(DecoderLayerTest, MatchesFloat64Layer) {
  const std::size_t n = 12;
  const LayerConfig c = config(n);
  const LayerWeights w = LayerWeights::random(c, 7);
  std::vector<float> x(n * c.hidden_size());
  fill_uniform(x, 99, -1, 1);
  DecoderLayer layer(c, w, {.threads = 2});
  const std::vector<float> y = layer.prefill(x.data(), n);
  EXPECT_LT(relative_error(y, test::reference_layer(shape(n), w, x, n)), 1e-5);
}

TEST_P(DecoderLayerTest, EveryPrefillDecodeSplitEqualsOnePrefill) {
  const std::size_t n = 7, H = 48;
  const LayerConfig c = config(n);
  const LayerWeights w = LayerWeights::random(c, 3);
  std::vector<float> x(n * H);
  fill_uniform(x, 5, -1, 1);
  DecoderLayer whole(c, w, {});
  const std::vector<float> reference = whole.prefill(x.data(), n);
  for (std::size_t p = 1; p <= n; ++p) {
    DecoderLayer split(c, w, {.threads = 2});
    std::vector<float> y = split.prefill(x.data(), p);
    for (std::size_t t = p; t < n; ++t) {
      const std::vector<float> row = split.decode(x.data() + t * H);
      y.insert(y.end(), row.begin(), row.end());
    }
    ASSERT_EQ(y.size(), reference.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      // Same kernels, different row blocking: only summation order may differ.
      EXPECT_NEAR(y[i], reference[i], 1e-5 * (1 + std::fabs(reference[i])))
          << "P=" << p << " i=" << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MhaGqaMqa, DecoderLayerTest,
                         ::testing::Values(Shape{4, 4, 12}, Shape{4, 2, 16}, Shape{4, 1, 8}),
                         [](const auto& info) {
                           return "heads" + std::to_string(info.param.heads) + "_kv" +
                                  std::to_string(info.param.kv_heads) + "_d" +
                                  std::to_string(info.param.head_dim);
                         });

// The layer keeps its activations between calls: reserving them first, or reusing the
// larger buffers of an earlier prefill (stale rows past the new n), gives the same bits.
TEST(DecoderLayer, ReusedActivationsChangeNothing) {
  const LayerShape shape{.hidden_size = 48,
                         .n_heads = 4,
                         .n_kv_heads = 2,
                         .head_dim = 12,
                         .ffn_size = 80,
                         .capacity = 20};
  const LayerConfig c(shape);
  const LayerWeights w = LayerWeights::random(c, 11);
  std::vector<float> x(20 * 48);
  fill_uniform(x, 12, -1, 1);
  DecoderLayer fresh(c, w, {.threads = 2});
  const std::vector<float> want = fresh.prefill(x.data(), 7);
  DecoderLayer reserved(c, w, {.threads = 2});
  reserved.reserve_rows(20);
  EXPECT_EQ(reserved.prefill(x.data(), 7), want);
  DecoderLayer reused(c, w, {.threads = 2});
  (void)reused.prefill(x.data() + 48, 19);
  reused.reset();
  EXPECT_EQ(reused.prefill(x.data(), 7), want);
}

TEST(DecoderLayer, TokensBeyondCapacityAreRefusedAndNothingIsLost) {
  const LayerConfig c({.hidden_size = 16,
                       .n_heads = 2,
                       .n_kv_heads = 1,
                       .head_dim = 8,
                       .ffn_size = 32,
                       .capacity = 4});
  DecoderLayer layer(c, LayerWeights::random(c, 1), {});
  std::vector<float> x(5 * 16);
  fill_uniform(x, 2, -1, 1);
  const std::vector<float> first = layer.prefill(x.data(), 3);
  try {
    layer.prefill(x.data(), 2);
    FAIL() << "accepted tokens beyond capacity";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 of 4 tokens"), std::string::npos) << e.what();
  }
  EXPECT_EQ(layer.cache().size(), 3u);
  // The cache still continues the sequence: the 4th token matches a 4-token prefill.
  const std::vector<float> fourth = layer.decode(x.data() + 3 * 16);
  DecoderLayer whole(c, LayerWeights::random(c, 1), {});
  const std::vector<float> all = whole.prefill(x.data(), 4);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_NEAR(fourth[i], all[3 * 16 + i], 1e-5);
}

TEST(DecoderLayer, NonFiniteInputIsRefusedNamingThePlace) {
  const LayerConfig c({.hidden_size = 16,
                       .n_heads = 2,
                       .n_kv_heads = 2,
                       .head_dim = 8,
                       .ffn_size = 32,
                       .capacity = 4});
  DecoderLayer layer(c, LayerWeights::random(c, 1), {});
  std::vector<float> x(2 * 16, 0.5f);
  x[16 + 3] = std::nanf("");
  try {
    layer.prefill(x.data(), 2);
    FAIL() << "accepted NaN";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("token 1, element 3 is not finite"), std::string::npos);
  }
  EXPECT_EQ(layer.cache().size(), 0u);
  EXPECT_THROW(layer.prefill(x.data(), 0), std::invalid_argument);
}

TEST(DecoderLayer, RejectsWeightsOfTheWrongShape) {
  const LayerConfig c({.hidden_size = 16,
                       .n_heads = 2,
                       .n_kv_heads = 2,
                       .head_dim = 8,
                       .ffn_size = 32,
                       .capacity = 4});
  LayerWeights w = LayerWeights::random(c, 1);
  w.wk = WeightMatrix(std::vector<float>((w.wk.rows() - 1) * w.wk.cols()), w.wk.rows() - 1,
                      w.wk.cols());
  try {
    DecoderLayer layer(c, w, {});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight wk"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope
