#include "engine/attention_trace.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "kernels/ref/softmax_ref.hpp"

namespace kvscope {
namespace {

void require_finite(const std::vector<float>& v, const std::string& name) {
  for (float x : v) {
    if (!std::isfinite(x)) throw std::invalid_argument(name + " holds a non-finite value");
  }
}

}  // namespace

AttentionTrace trace_attention(const TraceInput& in) {
  const std::size_t n = in.keys.size();
  if (n == 0) throw std::invalid_argument("attention needs at least one key");
  if (in.values.size() != n) {
    throw std::invalid_argument(std::to_string(n) + " keys but " +
                                std::to_string(in.values.size()) +
                                " values: each key needs one value");
  }
  const std::size_t d = in.query.size();
  if (d == 0) throw std::invalid_argument("the query is empty");
  require_finite(in.query, "the query");
  for (std::size_t t = 0; t < n; ++t) {
    if (in.keys[t].size() != d) {
      throw std::invalid_argument("key " + std::to_string(t + 1) + " has " +
                                  std::to_string(in.keys[t].size()) +
                                  " elements but the query has " + std::to_string(d));
    }
    if (in.values[t].size() != in.values[0].size() || in.values[t].empty()) {
      throw std::invalid_argument("value " + std::to_string(t + 1) + " has " +
                                  std::to_string(in.values[t].size()) + " elements, value 1 has " +
                                  std::to_string(in.values[0].size()));
    }
    require_finite(in.keys[t], "key " + std::to_string(t + 1));
    require_finite(in.values[t], "value " + std::to_string(t + 1));
  }
  const std::int64_t d_head = in.d_head.value_or(static_cast<std::int64_t>(d));
  if (d_head < 1) {
    throw std::invalid_argument("d_head must be at least 1, got " + std::to_string(d_head));
  }
  const std::int64_t position = in.position.value_or(static_cast<std::int64_t>(n) - 1);
  if (position < 0) {
    throw std::invalid_argument("position must be 0 or more, got " + std::to_string(position));
  }

  AttentionTrace tr;
  tr.d_head = static_cast<std::size_t>(d_head);
  tr.scale_divisor = in.scale ? std::sqrt(static_cast<float>(d_head)) : 1.0f;
  tr.position = static_cast<std::size_t>(position);
  tr.visible_keys = std::min(n, tr.position + 1);
  for (std::size_t t = 0; t < n; ++t) {
    const float raw =
        std::inner_product(in.query.begin(), in.query.end(), in.keys[t].begin(), 0.0f);
    tr.raw_scores.push_back(raw);
    tr.scaled_scores.push_back(raw / tr.scale_divisor);
    tr.masked_scores.push_back(t < tr.visible_keys ? raw / tr.scale_divisor
                                                   : -std::numeric_limits<float>::infinity());
  }
  tr.weights = tr.masked_scores;
  softmax_ref(tr.weights.data(), n);
  tr.weight_sum = std::accumulate(tr.weights.begin(), tr.weights.end(), 0.0f);
  tr.output.assign(in.values[0].size(), 0.0f);
  for (std::size_t t = 0; t < tr.visible_keys; ++t) {  // masked keys are never read
    for (std::size_t j = 0; j < tr.output.size(); ++j)
      tr.output[j] += tr.weights[t] * in.values[t][j];
  }
  return tr;
}

std::string explain_trace(const AttentionTrace& tr) {
  auto percent = [](float w) {
    return std::to_string(static_cast<int>(std::lround(w * 100))) + "%";
  };
  if (tr.visible_keys == 1) {
    return "Only key 1 is visible to this query, so all the weight (100%) goes to it and the "
           "output is a copy of v1.";
  }
  std::string parts;
  for (std::size_t t = 0; t < tr.visible_keys; ++t) {
    if (t > 0) parts += (t + 1 == tr.visible_keys) ? " and " : ", ";
    parts += percent(tr.weights[t]) + " of v" + std::to_string(t + 1);
  }
  const float top = *std::max_element(tr.weights.begin(), tr.weights.end());
  std::string sentence = "The output is a blend: " + parts;
  sentence += top > 0.995f ? " — almost a copy of one value, since one score dominates."
                           : ", not a copy of any single value.";
  if (tr.visible_keys < tr.weights.size()) {
    sentence += " Keys after the query's position are masked and get weight 0.";
  }
  return sentence;
}

}  // namespace kvscope
