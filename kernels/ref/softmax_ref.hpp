#pragma once
// Scalar reference softmax over one score row, in place.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

namespace kvscope {

// row[i] ← exp(row[i] − max) / Σ exp(row[j] − max). Masked entries hold −inf and come out
// exactly 0. Returns the sum of the exponentials (before normalization).
inline float softmax_ref(float* row, std::size_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < n; ++i) max = std::max(max, row[i]);
  float sum = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    row[i] = std::exp(row[i] - max);
    sum += row[i];
  }
  for (std::size_t i = 0; i < n; ++i) row[i] /= sum;
  return sum;
}

}  // namespace kvscope
