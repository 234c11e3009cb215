#include "engine/decoder_layer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {
namespace {

// y[r] += bias for each of n rows of `width` (no-op for an empty bias).
void add_bias(float* y, const std::vector<float>& bias, std::size_t n, std::size_t width) {
  if (bias.empty()) return;
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < width; ++i) y[r * width + i] += bias[i];
}

}  // namespace

DecoderLayer::DecoderLayer(const LayerConfig& config, LayerWeights weights, Options options)
    : config_(config),
      weights_(std::move(weights)),
      options_(options),
      // An MLA layer keeps its latent cache in mla_; cache_ then stays an unused minimum.
      cache_(config.is_mla() ? KvCache(1, 2, 1, KvDtype::f32) : KvCache(config, options.kv_dtype)),
      projector_(options.isa, options.threads, options.compute) {
  weights_.check_shapes(config_);
  if (options_.threads < 1) {
    throw std::invalid_argument("threads must be at least 1, got " +
                                std::to_string(options_.threads));
  }
  if (config_.is_mla()) {
    if (options_.kv_dtype != KvTypes(KvDtype::f32)) {
      throw std::invalid_argument("MLA's latent cache holds f32 only, not kv dtype " +
                                  to_string(options_.kv_dtype));
    }
    mla_.emplace(config_, options_.threads);
  }
}

std::vector<float> DecoderLayer::prefill(const float* x, std::size_t n) {
  const LayerConfig& c = config_;
  const LayerWeights& w = weights_;
  const std::size_t hidden = c.hidden_size();
  if (n == 0) throw std::invalid_argument("prefill needs at least one token");
  if (n > c.capacity() - position_) {
    throw std::length_error("tokens beyond capacity: the layer holds " + std::to_string(position_) +
                            " of " + std::to_string(c.capacity()) + " tokens, " +
                            std::to_string(n) + " more do not fit");
  }
  for (std::size_t i = 0; i < n * hidden; ++i) {
    if (!std::isfinite(x[i])) {
      throw std::invalid_argument("input token " + std::to_string(i / hidden) + ", element " +
                                  std::to_string(i % hidden) + " is not finite (" +
                                  std::to_string(x[i]) + ")");
    }
  }

  // Attention block.
  std::vector<float> h(n * hidden);
  rmsnorm_ref(x, w.attn_norm.data(), n, hidden, c.rms_norm_eps(), h.data());
  std::vector<float> y(n * hidden);
  if (mla_) {
    std::vector<float> heads(n * c.o_width());
    // Attention's time without the projections it makes (kv_b_proj's through projector_).
    const double projections_before = projector_.seconds();
    const auto attention_start = std::chrono::steady_clock::now();
    mla_->forward(h.data(), n, w, projector_, heads.data());
    attention_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - attention_start).count() -
        (projector_.seconds() - projections_before);
    position_ += n;
    projector_(heads.data(), w.wo.view(), n, y.data());
  } else {
    attention_block(h.data(), n, y.data());
  }
  for (std::size_t i = 0; i < n * hidden; ++i) y[i] += x[i];

  // MLP block (SwiGLU).
  rmsnorm_ref(y.data(), w.mlp_norm.data(), n, hidden, c.rms_norm_eps(), h.data());
  std::vector<float> gate(n * c.ffn_size()), up(n * c.ffn_size());
  projector_(h.data(), w.w_gate.view(), n, gate.data());
  projector_(h.data(), w.w_up.view(), n, up.data());
  swiglu_ref(gate.data(), up.data(), gate.size());
  std::vector<float> out(n * hidden);
  projector_(gate.data(), w.w_down.view(), n, out.data());
  for (std::size_t i = 0; i < n * hidden; ++i) out[i] += y[i];
  return out;
}

void DecoderLayer::attention_block(const float* h, std::size_t n, float* y) {
  const LayerConfig& c = config_;
  const LayerWeights& w = weights_;
  const std::size_t hidden = c.hidden_size();
  std::vector<float> q(n * c.q_width()), k(n * c.kv_width()), v(n * c.kv_width());
  projector_(h, w.wq.view(), n, q.data());
  projector_(h, w.wk.view(), n, k.data());
  projector_(h, w.wv.view(), n, v.data());
  add_bias(q.data(), w.bq, n, c.q_width());
  add_bias(k.data(), w.bk, n, c.kv_width());
  add_bias(v.data(), w.bv, n, c.kv_width());
  if (c.qk_norm()) {  // every head's vector normalized on its own, in place
    rmsnorm_ref(q.data(), w.q_norm.data(), n * c.n_heads(), c.head_dim(), c.rms_norm_eps(),
                q.data());
    rmsnorm_ref(k.data(), w.k_norm.data(), n * c.n_kv_heads(), c.head_dim(), c.rms_norm_eps(),
                k.data());
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t pos = position_ + i;
    rope_table_ref(q.data() + i * c.q_width(), c.n_heads(), c.head_dim(), pos,
                   c.rope_inv_freq().data());
    rope_table_ref(k.data() + i * c.kv_width(), c.n_kv_heads(), c.head_dim(), pos,
                   c.rope_inv_freq().data());
  }
  std::vector<float> heads(n * c.q_width());
  const auto attention_start = std::chrono::steady_clock::now();
  attend_new_tokens(q.data(), k.data(), v.data(), n, heads.data());
  attention_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - attention_start).count();
  projector_(heads.data(), w.wo.view(), n, y);
  add_bias(y, w.bo, n, hidden);
}

// Without a window, or while the ring has not wrapped (every position < W, so every earlier
// key is within the window), the cache holds positions in order and one causal attention call
// covers the tokens. Past that, each token is appended to the ring, overwriting the key that
// just left its window, and attends as a decode step to the W rows there: exactly the keys
// j with 0 ≤ i − j < W. Every kernel (scalar, SIMD, dot units) then sees a plain full cache.
void DecoderLayer::attend_new_tokens(const float* q, const float* k, const float* v, std::size_t n,
                                     float* heads) {
  const LayerConfig& c = config_;
  const std::size_t rows = cache_.capacity();
  const std::size_t in_order = position_ < rows ? std::min(n, rows - position_) : 0;
  if (in_order > 0) {
    cache_.append_ring(k, v, in_order);
    attend({.q = q,
            .n_queries = in_order,
            .first_pos = position_,
            .n_heads = c.n_heads(),
            .kv = cache_.view(),
            .out = heads},
           options_.isa, options_.threads, options_.compute);
    position_ += in_order;
  }
  for (std::size_t i = in_order; i < n; ++i, ++position_) {
    cache_.append_ring(k + i * c.kv_width(), v + i * c.kv_width(), 1);
    attend({.q = q + i * c.q_width(),
            .n_queries = 1,
            .first_pos = rows - 1,  // the query sees all `rows` ring rows
            .n_heads = c.n_heads(),
            .kv = cache_.view(),
            .out = heads + i * c.q_width()},
           options_.isa, options_.threads, options_.compute);
  }
}

}  // namespace kvscope
