#include "kernels/ref/layer_ops_ref.hpp"

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/number_formats.hpp"

namespace kvscope {

namespace {

template <class Elem, class Widen>
void matmul_rows(const float* x, const Elem* w, std::size_t n, std::size_t in, std::size_t out,
                 float* y, int threads, Widen widen) {
  const auto n_tasks = static_cast<long>(n * out);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long task = 0; task < n_tasks; ++task) {
    const std::size_t r = static_cast<std::size_t>(task) / out;
    const std::size_t c = static_cast<std::size_t>(task) % out;
    const float* xr = x + r * in;
    const Elem* wc = w + c * in;
    float acc = 0.0f;
    for (std::size_t k = 0; k < in; ++k) acc += xr[k] * widen(wc[k]);
    y[r * out + c] = acc;
  }
}

}  // namespace

void matmul_ref(const float* x, const WeightsView& w, std::size_t n, float* y, int threads) {
  switch (w.dtype) {
    case WeightDtype::f32:
      return matmul_rows(x, static_cast<const float*>(w.data), n, w.cols, w.rows, y, threads,
                         [](float v) { return v; });
    case WeightDtype::bf16:
      return matmul_rows(x, static_cast<const std::uint16_t*>(w.data), n, w.cols, w.rows, y,
                         threads, bf16_bits_to_f32);
    case WeightDtype::f16:
      return matmul_rows(x, static_cast<const std::uint16_t*>(w.data), n, w.cols, w.rows, y,
                         threads, f16_bits_to_f32);
  }
}

void rmsnorm_ref(const float* x, const float* weight, std::size_t n, std::size_t width, float eps,
                 float* y) {
  for (std::size_t r = 0; r < n; ++r) {
    const float* xr = x + r * width;
    float sum_sq = 0.0f;
    for (std::size_t i = 0; i < width; ++i) sum_sq += xr[i] * xr[i];
    const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(width) + eps);
    for (std::size_t i = 0; i < width; ++i) y[r * width + i] = xr[i] * inv_rms * weight[i];
  }
}

void rope_ref(float* x, std::size_t n_heads, std::size_t head_dim, std::size_t pos, float theta) {
  std::vector<double> inv_freq(head_dim / 2);
  for (std::size_t i = 0; i < inv_freq.size(); ++i) {
    inv_freq[i] = std::pow(static_cast<double>(theta), -2.0 * i / head_dim);
  }
  rope_table_ref(x, n_heads, head_dim, pos, inv_freq.data());
}

void rope_table_ref(float* x, std::size_t n_heads, std::size_t head_dim, std::size_t pos,
                    const double* inv_freq) {
  const std::size_t half = head_dim / 2;
  for (std::size_t i = 0; i < half; ++i) {
    // Angles in double: pos · freq reaches 1e5 radians at long contexts, where f32 drifts.
    const double angle = static_cast<double>(pos) * inv_freq[i];
    const auto c = static_cast<float>(std::cos(angle));
    const auto s = static_cast<float>(std::sin(angle));
    for (std::size_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const float x1 = v[i];
      const float x2 = v[i + half];
      v[i] = x1 * c - x2 * s;
      v[i + half] = x2 * c + x1 * s;
    }
  }
}

void swiglu_ref(float* gate, const float* up, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace kvscope
