#include "engine/decoder_layer.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/attention.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {

DecoderLayer::DecoderLayer(const LayerConfig& config, LayerWeights weights, Options options)
    : config_(config),
      weights_(std::move(weights)),
      options_(options),
      cache_(config, options.kv_dtype),
      projector_(options.isa, options.threads, options.compute) {
  weights_.check_shapes(config_);
  if (options_.threads < 1) {
    throw std::invalid_argument("threads must be at least 1, got " +
                                std::to_string(options_.threads));
  }
}

std::vector<float> DecoderLayer::prefill(const float* x, std::size_t n) {
  const LayerConfig& c = config_;
  const LayerWeights& w = weights_;
  const std::size_t hidden = c.hidden_size();
  const int threads = options_.threads;
  if (n == 0) throw std::invalid_argument("prefill needs at least one token");
  if (n > cache_.capacity() - cache_.size()) {
    throw std::length_error(
        "tokens beyond capacity: the cache holds " + std::to_string(cache_.size()) + " of " +
        std::to_string(cache_.capacity()) + " tokens, " + std::to_string(n) + " more do not fit");
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
  std::vector<float> q(n * c.q_width()), k(n * c.kv_width()), v(n * c.kv_width());
  projector_(h.data(), w.wq.view(), n, q.data());
  projector_(h.data(), w.wk.view(), n, k.data());
  projector_(h.data(), w.wv.view(), n, v.data());
  const std::size_t first_pos = cache_.size();
  for (std::size_t i = 0; i < n; ++i) {
    rope_ref(q.data() + i * c.q_width(), c.n_heads(), c.head_dim(), first_pos + i, c.rope_theta());
    rope_ref(k.data() + i * c.kv_width(), c.n_kv_heads(), c.head_dim(), first_pos + i,
             c.rope_theta());
  }
  cache_.append(k.data(), v.data(), n);

  std::vector<float> heads(n * c.q_width());
  const auto attention_start = std::chrono::steady_clock::now();
  attend({.q = q.data(),
          .n_queries = n,
          .first_pos = first_pos,
          .n_heads = c.n_heads(),
          .kv = cache_.view(),
          .out = heads.data()},
         options_.isa, threads, options_.compute);
  attention_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - attention_start).count();
  std::vector<float> y(n * hidden);
  projector_(heads.data(), w.wo.view(), n, y.data());
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

}  // namespace kvscope
