#pragma once
// An independent float64 decoder layer, written for tests from the families' definitions in
// Hugging Face transformers (Llama, Llama 3.1 rope, Mistral, Qwen2, Qwen3):
//   h = RMSNorm(x); q, k, v = h·Wqᵀ + bq, h·Wkᵀ + bk, h·Wvᵀ + bv (biases where given);
//   Qwen3: each head of q and of k RMSNorm'ed over head_dim (weights q_norm, k_norm);
//   RoPE (rotate-half) on q and k at positions 0 … n−1 with inv_freq θ^(−2i/head_dim), or
//   Llama 3.1's table; per head softmax(q·kᵀ/√head_dim)·v over keys u with 0 ≤ t − u < W
//   (W = sliding_window, or every earlier key), query head h reading kv head
//   h / (heads / kv_heads); y = x + concat·Woᵀ + bo;
//   out = y + (silu(g)·u)·Wdᵀ, g, u = RMSNorm(y)·Wgᵀ, RMSNorm(y)·Wuᵀ.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"

namespace kvscope::test {

// RoPE inverse frequencies as transformers computes them: θ^(−2i/d); for rope_type llama3
// (transformers' _compute_llama3_parameters) low frequencies (wavelength above
// original / low_freq_factor) divided by factor, high ones (below original /
// high_freq_factor) kept, and in between (1 − s)·f/factor + s·f, s = (original/wavelength −
// low_freq_factor) / (high_freq_factor − low_freq_factor).
inline std::vector<double> reference_inv_freq(const LayerShape& s) {
  const auto hd = static_cast<std::size_t>(s.head_dim);
  std::vector<double> f(hd / 2);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = 1.0 / std::pow(s.rope_theta, 2.0 * i / hd);
  if (s.rope_scaling.kind != RopeScaling::Kind::llama3) return f;
  const RopeScaling& r = s.rope_scaling;
  const double low_wavelen = r.original_max_positions / r.low_freq_factor;
  const double high_wavelen = r.original_max_positions / r.high_freq_factor;
  for (double& inv : f) {
    const double wavelen = 2.0 * M_PI / inv;
    const double scaled = wavelen > low_wavelen ? inv / r.factor : inv;
    const double smooth = (r.original_max_positions / wavelen - r.low_freq_factor) /
                          (r.high_freq_factor - r.low_freq_factor);
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    inv = medium ? (1.0 - smooth) * scaled / r.factor + smooth * scaled : scaled;
  }
  return f;
}

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
  const std::vector<double> inv_freq = reference_inv_freq(s);
  const auto rope = [&](std::vector<double>& v, std::size_t n_vec_heads) {
    const std::size_t half = hd / 2, width = n_vec_heads * hd;
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t h = 0; h < n_vec_heads; ++h)
        for (std::size_t i = 0; i < half; ++i) {
          const double angle = static_cast<double>(t) * inv_freq[i];
          double& a = v[t * width + h * hd + i];
          double& b = v[t * width + h * hd + i + half];
          const double a0 = a, b0 = b;
          a = a0 * std::cos(angle) - b0 * std::sin(angle);
          b = b0 * std::cos(angle) + a0 * std::sin(angle);
        }
  };

  std::vector<double> xd(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n * H));
  std::vector<double> h = rmsnorm(xd, w.attn_norm);
  const auto add_bias = [&](std::vector<double>& y, const std::vector<float>& b) {
    for (std::size_t i = 0; i < y.size() && !b.empty(); ++i) y[i] += b[i % b.size()];
  };
  // Qwen3: RMSNorm of every head_dim-long head vector, with one weight shared by the heads.
  const auto head_norm = [&](std::vector<double>& y, const std::vector<float>& g) {
    for (std::size_t start = 0; start < y.size() && !g.empty(); start += hd) {
      double ss = 0;
      for (std::size_t i = 0; i < hd; ++i) ss += y[start + i] * y[start + i];
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(hd) + s.rms_norm_eps);
      for (std::size_t i = 0; i < hd; ++i) y[start + i] *= r * g[i];
    }
  };
  std::vector<double> q = project(h, w.wq, H, Q), k = project(h, w.wk, H, KV),
                      v = project(h, w.wv, H, KV);
  add_bias(q, w.bq);
  add_bias(k, w.bk);
  add_bias(v, w.bv);
  head_norm(q, w.q_norm);
  head_norm(k, w.k_norm);
  rope(q, heads);
  rope(k, kv_heads);
  std::vector<double> attn(n * Q, 0.0);
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t hq = 0; hq < heads; ++hq) {
      const std::size_t hk = hq / (heads / kv_heads);
      // Keys u ≤ t, and with a window W only those with t − u < W.
      const std::size_t first =
          s.sliding_window > 0 && t + 1 > static_cast<std::size_t>(s.sliding_window)
              ? t + 1 - static_cast<std::size_t>(s.sliding_window)
              : 0;
      std::vector<double> scores(t + 1, -INFINITY);
      double max_score = -INFINITY;
      for (std::size_t u = first; u <= t; ++u) {
        double dot = 0;
        for (std::size_t i = 0; i < hd; ++i)
          dot += q[t * Q + hq * hd + i] * k[u * KV + hk * hd + i];
        scores[u] = dot / std::sqrt(static_cast<double>(hd));
        max_score = std::max(max_score, scores[u]);
      }
      double total = 0;
      for (double& sc : scores) total += (sc = std::exp(sc - max_score));  // e^−∞ = 0
      for (std::size_t u = first; u <= t; ++u)
        for (std::size_t i = 0; i < hd; ++i)
          attn[t * Q + hq * hd + i] += scores[u] / total * v[u * KV + hk * hd + i];
    }
  std::vector<double> y = project(attn, w.wo, Q, H);
  add_bias(y, w.bo);
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
