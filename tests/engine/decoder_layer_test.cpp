// The decoder layer against an independent double-precision implementation, and the
// prefill/decode equivalence: any split of a sequence gives one prefill's outputs.
#include "engine/decoder_layer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

namespace kvscope {
namespace {

// Llama decoder layer in float64, written from the definition, sharing no code with the engine.
std::vector<double> layer_f64(const LayerConfig& c, const LayerWeights& w, const std::vector<float>& x,
                              std::size_t n) {
  const std::size_t H = c.hidden_size(), nh = c.n_heads(), nkv = c.n_kv_heads(), d = c.head_dim();
  auto rmsnorm = [&](const std::vector<double>& in, const std::vector<float>& g) {
    std::vector<double> out(in.size());
    for (std::size_t r = 0; r < n; ++r) {
      double ss = 0;
      for (std::size_t i = 0; i < H; ++i) ss += in[r * H + i] * in[r * H + i];
      const double inv = 1.0 / std::sqrt(ss / H + c.rms_norm_eps());
      for (std::size_t i = 0; i < H; ++i) out[r * H + i] = in[r * H + i] * inv * g[i];
    }
    return out;
  };
  auto linear = [&](const std::vector<double>& in, const std::vector<float>& W, std::size_t k,
                    std::size_t m) {
    std::vector<double> out(n * m);
    for (std::size_t r = 0; r < n; ++r)
      for (std::size_t o = 0; o < m; ++o) {
        double s = 0;
        for (std::size_t i = 0; i < k; ++i) s += in[r * k + i] * W[o * k + i];
        out[r * m + o] = s;
      }
    return out;
  };
  auto rope = [&](std::vector<double>& v, std::size_t heads) {
    for (std::size_t p = 0; p < n; ++p)
      for (std::size_t h = 0; h < heads; ++h)
        for (std::size_t i = 0; i < d / 2; ++i) {
          const double a = p * std::pow(double(c.rope_theta()), -2.0 * i / d);
          double& x1 = v[(p * heads + h) * d + i];
          double& x2 = v[(p * heads + h) * d + i + d / 2];
          const double r1 = x1 * std::cos(a) - x2 * std::sin(a), r2 = x2 * std::cos(a) + x1 * std::sin(a);
          x1 = r1;
          x2 = r2;
        }
  };
  const std::vector<double> xd(x.begin(), x.end());
  const std::vector<double> h = rmsnorm(xd, w.attn_norm);
  std::vector<double> q = linear(h, w.wq, H, nh * d), k = linear(h, w.wk, H, nkv * d),
                      v = linear(h, w.wv, H, nkv * d);
  rope(q, nh);
  rope(k, nkv);
  std::vector<double> att(n * nh * d, 0.0);
  for (std::size_t p = 0; p < n; ++p)
    for (std::size_t hh = 0; hh < nh; ++hh) {
      const std::size_t g = hh / (nh / nkv);
      std::vector<double> s(p + 1);
      double mx = -1e300, sum = 0;
      for (std::size_t t = 0; t <= p; ++t) {
        double dot = 0;
        for (std::size_t j = 0; j < d; ++j) dot += q[(p * nh + hh) * d + j] * k[(t * nkv + g) * d + j];
        mx = std::max(mx, s[t] = dot / std::sqrt(double(d)));
      }
      for (double& e : s) sum += (e = std::exp(e - mx));
      for (std::size_t t = 0; t <= p; ++t)
        for (std::size_t j = 0; j < d; ++j) att[(p * nh + hh) * d + j] += s[t] / sum * v[(t * nkv + g) * d + j];
    }
  std::vector<double> y = linear(att, w.wo, nh * d, H);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] += xd[i];
  const std::vector<double> h2 = rmsnorm(y, w.mlp_norm);
  std::vector<double> gate = linear(h2, w.w_gate, H, c.ffn_size()), up = linear(h2, w.w_up, H, c.ffn_size());
  for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
  std::vector<double> out = linear(gate, w.w_down, c.ffn_size(), H);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] += y[i];
  return out;
}

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
  LayerConfig config(std::int64_t capacity) const {
    const Shape s = GetParam();
    return LayerConfig({.hidden_size = 48, .n_heads = s.heads, .n_kv_heads = s.kv_heads,
                        .head_dim = s.head_dim, .ffn_size = 80, .capacity = capacity});
  }
};

TEST_P(DecoderLayerTest, MatchesFloat64Layer) {
  const std::size_t n = 12;
  const LayerConfig c = config(n);
  const LayerWeights w = LayerWeights::random(c, 7);
  std::vector<float> x(n * c.hidden_size());
  fill_uniform(x, 99, -1, 1);
  DecoderLayer layer(c, w, {.threads = 2});
  const std::vector<float> y = layer.prefill(x.data(), n);
  EXPECT_LT(relative_error(y, layer_f64(c, w, x, n)), 1e-5);
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
      EXPECT_NEAR(y[i], reference[i], 1e-5 * (1 + std::fabs(reference[i]))) << "P=" << p << " i=" << i;
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

TEST(DecoderLayer, TokensBeyondCapacityAreRefusedAndNothingIsLost) {
  const LayerConfig c({.hidden_size = 16, .n_heads = 2, .n_kv_heads = 1, .head_dim = 8,
                       .ffn_size = 32, .capacity = 4});
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
  const LayerConfig c({.hidden_size = 16, .n_heads = 2, .n_kv_heads = 2, .head_dim = 8,
                       .ffn_size = 32, .capacity = 4});
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
  const LayerConfig c({.hidden_size = 16, .n_heads = 2, .n_kv_heads = 2, .head_dim = 8,
                       .ffn_size = 32, .capacity = 4});
  LayerWeights w = LayerWeights::random(c, 1);
  w.wk.pop_back();
  try {
    DecoderLayer layer(c, w, {});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("weight wk"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvscope
