#include "engine/mla_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/number_formats.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {
namespace {

float dot(const float* a, const float* b, std::size_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void axpy(float a, const float* x, float* y, std::size_t n) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// acc[0 … w.cols) += a · row r of w, each element widened to f32 (exact).
void add_scaled_row(const WeightsView& w, std::size_t r, float a, float* acc) {
  if (w.dtype == WeightDtype::f32) {
    return axpy(a, static_cast<const float*>(w.data) + r * w.cols, acc, w.cols);
  }
  const std::uint16_t* bits = static_cast<const std::uint16_t*>(w.data) + r * w.cols;
  if (w.dtype == WeightDtype::bf16) {
    for (std::size_t i = 0; i < w.cols; ++i) acc[i] += a * bf16_bits_to_f32(bits[i]);
  } else {
    for (std::size_t i = 0; i < w.cols; ++i) acc[i] += a * f16_bits_to_f32(bits[i]);
  }
}

// Rows [first, first + count) of w as a matrix of their own.
WeightsView row_block(const WeightsView& w, std::size_t first, std::size_t count) {
  const auto* bytes = static_cast<const std::byte*>(w.data);
  return {bytes + first * w.cols * weight_element_bytes(w.dtype), w.dtype, count, w.cols};
}

// One chunk's share of every head's softmax: running max m, sum l, Σ p·latent (acc).
struct Partial {
  std::vector<float> m, l, acc;  // [heads], [heads], [heads × kv_lora_rank]
};

}  // namespace

void rope_interleaved(float* x, std::size_t n_vectors, std::size_t stride, std::size_t dim,
                      std::size_t pos, const double* inv_freq) {
  for (std::size_t i = 0; i < dim / 2; ++i) {
    // Angles in double, as rope_table_ref: pos · freq is large at long contexts.
    const double angle = static_cast<double>(pos) * inv_freq[i];
    const auto c = static_cast<float>(std::cos(angle));
    const auto s = static_cast<float>(std::sin(angle));
    for (std::size_t v = 0; v < n_vectors; ++v) {
      float* p = x + v * stride + 2 * i;
      const float re = p[0], im = p[1];
      p[0] = re * c - im * s;
      p[1] = re * s + im * c;
    }
  }
}

MlaAttention::MlaAttention(const LayerConfig& config, int threads)
    : c_(config),
      threads_(threads),
      capacity_(config.capacity()),
      stride_(round_up_to_cache_line(config.mla_row_width() * sizeof(float)) / sizeof(float)) {
  if (!config.is_mla()) throw std::invalid_argument("MlaAttention needs an MLA layer config");
  require_memory(static_cast<std::uint64_t>(capacity_) * stride_ * sizeof(float),
                 "MLA latent cache");
  cache_ = AlignedBuffer(capacity_ * stride_ * sizeof(float), "MLA latent cache");
}

void MlaAttention::append(const float* rows, std::size_t n) {
  if (n > capacity_ - size_) {
    throw std::length_error("MLA latent cache holds " + std::to_string(size_) + " of " +
                            std::to_string(capacity_) + " tokens, " + std::to_string(n) +
                            " more do not fit");
  }
  const std::size_t width = c_.mla_row_width();
  for (std::size_t i = 0; i < n; ++i) {
    std::memcpy(cache_.as<float>() + (size_ + i) * stride_, rows + i * width,
                width * sizeof(float));
  }
  size_ += n;
}

void MlaAttention::project_inputs(const float* h, std::size_t n, const LayerWeights& w,
                                  Projector& project, std::vector<float>& q,
                                  std::vector<float>& rows) {
  const std::size_t heads = c_.n_heads(), qk = c_.qk_head_dim(), nope = c_.qk_nope_head_dim();
  const std::size_t lora = c_.kv_lora_rank(), rope = c_.qk_rope_head_dim();
  const std::size_t width = c_.mla_row_width();
  q.resize(n * heads * qk);
  if (c_.q_lora_rank() == 0) {
    project(h, w.wq.view(), n, q.data());
  } else {
    std::vector<float> a(n * c_.q_lora_rank());
    project(h, w.wq_a.view(), n, a.data());
    rmsnorm_ref(a.data(), w.q_a_norm.data(), n, c_.q_lora_rank(), kMlaLatentNormEps, a.data());
    project(a.data(), w.wq_b.view(), n, q.data());
  }
  rows.resize(n * width);
  project(h, w.wkv_a.view(), n, rows.data());
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t pos = size_ + i;
    float* row = rows.data() + i * width;
    rmsnorm_ref(row, w.kv_a_norm.data(), 1, lora, kMlaLatentNormEps, row);
    rope_interleaved(row + lora, 1, 0, rope, pos, c_.rope_inv_freq().data());
    rope_interleaved(q.data() + i * heads * qk + nope, heads, qk, rope, pos,
                     c_.rope_inv_freq().data());
  }
}

void MlaAttention::forward(const float* h, std::size_t n, const LayerWeights& w, Projector& project,
                           float* heads) {
  if (n > capacity_ - size_) {
    throw std::length_error("MLA latent cache holds " + std::to_string(size_) + " of " +
                            std::to_string(capacity_) + " tokens, " + std::to_string(n) +
                            " more do not fit");
  }
  std::vector<float> q, rows;
  project_inputs(h, n, w, project, q, rows);
  append(rows.data(), n);
  if (n == 1) {
    attend_absorbed(q.data(), n, w, project, heads);
  } else {
    attend_plain(q.data(), n, w, project, heads);
  }
}

void MlaAttention::attend_absorbed(const float* q, std::size_t n, const LayerWeights& w,
                                   Projector& project, float* heads) {
  const std::size_t H = c_.n_heads(), qk = c_.qk_head_dim(), nope = c_.qk_nope_head_dim();
  const std::size_t L = c_.kv_lora_rank(), R = c_.qk_rope_head_dim(), V = c_.v_head_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk));
  const WeightsView kv_b = w.wkv_b.view();
  std::vector<float> q_lat(H * L), q_pe(H * R), latent(H * L);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t keys = size_ - n + i + 1;
    // q̃_h = W_UK_hᵀ q_nope_h, and the scale folded into both query parts.
    std::fill(q_lat.begin(), q_lat.end(), 0.0f);
    for (std::size_t h = 0; h < H; ++h) {
      const float* qh = q + (i * H + h) * qk;
      for (std::size_t d = 0; d < nope; ++d)
        add_scaled_row(kv_b, h * (nope + V) + d, qh[d] * scale, q_lat.data() + h * L);
      for (std::size_t r = 0; r < R; ++r) q_pe[h * R + r] = qh[nope + r] * scale;
    }
    attend_latent(q_lat.data(), q_pe.data(), keys, latent.data());
    // out_h = W_UV_h ō_h.
    for (std::size_t h = 0; h < H; ++h) {
      project(latent.data() + h * L, row_block(kv_b, h * (nope + V) + nope, V), 1,
              heads + (i * H + h) * V);
    }
  }
}

void MlaAttention::attend_latent(const float* q_lat, const float* q_pe, std::size_t keys,
                                 float* latent) const {
  const std::size_t H = c_.n_heads(), L = c_.kv_lora_rank(), R = c_.qk_rope_head_dim();
  // Each chunk of keys: scores of every head, then every head's Σ p·c over the rows.
  const std::size_t chunks = (keys + kChunk - 1) / kChunk;
  std::vector<Partial> parts(chunks);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (long ci = 0; ci < static_cast<long>(chunks); ++ci) {
    const std::size_t first = static_cast<std::size_t>(ci) * kChunk;
    const std::size_t count = std::min(kChunk, keys - first);
    Partial& p = parts[static_cast<std::size_t>(ci)];
    p.m.assign(H, -std::numeric_limits<float>::infinity());
    p.l.assign(H, 0.0f);
    p.acc.assign(H * L, 0.0f);
    std::vector<float> s(count * H);
    for (std::size_t j = 0; j < count; ++j) {
      const float* row = this->row(first + j);
      for (std::size_t h = 0; h < H; ++h) {
        const float score = dot(q_lat + h * L, row, L) + dot(q_pe + h * R, row + L, R);
        s[j * H + h] = score;
        p.m[h] = std::max(p.m[h], score);
      }
    }
    for (std::size_t j = 0; j < count; ++j) {
      const float* row = this->row(first + j);
      for (std::size_t h = 0; h < H; ++h) {
        const float e = std::exp(s[j * H + h] - p.m[h]);
        p.l[h] += e;
        axpy(e, row, p.acc.data() + h * L, L);
      }
    }
  }
  // Merge the chunks in order: rescale each by e^(m_c − M).
  for (std::size_t h = 0; h < H; ++h) {
    float m = -std::numeric_limits<float>::infinity();
    for (const Partial& p : parts) m = std::max(m, p.m[h]);
    float l = 0;
    float* out = latent + h * L;
    std::fill(out, out + L, 0.0f);
    for (const Partial& p : parts) {
      const float f = std::exp(p.m[h] - m);
      l += f * p.l[h];
      axpy(f, p.acc.data() + h * L, out, L);
    }
    for (std::size_t e = 0; e < L; ++e) out[e] /= l;
  }
}

std::uint64_t mla_decode_flops(std::uint64_t n_heads, std::uint64_t kv_lora_rank,
                               std::uint64_t qk_rope_head_dim, std::uint64_t tokens) {
  return 2 * n_heads * (2 * kv_lora_rank + qk_rope_head_dim) * tokens;
}

void MlaAttention::attend_plain(const float* q, std::size_t n, const LayerWeights& w,
                                Projector& project, float* heads) {
  const std::size_t H = c_.n_heads(), qk = c_.qk_head_dim(), nope = c_.qk_nope_head_dim();
  const std::size_t L = c_.kv_lora_rank(), R = c_.qk_rope_head_dim(), V = c_.v_head_dim();
  const std::size_t T = size_, kv_width = H * (nope + V);
  const float scale = 1.0f / std::sqrt(static_cast<float>(qk));
  // Every cached latent expanded: kv [T × n_heads·(nope + v)].
  std::vector<float> latents(T * L), kv(T * kv_width);
  for (std::size_t j = 0; j < T; ++j) std::memcpy(&latents[j * L], row(j), L * sizeof(float));
  project(latents.data(), w.wkv_b.view(), T, kv.data());
  const auto tasks = static_cast<long>(n * H);
#pragma omp parallel for num_threads(threads_) schedule(static)
  for (long task = 0; task < tasks; ++task) {
    const std::size_t i = static_cast<std::size_t>(task) / H,
                      h = static_cast<std::size_t>(task) % H;
    const std::size_t keys = T - n + i + 1;
    const float* qh = q + (i * H + h) * qk;
    std::vector<float> s(keys);
    float m = -std::numeric_limits<float>::infinity();
    for (std::size_t j = 0; j < keys; ++j) {
      s[j] = (dot(qh, &kv[j * kv_width + h * (nope + V)], nope) + dot(qh + nope, row(j) + L, R)) *
             scale;
      m = std::max(m, s[j]);
    }
    float l = 0;
    for (float& x : s) l += (x = std::exp(x - m));
    float* out = heads + (i * H + h) * V;
    std::fill(out, out + V, 0.0f);
    for (std::size_t j = 0; j < keys; ++j)
      axpy(s[j] / l, &kv[j * kv_width + h * (nope + V) + nope], out, V);
  }
}

}  // namespace kvscope
