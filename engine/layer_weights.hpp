#pragma once
// The weights of one decoder layer: projections [out × in] row-major as Hugging Face stores
// them, in the checkpoint's type (f32, bf16, f16); the two norm vectors in f32.
#include <cstdint>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/weight_matrix.hpp"

namespace kvscope {

struct LayerWeights {
  WeightMatrix wq;         // [n_heads·head_dim × hidden]
  WeightMatrix wk;         // [n_kv_heads·head_dim × hidden]
  WeightMatrix wv;         // [n_kv_heads·head_dim × hidden]
  WeightMatrix wo;         // [hidden × n_heads·head_dim]
  WeightMatrix w_gate;     // [ffn × hidden]
  WeightMatrix w_up;       // [ffn × hidden]
  WeightMatrix w_down;     // [hidden × ffn]
  std::vector<float> attn_norm;  // [hidden], RMSNorm before attention
  std::vector<float> mlp_norm;   // [hidden], RMSNorm before the MLP
  // Present only where the config says so (LayerConfig::qkv_bias, o_bias, qk_norm); else empty.
  std::vector<float> bq;      // [n_heads·head_dim]
  std::vector<float> bk;      // [n_kv_heads·head_dim]
  std::vector<float> bv;      // [n_kv_heads·head_dim]
  std::vector<float> bo;      // [hidden]
  std::vector<float> q_norm;  // [head_dim], RMSNorm weight shared by every query head
  std::vector<float> k_norm;  // [head_dim], shared by every kv head

  // Deterministic weights from `seed`: projections uniform in ±1/sqrt(in) (so activations
  // keep their scale) rounded to `dtype`, norm weights uniform in [0.9, 1.1], biases (if
  // any) in ±0.5.
  static LayerWeights random(const LayerConfig& config, std::uint64_t seed,
                             WeightDtype dtype = WeightDtype::f32);

  // Bytes one decode step reads: every projection in its type plus the f32 vectors.
  std::uint64_t bytes() const;

  // Throws std::invalid_argument naming the first tensor whose size does not match `config`
  // (an optional tensor must be empty exactly when the config does not use it).
  void check_shapes(const LayerConfig& config) const;
};

// Fills `out` with values uniform in [lo, hi) from a splitmix64 stream seeded by `seed`
// (identical on every platform, unlike std::uniform_real_distribution).
void fill_uniform(std::vector<float>& out, std::uint64_t seed, float lo, float hi);

}  // namespace kvscope
