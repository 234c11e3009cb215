#pragma once
// An independent float64 DeepSeek-V2 decoder layer (a dense one), written for tests from
// transformers' DeepseekV2Attention / DeepseekV2DecoderLayer, in the plain (non-absorbed)
// form:
//   h = RMSNorm(x) (rms_norm_eps);
//   q = h·W_qᵀ, or RMSNorm_1e-6(h·W_qaᵀ)·W_qbᵀ; per head q = [q_nope (nope) | q_pe (rope)];
//   [c | k_pe] = h·W_kvaᵀ; c = RMSNorm_1e-6(c) (kv_a_layernorm uses the default ε 1e-6);
//   per head [k_nope (nope) | v (v_head_dim)] = c·W_kvbᵀ;
//   RoPE on q_pe and k_pe as complex numbers: (x[2i] + i·x[2i+1])·e^(i·t·θ^(−2i/rope));
//   scores (q_nope·k_nope + q_pe·k_pe)/√(nope + rope), causal softmax, Σ p·v per head;
//   y = x + concat·W_oᵀ; out = y + SwiGLU MLP of RMSNorm(y), as in reference_layer.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"

namespace kvscope::test {

// x: [n × hidden] at positions 0 … n−1; returns [n × hidden] in double.
inline std::vector<double> reference_mla_layer(const LayerShape& s, const LayerWeights& w,
                                               const std::vector<float>& x, std::size_t n) {
  const auto H = static_cast<std::size_t>(s.hidden_size);
  const auto heads = static_cast<std::size_t>(s.n_heads);
  const auto F = static_cast<std::size_t>(s.ffn_size);
  const auto lora = static_cast<std::size_t>(s.mla.kv_lora_rank);
  const auto q_lora = static_cast<std::size_t>(s.mla.q_lora_rank);
  const auto nope = static_cast<std::size_t>(s.mla.qk_nope_head_dim);
  const auto rope = static_cast<std::size_t>(s.mla.qk_rope_head_dim);
  const auto vd = static_cast<std::size_t>(s.mla.v_head_dim);
  const std::size_t qk = nope + rope;

  // Each of the n rows of width `width` normalized.
  const auto rmsnorm = [&](const std::vector<double>& in, const std::vector<float>& g,
                           std::size_t width, double eps) {
    std::vector<double> out(in.size());
    for (std::size_t t = 0; t < n; ++t) {
      double ss = 0;
      for (std::size_t i = 0; i < width; ++i) ss += in[t * width + i] * in[t * width + i];
      const double r = 1.0 / std::sqrt(ss / static_cast<double>(width) + eps);
      for (std::size_t i = 0; i < width; ++i) out[t * width + i] = in[t * width + i] * r * g[i];
    }
    return out;
  };
  const auto project = [&](const std::vector<double>& in, const WeightMatrix& matrix) {
    const std::vector<float> W = matrix.to_f32();
    const std::size_t in_dim = matrix.cols(), out_dim = matrix.rows();
    std::vector<double> out(n * out_dim, 0.0);
    for (std::size_t t = 0; t < n; ++t)
      for (std::size_t o = 0; o < out_dim; ++o) {
        double acc = 0;
        for (std::size_t i = 0; i < in_dim; ++i) acc += in[t * in_dim + i] * W[o * in_dim + i];
        out[t * out_dim + o] = acc;
      }
    return out;
  };
  // The complex rotation of `rope` values at v[offset …] for token t.
  const auto rotate = [&](std::vector<double>& v, std::size_t offset, std::size_t t) {
    for (std::size_t i = 0; i < rope / 2; ++i) {
      const double angle =
          static_cast<double>(t) / std::pow(s.rope_theta, 2.0 * static_cast<double>(i) / rope);
      const double re = v[offset + 2 * i], im = v[offset + 2 * i + 1];
      v[offset + 2 * i] = re * std::cos(angle) - im * std::sin(angle);
      v[offset + 2 * i + 1] = re * std::sin(angle) + im * std::cos(angle);
    }
  };

  const std::vector<double> xd(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n * H));
  const std::vector<double> h = rmsnorm(xd, w.attn_norm, H, s.rms_norm_eps);
  std::vector<double> q =
      q_lora == 0 ? project(h, w.wq)
                  : project(rmsnorm(project(h, w.wq_a), w.q_a_norm, q_lora, 1e-6), w.wq_b);
  const std::vector<double> ckv = project(h, w.wkv_a);  // [n × (lora + rope)]
  std::vector<double> latent(n * lora), k_pe(n * rope);
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t i = 0; i < lora; ++i) latent[t * lora + i] = ckv[t * (lora + rope) + i];
    for (std::size_t i = 0; i < rope; ++i) k_pe[t * rope + i] = ckv[t * (lora + rope) + lora + i];
    rotate(k_pe, t * rope, t);
    for (std::size_t hq = 0; hq < heads; ++hq) rotate(q, (t * heads + hq) * qk + nope, t);
  }
  const std::vector<double> kv = project(rmsnorm(latent, w.kv_a_norm, lora, 1e-6), w.wkv_b);
  const std::size_t kv_width = heads * (nope + vd);

  std::vector<double> attn(n * heads * vd, 0.0);
  for (std::size_t t = 0; t < n; ++t)
    for (std::size_t hq = 0; hq < heads; ++hq) {
      const double* qh = &q[(t * heads + hq) * qk];
      std::vector<double> scores(t + 1);
      double max_score = -INFINITY;
      for (std::size_t u = 0; u <= t; ++u) {
        const double* k_nope = &kv[u * kv_width + hq * (nope + vd)];
        double dot = 0;
        for (std::size_t i = 0; i < nope; ++i) dot += qh[i] * k_nope[i];
        for (std::size_t i = 0; i < rope; ++i) dot += qh[nope + i] * k_pe[u * rope + i];
        scores[u] = dot / std::sqrt(static_cast<double>(qk));
        max_score = std::max(max_score, scores[u]);
      }
      double total = 0;
      for (double& sc : scores) total += (sc = std::exp(sc - max_score));
      for (std::size_t u = 0; u <= t; ++u)
        for (std::size_t i = 0; i < vd; ++i)
          attn[(t * heads + hq) * vd + i] +=
              scores[u] / total * kv[u * kv_width + hq * (nope + vd) + nope + i];
    }
  std::vector<double> y = project(attn, w.wo);
  for (std::size_t i = 0; i < n * H; ++i) y[i] += xd[i];
  const std::vector<double> hm = rmsnorm(y, w.mlp_norm, H, s.rms_norm_eps);
  std::vector<double> g = project(hm, w.w_gate);
  const std::vector<double> u = project(hm, w.w_up);
  for (std::size_t i = 0; i < n * F; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
  std::vector<double> out = project(g, w.w_down);
  for (std::size_t i = 0; i < n * H; ++i) out[i] += y[i];
  return out;
}

}  // namespace kvscope::test
