#pragma once
// One Llama-style decoder layer with its KV cache: prefill n tokens, decode one at a time.
#include <cstddef>
#include <vector>

#include "engine/kv_cache.hpp"
#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "engine/projector.hpp"
#include "kernels/isa.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

// y = x + Attention(RMSNorm(x)); out = y + down(silu(gate·h) ⊙ up·h), h = RMSNorm(y).
// Attention: Q=hW_Qᵀ, K=hW_Kᵀ, V=hW_Vᵀ, RoPE on q and k, causal softmax(QKᵀ/√head_dim)V per
// head, heads concatenated and projected by W_O. Positions continue from the cache: a
// prefill of n tokens followed by decode steps equals one prefill of them all.
class DecoderLayer {
 public:
  struct Options {
    KvTypes kv_dtype = KvDtype::f32;  // keys and values
    Isa isa = Isa::scalar;
    int threads = 1;
    ComputeMode compute = ComputeMode::exact;  // attention on the CPU's dot units if fast
  };

  DecoderLayer(const LayerConfig& config, LayerWeights weights, Options options);

  // x: [n × hidden_size] at positions cache().size() … + n − 1; returns [n × hidden_size].
  // Throws, with the cache unchanged, if n is 0, the tokens exceed the cache's capacity,
  // or x holds NaN or infinity.
  std::vector<float> prefill(const float* x, std::size_t n);

  // One token x: [hidden_size]: a prefill of one row.
  std::vector<float> decode(const float* x) { return prefill(x, 1); }

  const LayerConfig& config() const { return config_; }
  const KvCache& cache() const { return cache_; }
  void reset() { cache_.clear(); }

  // Appends stand-in context rows k, v [n × n_kv_heads × head_dim] (RoPE already applied)
  // straight to the cache, without computing them: lets a measurement decode at position
  // n without paying for an n-token prefill first.
  void append_context(const float* k, const float* v, std::size_t n) { cache_.append(k, v, n); }

 private:
  LayerConfig config_;
  LayerWeights weights_;
  Options options_;
  KvCache cache_;
  Projector projector_;  // matmul_ref for Isa::scalar, else oneDNN / GEMV
};

}  // namespace kvscope
