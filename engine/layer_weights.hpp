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

  // Deterministic weights from `seed`: projections uniform in ±1/sqrt(in) (so activations
  // keep their scale) rounded to `dtype`, norm weights uniform in [0.9, 1.1].
  static LayerWeights random(const LayerConfig& config, std::uint64_t seed,
                             WeightDtype dtype = WeightDtype::f32);

  // Bytes one decode step reads: every projection in its type plus the f32 norms.
  std::uint64_t bytes() const;

  // Throws std::invalid_argument naming the first tensor whose size does not match `config`.
  void check_shapes(const LayerConfig& config) const;
};

// Fills `out` with values uniform in [lo, hi) from a splitmix64 stream seeded by `seed`
// (identical on every platform, unlike std::uniform_real_distribution).
void fill_uniform(std::vector<float>& out, std::uint64_t seed, float lo, float hi);

}  // namespace kvscope
