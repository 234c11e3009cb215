#include "engine/layer_config.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"
#include "engine/kv_footprint.hpp"

namespace kvscope {
namespace {

std::size_t positive(std::int64_t value, const char* name) {
  if (value < 1) {
    throw std::invalid_argument(std::string(name) + " must be at least 1, got " +
                                std::to_string(value));
  }
  return static_cast<std::size_t>(value);
}

float positive_finite(double value, const char* name) {
  if (!(value > 0.0) || !std::isfinite(static_cast<float>(value))) {
    throw std::invalid_argument(std::string(name) + " must be a positive finite number, got " +
                                std::to_string(value));
  }
  return static_cast<float>(value);
}

}  // namespace

LayerConfig::LayerConfig(const LayerShape& s)
    : hidden_size_(positive(s.hidden_size, "hidden_size")),
      n_heads_(positive(s.n_heads, "n_heads")),
      n_kv_heads_(positive(s.n_kv_heads, "n_kv_heads")),
      head_dim_(positive(s.head_dim, "head_dim")),
      ffn_size_(positive(s.ffn_size, "ffn_size")),
      capacity_(positive(s.capacity, "capacity")),
      rms_norm_eps_(positive_finite(s.rms_norm_eps, "rms_norm_eps")),
      rope_theta_(positive_finite(s.rope_theta, "rope_theta")),
      qkv_bias_(s.qkv_bias),
      o_bias_(s.o_bias),
      qk_norm_(s.qk_norm),
      sliding_window_(s.sliding_window == 0 ? 0 : positive(s.sliding_window, "sliding_window")) {
  if (n_heads_ % n_kv_heads_ != 0) {
    throw std::invalid_argument("n_heads (" + std::to_string(n_heads_) +
                                ") must be a multiple of n_kv_heads (" +
                                std::to_string(n_kv_heads_) + ")");
  }
  if (head_dim_ % 2 != 0) {
    throw std::invalid_argument("head_dim must be even for rotate-half RoPE, got " +
                                std::to_string(head_dim_));
  }
  if (s.mla.kv_lora_rank != 0) set_mla(s);
  rope_inv_freq_ = rope_inv_frequencies(head_dim_, s.rope_theta, s.rope_scaling);
  // Evaluate every byte count once so overflow is reported here, not mid-computation.
  if (is_mla()) {
    (void)kv_cache_bytes(KvDtype::f32);
  } else {
    for (KvDtype t : {KvDtype::f32, KvDtype::int8}) (void)kv_cache_bytes(t);
  }
  (void)weight_bytes();
}

void LayerConfig::set_mla(const LayerShape& s) {
  const MlaShape& m = s.mla;
  kv_lora_rank_ = positive(m.kv_lora_rank, "kv_lora_rank");
  q_lora_rank_ = m.q_lora_rank == 0 ? 0 : positive(m.q_lora_rank, "q_lora_rank");
  qk_nope_ = positive(m.qk_nope_head_dim, "qk_nope_head_dim");
  v_head_dim_ = positive(m.v_head_dim, "v_head_dim");
  const std::size_t rope = positive(m.qk_rope_head_dim, "qk_rope_head_dim");
  if (head_dim_ != rope || n_kv_heads_ != n_heads_) {
    throw std::invalid_argument("MLA needs head_dim = qk_rope_head_dim (" + std::to_string(rope) +
                                ", got " + std::to_string(head_dim_) +
                                ") and n_kv_heads = n_heads (" + std::to_string(n_heads_) +
                                ", got " + std::to_string(n_kv_heads_) + ")");
  }
  if (qkv_bias_ || o_bias_ || qk_norm_ || sliding_window_ > 0) {
    throw std::invalid_argument(
        "MLA with biases, q/k norms or a sliding window is not implemented");
  }
}

std::uint64_t LayerConfig::kv_cache_bytes(KvTypes dtype) const {
  if (is_mla()) {
    if (dtype != KvTypes(KvDtype::f32)) {
      throw std::invalid_argument("MLA's latent cache holds f32 only, not " +
                                  std::string(to_string(dtype)));
    }
    return checked_mul(checked_mul(capacity_, mla_row_width(), "MLA cache size"), sizeof(float),
                       "MLA cache bytes");
  }
  return kv_footprint({.n_kv_heads = static_cast<std::int64_t>(n_kv_heads_),
                       .head_dim = static_cast<std::int64_t>(head_dim_),
                       .tokens = static_cast<std::int64_t>(cache_rows()),
                       .dtype = dtype})
      .total_bytes;
}

std::uint64_t LayerConfig::weight_bytes(WeightDtype dtype) const {
  if (is_mla()) return mla_weight_bytes(dtype);
  const std::uint64_t q = checked_mul(hidden_size_, q_width(), "W_Q size");
  const std::uint64_t kv = checked_mul(hidden_size_, kv_width(), "W_K size");
  const std::uint64_t mlp =
      checked_mul(checked_mul(hidden_size_, ffn_size_, "MLP size"), 3, "MLP size");
  std::uint64_t elements = checked_add(checked_mul(q, 2, "W_Q + W_O"),
                                       checked_mul(kv, 2, "W_K + W_V"), "attention weights");
  elements = checked_add(elements, mlp, "layer weights");
  // The small vectors (norms, biases) are kept in f32 whatever the projections' type.
  std::uint64_t small = 2 * hidden_size_;
  if (qkv_bias_) small = checked_add(small, q_width() + 2 * kv_width(), "layer weights");
  if (o_bias_) small = checked_add(small, hidden_size_, "layer weights");
  if (qk_norm_) small = checked_add(small, 2 * head_dim_, "layer weights");
  return checked_add(checked_mul(elements, weight_element_bytes(dtype), "layer weight bytes"),
                     checked_mul(small, sizeof(float), "layer weight bytes"), "layer weight bytes");
}

// q_proj [n_heads·qk_head_dim × hidden] or q_a_proj [q_lora × hidden] + q_b_proj
// [n_heads·qk_head_dim × q_lora]; kv_a_proj_with_mqa [kv_lora + rope × hidden]; kv_b_proj
// [n_heads·(nope + v) × kv_lora]; o_proj [hidden × n_heads·v]; the MLP; and in f32 the two
// layer norms, kv_a_layernorm and (with q_lora) q_a_layernorm.
std::uint64_t LayerConfig::mla_weight_bytes(WeightDtype dtype) const {
  const std::uint64_t q_out = checked_mul(n_heads_, qk_head_dim(), "MLA q width");
  const std::uint64_t q =
      q_lora_rank_ == 0
          ? checked_mul(hidden_size_, q_out, "q_proj size")
          : checked_add(checked_mul(hidden_size_, q_lora_rank_, "q_a_proj size"),
                        checked_mul(q_lora_rank_, q_out, "q_b_proj size"), "MLA q weights");
  const std::uint64_t kv_a = checked_mul(hidden_size_, mla_row_width(), "kv_a_proj size");
  const std::uint64_t kv_b = checked_mul(
      kv_lora_rank_, checked_mul(n_heads_, qk_nope_ + v_head_dim_, "kv_b width"), "kv_b size");
  const std::uint64_t o = checked_mul(hidden_size_, o_width(), "o_proj size");
  const std::uint64_t mlp =
      checked_mul(checked_mul(hidden_size_, ffn_size_, "MLP size"), 3, "MLP size");
  std::uint64_t elements = checked_add(q, kv_a, "attention weights");
  for (std::uint64_t part : {kv_b, o, mlp}) elements = checked_add(elements, part, "layer weights");
  const std::uint64_t small = 2 * hidden_size_ + kv_lora_rank_ + q_lora_rank_;
  return checked_add(checked_mul(elements, weight_element_bytes(dtype), "layer weight bytes"),
                     checked_mul(small, sizeof(float), "layer weight bytes"), "layer weight bytes");
}

}  // namespace kvscope
