#pragma once
// The f32 weights of one decoder layer, stored [out × in] row-major as Hugging Face does.
#include <cstdint>
#include <vector>

#include "engine/layer_config.hpp"

namespace kvscope {

struct LayerWeights {
  std::vector<float> wq;         // [n_heads·head_dim × hidden]
  std::vector<float> wk;         // [n_kv_heads·head_dim × hidden]
  std::vector<float> wv;         // [n_kv_heads·head_dim × hidden]
  std::vector<float> wo;         // [hidden × n_heads·head_dim]
  std::vector<float> w_gate;     // [ffn × hidden]
  std::vector<float> w_up;       // [ffn × hidden]
  std::vector<float> w_down;     // [hidden × ffn]
  std::vector<float> attn_norm;  // [hidden], RMSNorm before attention
  std::vector<float> mlp_norm;   // [hidden], RMSNorm before the MLP

  // Deterministic weights from `seed`: projections uniform in ±1/sqrt(in) (so activations
  // keep their scale), norm weights uniform in [0.9, 1.1].
  static LayerWeights random(const LayerConfig& config, std::uint64_t seed);

  // Throws std::invalid_argument naming the first tensor whose size does not match `config`.
  void check_shapes(const LayerConfig& config) const;
};

// Fills `out` with values uniform in [lo, hi) from a splitmix64 stream seeded by `seed`
// (identical on every platform, unlike std::uniform_real_distribution).
void fill_uniform(std::vector<float>& out, std::uint64_t seed, float lo, float hi);

}  // namespace kvscope
