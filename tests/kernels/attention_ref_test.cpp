// The scalar reference attention against hand-computed values and a double-precision
// re-computation: the ground truth every SIMD kernel is compared with.
#include "kernels/ref/attention_ref.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/kv_cache.hpp"
#include "engine/layer_weights.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {
namespace {

// The lesson: q=[2,1], keys [1,1], [0,2], values [1,0], [0,1], d_head 4 (the 2-element
// vectors padded with zeros, which changes no dot product) → scores [3,2] → scaled
// [1.5,1.0] → softmax [0.622,0.378] → O=[0.622,0.378].
TEST(AttentionRef, LessonExample) {
  KvCache cache(1, 4, 2, KvDtype::f32);
  const std::vector<float> k{1, 1, 0, 0, 0, 2, 0, 0}, v{1, 0, 0, 0, 0, 1, 0, 0};
  cache.append(k.data(), v.data(), 2);
  const std::vector<float> q{2, 1, 0, 0};
  std::vector<float> out(4);
  attend_ref({.q = q.data(),
              .n_queries = 1,
              .first_pos = 1,
              .n_heads = 1,
              .kv = cache.view(),
              .out = out.data()},
             1);
  const double w1 = 1.0 / (1.0 + std::exp(-0.5));  // softmax of [1.5, 1.0]
  EXPECT_NEAR(out[0], w1, 1e-6);
  EXPECT_NEAR(out[1], 1.0 - w1, 1e-6);
  EXPECT_NEAR(out[0], 0.622, 5e-4);
  EXPECT_NEAR(out[1], 0.378, 5e-4);
  EXPECT_EQ(out[2], 0.0f);
}

// Prefill of the lesson's two tokens: the first query sees only key 1, so its output is v1.
TEST(AttentionRef, FirstPositionAttendsOnlyToItself) {
  KvCache cache(1, 4, 2, KvDtype::f32);
  const std::vector<float> k{1, 1, 0, 0, 0, 2, 0, 0}, v{1, 0, 0, 0, 0, 1, 0, 0};
  cache.append(k.data(), v.data(), 2);
  const std::vector<float> q{2, 1, 0, 0, 2, 1, 0, 0};
  std::vector<float> out(8);
  attend_ref({.q = q.data(),
              .n_queries = 2,
              .first_pos = 0,
              .n_heads = 1,
              .kv = cache.view(),
              .out = out.data()},
             1);
  EXPECT_EQ(out[0], 1.0f);  // weight exactly 1 on v1, exactly 0 on the masked key
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_NEAR(out[4], 0.622, 5e-4);
}

// Future keys are never read: poisoning every row after the query must not change it.
TEST(AttentionRef, KeysAfterTheQueryAreNeverRead) {
  KvCache cache(1, 2, 3, KvDtype::f32);
  const float nan = std::nanf("");
  const std::vector<float> k{1, 1, 0, 2, nan, nan}, v{1, 0, 0, 1, nan, nan};
  cache.append(k.data(), v.data(), 3);
  const std::vector<float> q{2, 1};
  std::vector<float> out(2);
  attend_ref({.q = q.data(),
              .n_queries = 1,
              .first_pos = 1,
              .n_heads = 1,
              .kv = cache.view(),
              .out = out.data()},
             1);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(-1.0 / std::sqrt(2.0))), 1e-6);
}

// GQA is MHA with each kv head shared by its group: duplicating the kv heads of a GQA
// cache into an MHA cache must give the same output for every query head.
TEST(AttentionRef, GqaEqualsMhaWithDuplicatedKvHeads) {
  const std::size_t n_heads = 8, n_kv = 2, d = 16, n = 9;
  std::vector<float> k(n * n_kv * d), v(n * n_kv * d), q(n * n_heads * d);
  fill_uniform(k, 1, -1, 1);
  fill_uniform(v, 2, -1, 1);
  fill_uniform(q, 3, -1, 1);
  std::vector<float> k_mha, v_mha;
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t h = 0; h < n_heads; ++h) {
      const std::size_t src = (t * n_kv + h / (n_heads / n_kv)) * d;
      k_mha.insert(k_mha.end(), k.begin() + src, k.begin() + src + d);
      v_mha.insert(v_mha.end(), v.begin() + src, v.begin() + src + d);
    }
  }
  KvCache gqa(n_kv, d, n, KvDtype::f32), mha(n_heads, d, n, KvDtype::f32);
  gqa.append(k.data(), v.data(), n);
  mha.append(k_mha.data(), v_mha.data(), n);
  std::vector<float> out_gqa(q.size()), out_mha(q.size());
  attend_ref({q.data(), n, 0, n_heads, gqa.view(), out_gqa.data()}, 2);
  attend_ref({q.data(), n, 0, n_heads, mha.view(), out_mha.data()}, 1);
  EXPECT_EQ(out_gqa, out_mha);  // same arithmetic in the same order: bit-identical
}

// Two heads with d_head 2, then W_O, all by hand:
// head 0: q=[2,1], k=[1,1],[0,2], v=[1,0],[0,1]; scores [3,2]/√2 → w1 = 1/(1+e^(−1/√2)).
// head 1: q=[0,0] → equal weights 0.5, v=[2,2],[4,0] → [3,1].
// concat [w1, 1−w1, 3, 1]; W_O rows [1,0,0,0] and [0,1,1,1] → [w1, 1−w1+4].
TEST(AttentionRef, HandComputedTwoHeadsWithOutputProjection) {
  KvCache cache(2, 2, 2, KvDtype::f32);
  const std::vector<float> k{1, 1, 5,  5,   // token 0: head 0, head 1
                             0, 2, -3, 7};  // token 1
  const std::vector<float> v{1, 0, 2, 2, 0, 1, 4, 0};
  cache.append(k.data(), v.data(), 2);
  const std::vector<float> q{2, 1, 0, 0};
  std::vector<float> heads(4), out(2);
  attend_ref({q.data(), 1, 1, 2, cache.view(), heads.data()}, 1);
  const std::vector<float> wo{1, 0, 0, 0, 0, 1, 1, 1};
  matmul_ref(heads.data(), {wo.data(), WeightDtype::f32, 2, 4}, 1, out.data(), 1);
  const double w1 = 1.0 / (1.0 + std::exp(-1.0 / std::sqrt(2.0)));
  EXPECT_NEAR(heads[2], 3.0, 1e-6);
  EXPECT_NEAR(heads[3], 1.0, 1e-6);
  EXPECT_NEAR(out[0], w1, 1e-6);
  EXPECT_NEAR(out[1], 1.0 - w1 + 4.0, 1e-6);
}

// Against a double-precision recomputation on random data, for every cache type read
// through its own decoding (so only f32 rounding in the reference is measured).
TEST(AttentionRef, MatchesDoublePrecisionOnRandomData) {
  const std::size_t n_heads = 4, n_kv = 2, d = 32, n = 40, first = 25;
  std::vector<float> k(n * n_kv * d), v(n * n_kv * d), q((n - first) * n_heads * d);
  fill_uniform(k, 11, -2, 2);
  fill_uniform(v, 12, -2, 2);
  fill_uniform(q, 13, -2, 2);
  KvCache cache(n_kv, d, n, KvDtype::f32);
  cache.append(k.data(), v.data(), n);
  std::vector<float> out(q.size());
  attend_ref({q.data(), n - first, first, n_heads, cache.view(), out.data()}, 2);
  double max_err = 0, max_out = 0;
  for (std::size_t i = 0; i < n - first; ++i) {
    for (std::size_t h = 0; h < n_heads; ++h) {
      const std::size_t kvh = h / (n_heads / n_kv), keys = first + i + 1;
      std::vector<double> w(keys);
      double max = -1e300, sum = 0;
      for (std::size_t t = 0; t < keys; ++t) {
        double dot = 0;
        for (std::size_t j = 0; j < d; ++j)
          dot += double(q[(i * n_heads + h) * d + j]) * k[(t * n_kv + kvh) * d + j];
        w[t] = dot / std::sqrt(double(d));
        max = std::max(max, w[t]);
      }
      for (double& x : w) sum += (x = std::exp(x - max));
      for (std::size_t j = 0; j < d; ++j) {
        double o = 0;
        for (std::size_t t = 0; t < keys; ++t) o += w[t] / sum * v[(t * n_kv + kvh) * d + j];
        max_err = std::max(max_err, std::fabs(o - out[(i * n_heads + h) * d + j]));
        max_out = std::max(max_out, std::fabs(o));
      }
    }
  }
  EXPECT_LT(max_err / max_out, 1e-5);  // f32 sums over ≤ 40 keys: a few ulps of 2^-24
}

}  // namespace
}  // namespace kvscope
