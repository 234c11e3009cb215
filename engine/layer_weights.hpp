#pragma once
// The weights of one decoder layer: projections [out × in] row-major as Hugging Face stores
// them, in the checkpoint's type (f32, bf16, f16); the two norm vectors in f32.
#include <cstdint>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/weight_matrix.hpp"

namespace kvscope {

struct LayerWeights {
  WeightMatrix wq;               // [n_heads·head_dim × hidden]
  WeightMatrix wk;               // [n_kv_heads·head_dim × hidden]
  WeightMatrix wv;               // [n_kv_heads·head_dim × hidden]
  WeightMatrix wo;               // [hidden × n_heads·head_dim]
  WeightMatrix w_gate;           // [ffn × hidden]
  WeightMatrix w_up;             // [ffn × hidden]
  WeightMatrix w_down;           // [hidden × ffn]
  std::vector<float> attn_norm;  // [hidden], RMSNorm before attention
  std::vector<float> mlp_norm;   // [hidden], RMSNorm before the MLP
  // Present only where the config says so (LayerConfig::qkv_bias, o_bias, qk_norm); else empty.
  std::vector<float> bq;      // [n_heads·head_dim]
  std::vector<float> bk;      // [n_kv_heads·head_dim]
  std::vector<float> bv;      // [n_kv_heads·head_dim]
  std::vector<float> bo;      // [hidden]
  std::vector<float> q_norm;  // [head_dim], RMSNorm weight shared by every query head
  std::vector<float> k_norm;  // [head_dim], shared by every kv head
  // MLA (LayerConfig::is_mla()), else empty. An MLA layer keeps q_proj [n_heads·qk_head_dim ×
  // hidden] in wq when q_lora_rank is 0 (else wq is empty), wo is [hidden × n_heads·v_head_dim],
  // and wk, wv are empty.
  WeightMatrix wq_a;             // [q_lora_rank × hidden], q_a_proj
  WeightMatrix wq_b;             // [n_heads·qk_head_dim × q_lora_rank], q_b_proj
  WeightMatrix wkv_a;            // [kv_lora_rank + qk_rope_head_dim × hidden], kv_a_proj_with_mqa
  WeightMatrix wkv_b;            // [n_heads·(qk_nope_head_dim + v_head_dim) × kv_lora_rank]
  std::vector<float> q_a_norm;   // [q_lora_rank], q_a_layernorm
  std::vector<float> kv_a_norm;  // [kv_lora_rank], kv_a_layernorm

  // Deterministic weights from `seed`: projections uniform in ±1/sqrt(in) (so activations
  // keep their scale) rounded to `dtype`, norm weights uniform in [0.9, 1.1], biases (if
  // any) in ±0.5.
  static LayerWeights random(const LayerConfig& config, std::uint64_t seed,
                             WeightDtype dtype = WeightDtype::f32);

  // Every projection and every f32 vector, present or empty (for code that visits them all).
  std::vector<WeightMatrix*> matrices();
  std::vector<const WeightMatrix*> matrices() const;
  std::vector<std::vector<float>*> vectors();

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
