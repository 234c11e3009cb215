#pragma once
// The shape and hyper-parameters of one Llama-style decoder layer.
#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.hpp"

namespace kvscope {

// Plain, unvalidated parameters, as read from flags or a config file.
struct LayerShape {
  std::int64_t hidden_size = 4096;
  std::int64_t n_heads = 32;
  std::int64_t n_kv_heads = 32;
  std::int64_t head_dim = 128;  // need not be hidden_size / n_heads
  std::int64_t ffn_size = 11008;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::int64_t capacity = 2048;  // KV cache capacity in tokens
};

// A validated LayerShape. The constructor throws std::invalid_argument naming the
// offending value (sizes below 1, n_heads not a multiple of n_kv_heads, odd head_dim,
// non-positive eps or theta) or std::overflow_error if a byte count overflows 64 bits.
class LayerConfig {
 public:
  explicit LayerConfig(const LayerShape& shape);

  std::size_t hidden_size() const { return hidden_size_; }
  std::size_t n_heads() const { return n_heads_; }
  std::size_t n_kv_heads() const { return n_kv_heads_; }
  std::size_t head_dim() const { return head_dim_; }
  std::size_t ffn_size() const { return ffn_size_; }
  std::size_t capacity() const { return capacity_; }
  float rms_norm_eps() const { return rms_norm_eps_; }
  float rope_theta() const { return rope_theta_; }

  std::size_t q_width() const { return n_heads_ * head_dim_; }       // all query heads
  std::size_t kv_width() const { return n_kv_heads_ * head_dim_; }   // all kv heads
  std::size_t group_size() const { return n_heads_ / n_kv_heads_; }  // query heads per kv head
  bool is_mha() const { return n_kv_heads_ == n_heads_; }
  bool is_mqa() const { return n_kv_heads_ == 1 && n_heads_ > 1; }

  // Bytes of this layer's KV cache at full capacity (K, V and int8 scales).
  std::uint64_t kv_cache_bytes(KvTypes types) const;
  // Bytes of the layer's f32 weights (projections, MLP, two norms).
  std::uint64_t weight_bytes() const;

 private:
  std::size_t hidden_size_, n_heads_, n_kv_heads_, head_dim_, ffn_size_, capacity_;
  float rms_norm_eps_, rope_theta_;
};

}  // namespace kvscope
