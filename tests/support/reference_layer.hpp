#pragma once
// An independent float64 Llama decoder layer, written from the model's definition for tests:
//   h = RMSNorm(x); q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ; RoPE (rotate-half, θ^(−2i/head_dim)) on
//   q and k at positions 0 … n−1; per head causal softmax(q·kᵀ/√head_dim)·v with query head
//   h reading kv head h / (heads / kv_heads); y = x + concat·Woᵀ;
//   out = y + (silu(g)·u)·Wdᵀ, g, u = RMSNorm(y)·Wgᵀ, RMSNorm(y)·Wuᵀ.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"

namespace kvscope::test {

// x: [n × hidden]; returns [n × hidden] in double.
inline std::vector<double> reference_layer(const LayerShape& s, const LayerWeights& w,
                                           const std::vector<float>& x, std::size_t n) {
  const auto H = static_cast<std::size_t>(s.hidden_size);
  const auto heads = static_cast<std::size_t>(s.n_heads);
  const auto kv_heads = static_cast<std::size_t>(s.n_kv_heads);
  const auto hd = static_cast<std::size_t>(s.head_dim);
  const auto F = static_cast<std::size_t>(s.ffn_size);
  const std::size_t Q = heads * hd, KV = kv_heads * hd;

  const auto rmsnorm = [&](const std::vector<double>& in, const std::vector<float>& g) {
    std::vector<double> out(n * H);
    for (std::size_t t = 0; t < n; ++t) {
      double ss = 0;
      for (std::size_t i = 0; i < H; ++i) ss += in[t * H + i] * in[t * H + i];
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(H) + s.rms_norm_eps);
      for (std::size_t i = 0; i < H; ++i) out[t * H + i] = in[t * H + i] * r * g[i];
    }
    return out;
  };
  // [n × in] · W[out × in]ᵀ
  const auto project = [&](const std::vector<double>& in, const WeightMatrix& matrix,
                           std::size_t in_dim, std::size_t out_dim) {
    const std::vector<float> W = matrix.to_f32();  // exact: the values the layer multiplies
    std::vector<double> out(n * out_dim, 0.0);
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t o = 0; o < out_dim; ++o) {
        double acc = 0;
        for (std::size_t i = 0; i < in_dim; ++i) acc += in[t * in_dim + i] * W[o * in_dim + i];
        out[t * out_dim + o] = acc;
      }
    return out;
  };
  const auto rope = [&](std::vector<double>& v, std::size_t n_vec_heads) {
    const std::size_t half = hd / 2, width = n_vec_heads * hd;
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t h = 0; h < n_vec_heads; ++h)
        for (std::size_t i = 0; i < half; ++i) {
          const double angle =
              static_cast<double>(t) * std::pow(s.rope_theta, -2.0 * static_cast<double>(i) / hd);
          double& a = v[t * width + h * hd + i];
          double& b = v[t * width + h * hd + i + half];
          const double a0 = a, b0 = b;
          a = a0 * std::cos(angle) - b0 * std::sin(angle);
          b = b0 * std::cos(angle) + a0 * std::sin(angle);
        }
  };

  std::vector<double> xd(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n * H));
  std::vector<double> h = rmsnorm(xd, w.attn_norm);
  std::vector<double> q = project(h, w.wq, H, Q), k = project(h, w.wk, H, KV),
                      v = project(h, w.wv, H, KV);
  rope(q, heads);
  rope(k, kv_heads);
  std::vector<double> attn(n * Q, 0.0);
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t hq = 0; hq < heads; ++hq) {
      const std::size_t hk = hq / (heads / kv_heads);
      std::vector<double> scores(t + 1);
      double max_score = -INFINITY;
      for (std::size_t u = 0; u <= t; ++u) {
        double dot = 0;
        for (std::size_t i = 0; i < hd; ++i)
          dot += q[t * Q + hq * hd + i] * k[u * KV + hk * hd + i];
        scores[u] = dot / std::sqrt(static_cast<double>(hd));
        max_score = std::max(max_score, scores[u]);
      }
      double total = 0;
      for (double& sc : scores) total += (sc = std::exp(sc - max_score));
      for (std::size_t u = 0; u <= t; ++u)
        for (std::size_t i = 0; i < hd; ++i)
          attn[t * Q + hq * hd + i] += scores[u] / total * v[u * KV + hk * hd + i];
    }
  std::vector<double> y = project(attn, w.wo, Q, H);
  for (std::size_t i = 0; i < n * H; ++i) y[i] += xd[i];
  h = rmsnorm(y, w.mlp_norm);
  std::vector<double> g = project(h, w.w_gate, H, F), u = project(h, w.w_up, H, F);
  for (std::size_t i = 0; i < n * F; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  std::vector<double> out = project(g, w.w_down, F, H);
  for (std::size_t i = 0; i < n * H; ++i) out[i] += y[i];
  return out;
}

// max |got − want| / max |want|.
inline double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double max_err = 0, max_ref = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    max_err = std::max(max_err, std::abs(static_cast<double>(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::abs(want[i]));
  }
  return max_err / max_ref;
}

}  // namespace kvscope::test
