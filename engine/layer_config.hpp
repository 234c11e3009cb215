#pragma once
// The shape and hyper-parameters of one Llama-style decoder layer, and the few fields by
// which the families kvscope runs (Llama 2/3/3.1, Mistral, Qwen2/2.5, Qwen3, DeepSeek-V2's
// dense layers) differ.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/rope_frequencies.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

// DeepSeek-V2's multi-head latent attention (MLA): kv_lora_rank > 0 switches it on. Queries
// come from q_proj, or from q_b_proj(RMSNorm(q_a_proj(x))) when q_lora_rank > 0; keys and
// values of every head are expanded from one shared latent of kv_lora_rank values, and one
// roped key part of qk_rope_head_dim values is shared by all heads (engine/mla_attention.hpp).
struct MlaShape {
  std::int64_t kv_lora_rank = 0;  // 0: not MLA
  std::int64_t q_lora_rank = 0;   // 0: q_proj straight from the hidden state
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

// Plain, unvalidated parameters, as read from flags or a config file.
struct LayerShape {
  std::int64_t hidden_size = 4096;
  std::int64_t n_heads = 32;
  std::int64_t n_kv_heads = 32;
  std::int64_t head_dim = 128;  // need not be hidden_size / n_heads
  std::int64_t ffn_size = 11008;
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;
  std::int64_t capacity = 2048;  // positions the layer can hold (0 … capacity − 1)
  // What changes the math from one family to another; all off is a Llama 2/3 layer.
  RopeScaling rope_scaling;         // Llama 3.1's frequency rule, or none
  bool qkv_bias = false;            // q, k, v projections add a bias (Qwen2, attention_bias)
  bool o_bias = false;              // o_proj adds a bias (Llama/Qwen3 attention_bias)
  bool qk_norm = false;             // RMSNorm over head_dim on each q and k head (Qwen3)
  std::int64_t sliding_window = 0;  // W > 0: query i sees keys j with 0 ≤ i − j < W (Mistral)
  // MLA (DeepSeek-V2): n_kv_heads = n_heads, head_dim = qk_rope_head_dim (the RoPE table's
  // width, as transformers sets it); no biases, q/k norms or window.
  MlaShape mla;
};

// A validated LayerShape. The constructor throws std::invalid_argument naming the
// offending value (sizes below 1, n_heads not a multiple of n_kv_heads, odd head_dim,
// non-positive eps or theta, a negative window, bad rope_scaling parameters, MLA sizes
// below 1 or an MLA layer with another family's feature) or std::overflow_error if a byte
// count overflows 64 bits.
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
  // head_dim / 2 RoPE inverse frequencies (theta and rope_scaling applied).
  const std::vector<double>& rope_inv_freq() const { return rope_inv_freq_; }
  bool qkv_bias() const { return qkv_bias_; }
  bool o_bias() const { return o_bias_; }
  bool qk_norm() const { return qk_norm_; }
  std::size_t sliding_window() const { return sliding_window_; }  // 0: none
  // Rows the KV cache keeps per kv head: the capacity, or only the last W tokens (a ring)
  // when a window W shorter than the capacity is active.
  std::size_t cache_rows() const {
    return sliding_window_ > 0 && sliding_window_ < capacity_ ? sliding_window_ : capacity_;
  }

  // MLA (kv_lora_rank > 0); the sizes below are 0 when it is off.
  bool is_mla() const { return kv_lora_rank_ > 0; }
  std::size_t kv_lora_rank() const { return kv_lora_rank_; }
  std::size_t q_lora_rank() const { return q_lora_rank_; }  // 0: q_proj
  std::size_t qk_nope_head_dim() const { return qk_nope_; }
  std::size_t qk_rope_head_dim() const { return is_mla() ? head_dim_ : 0; }
  std::size_t v_head_dim() const { return v_head_dim_; }
  std::size_t qk_head_dim() const { return qk_nope_ + qk_rope_head_dim(); }
  // Floats the latent cache keeps per token: the normalized latent and the roped k_pe.
  std::size_t mla_row_width() const { return kv_lora_rank_ + qk_rope_head_dim(); }
  // Width of the heads W_O reads: n_heads × head_dim, or n_heads × v_head_dim for MLA.
  std::size_t o_width() const { return is_mla() ? n_heads_ * v_head_dim_ : q_width(); }

  std::size_t q_width() const { return n_heads_ * head_dim_; }       // all query heads
  std::size_t kv_width() const { return n_kv_heads_ * head_dim_; }   // all kv heads
  std::size_t group_size() const { return n_heads_ / n_kv_heads_; }  // query heads per kv head
  bool is_mha() const { return n_kv_heads_ == n_heads_; }
  bool is_mqa() const { return n_kv_heads_ == 1 && n_heads_ > 1; }

  // Bytes of this layer's KV cache at full capacity (cache_rows(); K, V and int8 scales). MLA:
  // the latent cache, capacity × mla_row_width() f32 values; it holds f32 only, so another
  // type throws std::invalid_argument naming it.
  std::uint64_t kv_cache_bytes(KvTypes types) const;
  // Bytes of the layer's weights: projections and MLP in `dtype`; norms and biases in f32.
  std::uint64_t weight_bytes(WeightDtype dtype = WeightDtype::f32) const;

 private:
  void set_mla(const LayerShape& shape);  // validates and keeps shape.mla
  std::uint64_t mla_weight_bytes(WeightDtype dtype) const;

  std::size_t hidden_size_, n_heads_, n_kv_heads_, head_dim_, ffn_size_, capacity_;
  float rms_norm_eps_, rope_theta_;
  std::vector<double> rope_inv_freq_;
  bool qkv_bias_, o_bias_, qk_norm_;
  std::size_t sliding_window_;
  std::size_t kv_lora_rank_ = 0, q_lora_rank_ = 0, qk_nope_ = 0, v_head_dim_ = 0;
};

}  // namespace kvscope
