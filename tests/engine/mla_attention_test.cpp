// MlaAttention's two forms on the same latent cache: the absorbed form (decode: W_UK folded
// into the query, the cache read once for all heads in chunks, W_UV after) equals the plain
// form (every latent expanded to k_nope and v per head) for caches shorter and longer than
// one chunk, with q_lora_rank null and set, f32 and bf16 kv_b_proj; the absorbed result does
// not depend on the thread count; and the cache refuses tokens past its capacity.
#include "engine/mla_attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "engine/layer_weights.hpp"
#include "engine/projector.hpp"
#include "kernels/isa.hpp"

namespace kvscope {
namespace {

LayerConfig config(std::size_t capacity) {
  LayerShape s{.hidden_size = 64,
               .n_heads = 4,
               .n_kv_heads = 4,
               .head_dim = 8,
               .ffn_size = 96,
               .capacity = static_cast<std::int64_t>(capacity)};
  s.mla = {.kv_lora_rank = 32,
           .q_lora_rank = 0,
           .qk_nope_head_dim = 16,
           .qk_rope_head_dim = 8,
           .v_head_dim = 12};
  return LayerConfig(s);
}

// max |a − b| / max |b|.
double relative(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, static_cast<double>(std::abs(a[i] - b[i])));
    ref = std::max(ref, static_cast<double>(std::abs(b[i])));
  }
  return err / ref;
}

// A cache of `keys` random rows (a peaked direction in some, so softmax is not flat).
void fill(MlaAttention& mla, const LayerConfig& c, std::size_t keys) {
  std::vector<float> rows(keys * c.mla_row_width());
  fill_uniform(rows, 11, -2.0f, 2.0f);
  for (std::size_t j = 0; j < keys; j += 37) rows[j * c.mla_row_width()] = 12.0f;
  mla.append(rows.data(), keys);
}

TEST(MlaAttention, AbsorbedEqualsPlain) {
  for (WeightDtype dtype : {WeightDtype::f32, WeightDtype::bf16}) {
    for (std::size_t keys : {1u, 3u, 127u, 128u, 129u, 300u}) {
      const LayerConfig c = config(300);
      const LayerWeights w = LayerWeights::random(c, 5, dtype);
      MlaAttention mla(c, 2);
      fill(mla, c, keys);
      const std::size_t n = std::min<std::size_t>(3, keys);
      std::vector<float> q(n * c.n_heads() * c.qk_head_dim());
      fill_uniform(q, 13, -3.0f, 3.0f);
      const std::size_t out = n * c.o_width();
      std::vector<float> absorbed(out), plain(out);
      for (Isa isa : {Isa::scalar, best_isa()}) {
        Projector project(isa, 2);
        mla.attend_absorbed(q.data(), n, w, project, absorbed.data());
        mla.attend_plain(q.data(), n, w, project, plain.data());
        EXPECT_LT(relative(absorbed, plain), 1e-5)
            << to_string(dtype) << " keys " << keys << " " << to_string(isa);
      }
    }
  }
}

TEST(MlaAttention, AbsorbedIsTheSameForEveryThreadCount) {
  const LayerConfig c = config(700);
  const LayerWeights w = LayerWeights::random(c, 5);
  std::vector<float> q(c.n_heads() * c.qk_head_dim());
  fill_uniform(q, 13, -3.0f, 3.0f);
  std::vector<float> first;
  for (int threads : {1, 2, 3, 7, 16}) {
    MlaAttention mla(c, threads);
    fill(mla, c, 700);
    Projector project(Isa::scalar, 1);
    std::vector<float> heads(c.o_width());
    mla.attend_absorbed(q.data(), 1, w, project, heads.data());
    if (first.empty()) first = heads;
    EXPECT_EQ(heads, first) << threads << " threads";
  }
}

TEST(MlaAttention, RefusesTokensPastCapacity) {
  const LayerConfig c = config(4);
  MlaAttention mla(c, 1);
  fill(mla, c, 3);
  std::vector<float> rows(2 * c.mla_row_width());
  EXPECT_THROW(mla.append(rows.data(), 2), std::length_error);
  EXPECT_EQ(mla.size(), 3u);
  EXPECT_EQ(c.kv_cache_bytes(KvDtype::f32), 4u * (32 + 8) * 4);
  EXPECT_THROW((void)c.kv_cache_bytes(KvDtype::int8), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
