#include "engine/measure/attn_accuracy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kv_cache.hpp"
#include "kernels/attention.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {
namespace {

// Attention weights of every query head over all stored keys, in float64: [n_heads × tokens].
std::vector<double> attention_weights(const KvView& kv, const std::vector<float>& q,
                                      std::size_t n_heads, std::size_t tokens, int threads) {
  const std::size_t d = kv.head_dim, g = n_heads / kv.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p(n_heads * tokens);
#pragma omp parallel num_threads(threads)
  {
    std::vector<float> row(d);
#pragma omp for schedule(static)
    for (long kvh = 0; kvh < static_cast<long>(kv.n_kv_heads); ++kvh) {
      const auto h = static_cast<std::size_t>(kvh);
      for (std::size_t t = 0; t < tokens; ++t) {
        decode_row_ref(kv.k_dtype, kv.k_row(h, t), kv.k_row_scale(h, t), d, row.data());
        for (std::size_t i = 0; i < g; ++i) {
          const float* qh = q.data() + (h * g + i) * d;
          double s = 0;
          for (std::size_t j = 0; j < d; ++j) s += static_cast<double>(qh[j]) * row[j];
          p[(h * g + i) * tokens + t] = s * scale;
        }
      }
      for (std::size_t i = 0; i < g; ++i) {
        double* ph = p.data() + (h * g + i) * tokens;
        const double m = *std::max_element(ph, ph + tokens);
        double sum = 0;
        for (std::size_t t = 0; t < tokens; ++t) sum += ph[t] = std::exp(ph[t] - m);
        for (std::size_t t = 0; t < tokens; ++t) ph[t] /= sum;
      }
    }
  }
  return p;
}

}  // namespace

AttnAccuracy measure_attn_accuracy(const AttnAccuracyRequest& r) {
  if (r.types == KvDtype::f32) return {};
  const auto n_heads = static_cast<std::size_t>(r.n_heads);
  const auto n_kv = static_cast<std::size_t>(r.n_kv_heads);
  const auto d = static_cast<std::size_t>(r.head_dim);
  const auto tokens = static_cast<std::size_t>(r.tokens);
  KvCache reduced(n_kv, d, tokens, r.types), exact(n_kv, d, tokens, KvDtype::f32);
  append_kv_data(r.data, tokens, n_kv, d, r.seed,
                 [&](const float* k, const float* v, std::size_t n) {
                   reduced.append(k, v, n);
                   exact.append(k, v, n);
                 });
  const std::vector<float> q = query_data(r.data, n_heads * d, r.seed ^ 0x5eedull);
  std::vector<float> out(n_heads * d), out_f32(n_heads * d);
  const auto step = [&](const KvCache& cache, float* o, ComputeMode mode) {
    attend({.q = q.data(),
            .n_queries = 1,
            .first_pos = tokens - 1,
            .n_heads = n_heads,
            .kv = cache.view(),
            .out = o},
           r.isa, r.threads, mode);
  };
  step(reduced, out.data(), r.compute);
  step(exact, out_f32.data(), ComputeMode::exact);
  AttnAccuracy a;
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(out[i]) - out_f32[i]));
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(out_f32[i])));
    if (std::isnan(out[i])) max_diff = std::numeric_limits<double>::infinity();
  }
  a.rel_error = max_ref > 0 ? max_diff / max_ref : max_diff;
  const std::vector<double> p = attention_weights(reduced.view(), q, n_heads, tokens, r.threads);
  const std::vector<double> p_f32 = attention_weights(exact.view(), q, n_heads, tokens, r.threads);
  double kl = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p_f32[i] > 0) kl += p_f32[i] * std::log(p_f32[i] / std::max(p[i], 1e-300));
  }
  a.weight_kl = kl / static_cast<double>(n_heads);
  return a;
}

}  // namespace kvscope
