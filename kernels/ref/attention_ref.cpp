#include "kernels/ref/attention_ref.hpp"

#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/ref/kv_row_ref.hpp"
#include "kernels/ref/softmax_ref.hpp"

namespace kvscope {

void attend_ref(const AttentionProblem& p, int threads) {
  const KvView& kv = p.kv;
  const std::size_t d = kv.head_dim;
  const std::size_t group = p.n_heads / kv.n_kv_heads;  // query heads per kv head
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const auto n_tasks = static_cast<long>(p.n_queries * p.n_heads);

#pragma omp parallel num_threads(threads)
  {
    std::vector<float> scores(p.first_pos + p.n_queries);
    std::vector<float> row(d);
#pragma omp for schedule(dynamic)
    for (long task = 0; task < n_tasks; ++task) {
      const std::size_t i = static_cast<std::size_t>(task) / p.n_heads;  // query row
      const std::size_t h = static_cast<std::size_t>(task) % p.n_heads;  // query head
      const std::size_t kv_head = h / group;
      const std::size_t n_keys = p.first_pos + i + 1;  // causal: keys after the query unread
      const float* q = p.q + (i * p.n_heads + h) * d;
      float* out = p.out + (i * p.n_heads + h) * d;

      for (std::size_t t = 0; t < n_keys; ++t) {
        decode_row_ref(kv.k_dtype, kv.k_row(kv_head, t), kv.k_row_scale(kv_head, t), d, row.data());
        float dot = 0.0f;
        for (std::size_t j = 0; j < d; ++j) dot += q[j] * row[j];
        scores[t] = dot * scale;
      }
      softmax_ref(scores.data(), n_keys);

      for (std::size_t j = 0; j < d; ++j) out[j] = 0.0f;
      for (std::size_t t = 0; t < n_keys; ++t) {
        decode_row_ref(kv.v_dtype, kv.v_row(kv_head, t), kv.v_row_scale(kv_head, t), d, row.data());
        for (std::size_t j = 0; j < d; ++j) out[j] += scores[t] * row[j];
      }
    }
  }
}

}  // namespace kvscope
