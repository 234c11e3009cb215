#include "engine/layer_weights.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace kvscope {

void fill_uniform(std::vector<float>& out, std::uint64_t seed, float lo, float hi) {
  std::uint64_t state = seed;
  for (float& x : out) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float unit = static_cast<float>(z >> 40) * 0x1p-24f;  // [0, 1)
    x = lo + (hi - lo) * unit;
  }
}

namespace {

// An MLA layer's weights, drawn as LayerWeights::random draws a Llama layer's.
LayerWeights random_mla(const LayerConfig& c, std::uint64_t seed, WeightDtype dtype) {
  const std::size_t hidden = c.hidden_size(), heads = c.n_heads();
  LayerWeights w;
  std::uint64_t stream = seed * 1000003ull;
  auto projection = [&](WeightMatrix& m, std::size_t out, std::size_t in) {
    std::vector<float> values(out * in);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    fill_uniform(values, ++stream, -bound, bound);
    m = WeightMatrix(values, out, in, dtype);
  };
  auto norm = [&](std::vector<float>& v, std::size_t size) {
    v.resize(size);
    fill_uniform(v, ++stream, 0.9f, 1.1f);
  };
  const std::size_t q_out = heads * c.qk_head_dim();
  if (c.q_lora_rank() == 0) {
    projection(w.wq, q_out, hidden);
  } else {
    projection(w.wq_a, c.q_lora_rank(), hidden);
    projection(w.wq_b, q_out, c.q_lora_rank());
    norm(w.q_a_norm, c.q_lora_rank());
  }
  projection(w.wkv_a, c.mla_row_width(), hidden);
  projection(w.wkv_b, heads * (c.qk_nope_head_dim() + c.v_head_dim()), c.kv_lora_rank());
  norm(w.kv_a_norm, c.kv_lora_rank());
  projection(w.wo, hidden, c.o_width());
  projection(w.w_gate, c.ffn_size(), hidden);
  projection(w.w_up, c.ffn_size(), hidden);
  projection(w.w_down, hidden, c.ffn_size());
  norm(w.attn_norm, hidden);
  norm(w.mlp_norm, hidden);
  return w;
}

}  // namespace

std::vector<WeightMatrix*> LayerWeights::matrices() {
  return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down, &wq_a, &wq_b, &wkv_a, &wkv_b};
}

std::vector<const WeightMatrix*> LayerWeights::matrices() const {
  return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down, &wq_a, &wq_b, &wkv_a, &wkv_b};
}

std::vector<std::vector<float>*> LayerWeights::vectors() {
  return {&attn_norm, &mlp_norm, &bq, &bk, &bv, &bo, &q_norm, &k_norm, &q_a_norm, &kv_a_norm};
}

LayerWeights LayerWeights::random(const LayerConfig& c, std::uint64_t seed, WeightDtype dtype) {
  const std::size_t hidden = c.hidden_size();
  LayerWeights w;
  std::uint64_t stream = seed * 1000003ull;
  auto projection = [&](WeightMatrix& m, std::size_t out, std::size_t in) {
    std::vector<float> values(out * in);
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    fill_uniform(values, ++stream, -bound, bound);
    m = WeightMatrix(values, out, in, dtype);
  };
  if (c.is_mla()) return random_mla(c, seed, dtype);
  projection(w.wq, c.q_width(), hidden);
  projection(w.wk, c.kv_width(), hidden);
  projection(w.wv, c.kv_width(), hidden);
  projection(w.wo, hidden, c.q_width());
  projection(w.w_gate, c.ffn_size(), hidden);
  projection(w.w_up, c.ffn_size(), hidden);
  projection(w.w_down, hidden, c.ffn_size());
  w.attn_norm.resize(hidden);
  w.mlp_norm.resize(hidden);
  fill_uniform(w.attn_norm, ++stream, 0.9f, 1.1f);
  fill_uniform(w.mlp_norm, ++stream, 0.9f, 1.1f);
  // Streams continue past the Llama tensors, so those stay as they were for a given seed.
  auto optional = [&](std::vector<float>& m, bool present, std::size_t size, float lo, float hi) {
    ++stream;
    if (!present) return;
    m.resize(size);
    fill_uniform(m, stream, lo, hi);
  };
  optional(w.bq, c.qkv_bias(), c.q_width(), -0.5f, 0.5f);
  optional(w.bk, c.qkv_bias(), c.kv_width(), -0.5f, 0.5f);
  optional(w.bv, c.qkv_bias(), c.kv_width(), -0.5f, 0.5f);
  optional(w.bo, c.o_bias(), hidden, -0.5f, 0.5f);
  optional(w.q_norm, c.qk_norm(), c.head_dim(), 0.5f, 1.5f);
  optional(w.k_norm, c.qk_norm(), c.head_dim(), 0.5f, 1.5f);
  return w;
}

void LayerWeights::check_shapes(const LayerConfig& c) const {
  const std::size_t hidden = c.hidden_size();
  auto expect = [](const WeightMatrix& m, std::size_t rows, std::size_t cols, const char* name) {
    if (m.rows() != rows || m.cols() != cols) {
      throw std::invalid_argument(std::string("weight ") + name + " is " +
                                  std::to_string(m.rows()) + " × " + std::to_string(m.cols()) +
                                  ", expected " + std::to_string(rows) + " × " +
                                  std::to_string(cols));
    }
  };
  auto expect_vector = [](const std::vector<float>& v, std::size_t size, const char* name) {
    if (v.size() != size) {
      throw std::invalid_argument(std::string("weight ") + name + " has " +
                                  std::to_string(v.size()) + " elements, expected " +
                                  std::to_string(size));
    }
  };
  if (c.is_mla()) {
    const std::size_t q_out = c.n_heads() * c.qk_head_dim(), q_lora = c.q_lora_rank();
    expect(wq, q_lora == 0 ? q_out : 0, q_lora == 0 ? hidden : 0, "wq (q_proj)");
    expect(wq_a, q_lora, q_lora == 0 ? 0 : hidden, "wq_a (q_a_proj)");
    expect(wq_b, q_lora == 0 ? 0 : q_out, q_lora, "wq_b (q_b_proj)");
    expect_vector(q_a_norm, q_lora, "q_a_norm");
    expect(wkv_a, c.mla_row_width(), hidden, "wkv_a (kv_a_proj_with_mqa)");
    expect(wkv_b, c.n_heads() * (c.qk_nope_head_dim() + c.v_head_dim()), c.kv_lora_rank(),
           "wkv_b (kv_b_proj)");
    expect_vector(kv_a_norm, c.kv_lora_rank(), "kv_a_norm");
    expect(wk, 0, 0, "wk");
    expect(wv, 0, 0, "wv");
  } else {
    expect(wq, c.q_width(), hidden, "wq");
    expect(wk, c.kv_width(), hidden, "wk");
    expect(wv, c.kv_width(), hidden, "wv");
    for (const WeightMatrix* m : {&wq_a, &wq_b, &wkv_a, &wkv_b}) expect(*m, 0, 0, "MLA weight");
    expect_vector(q_a_norm, 0, "q_a_norm");
    expect_vector(kv_a_norm, 0, "kv_a_norm");
  }
  expect(wo, hidden, c.o_width(), "wo");
  expect(w_gate, c.ffn_size(), hidden, "w_gate");
  expect(w_up, c.ffn_size(), hidden, "w_up");
  expect(w_down, hidden, c.ffn_size(), "w_down");
  expect_vector(attn_norm, hidden, "attn_norm");
  expect_vector(mlp_norm, hidden, "mlp_norm");
  expect_vector(bq, c.qkv_bias() ? c.q_width() : 0, "bq");
  expect_vector(bk, c.qkv_bias() ? c.kv_width() : 0, "bk");
  expect_vector(bv, c.qkv_bias() ? c.kv_width() : 0, "bv");
  expect_vector(bo, c.o_bias() ? hidden : 0, "bo");
  expect_vector(q_norm, c.qk_norm() ? c.head_dim() : 0, "q_norm");
  expect_vector(k_norm, c.qk_norm() ? c.head_dim() : 0, "k_norm");
}

std::uint64_t LayerWeights::bytes() const {
  std::uint64_t total = 0;
  for (const std::vector<float>* v :
       {&attn_norm, &mlp_norm, &bq, &bk, &bv, &bo, &q_norm, &k_norm, &q_a_norm, &kv_a_norm})
    total += v->size() * sizeof(float);
  for (const WeightMatrix* m : matrices()) total += m->bytes();
  return total;
}

}  // namespace kvscope
