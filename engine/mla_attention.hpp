#pragma once
// DeepSeek-V2's multi-head latent attention (MLA) with its latent cache, as Hugging Face
// transformers' DeepseekV2Attention defines it (modeling_deepseek_v2.py):
//   q = q_proj(h), or q_b_proj(RMSNorm(q_a_proj(h))); per head q = [q_nope | q_pe]
//   (qk_nope_head_dim, qk_rope_head_dim);
//   [c | k_pe] = kv_a_proj_with_mqa(h): c the latent (kv_lora_rank), k_pe one rope key
//   shared by every head; the cache keeps, per token, RMSNorm(c) and roped k_pe;
//   per head [k_nope | v] = W_UKV_h · RMSNorm(c), W_UKV = kv_b_proj [n_heads·(nope + v) ×
//   kv_lora_rank], W_UK_h its first nope rows for head h, W_UV_h the next v rows;
//   RoPE on q_pe and k_pe turns interleaved pairs (2i, 2i+1) by pos · θ^(−2i/rope) (the
//   complex-number form DeepSeek and transformers use);
//   score = (q_nope·k_nope + q_pe·k_pe) / √(nope + rope); causal softmax; out_h = Σ p·v.
// Both latent norms use ε = 1e-6 whatever rms_norm_eps says: transformers builds
// q_a_layernorm and kv_a_layernorm with DeepseekV2RMSNorm's default.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "engine/memory.hpp"
#include "engine/projector.hpp"

namespace kvscope {

inline constexpr float kMlaLatentNormEps = 1e-6f;

class MlaAttention {
 public:
  // Allocates the latent cache: capacity rows of kv_lora_rank + qk_rope_head_dim f32 values,
  // each row starting on a 64-byte boundary. `threads` splits the attention over the keys.
  MlaAttention(const LayerConfig& config, int threads);

  // h: [n × hidden] (the layer's normed input) at positions size() … size() + n − 1.
  // Appends the n latent rows and writes heads [n × n_heads·v_head_dim] (before W_O). One
  // token (decode) takes the absorbed form, several (prefill) the plain form: both compute
  // the same attention. Projections go through `project`.
  void forward(const float* h, std::size_t n, const LayerWeights& w, Projector& project,
               float* heads);

  // The two forms of the attention of the last n tokens of the cache. q: [n × n_heads ·
  // qk_head_dim], q_pe already roped, query i at position size() − n + i, seeing keys
  // 0 … size() − n + i; heads: [n × n_heads·v_head_dim].
  //   absorbed: per head q̃ = W_UK_hᵀ q_nope (kv_lora_rank values); score_j = (q̃·c_j +
  //     q_pe·k_pe_j)·scale; ō = Σ softmax_j c_j; out = W_UV_h ō. The cache is read once for
  //     all heads, in chunks of kChunk keys (online softmax; the chunks merged in order, so
  //     the result does not depend on the thread count).
  //   plain: every cached latent expanded to k_nope and v per head (kv_b_proj), then
  //     ordinary attention.
  void attend_absorbed(const float* q, std::size_t n, const LayerWeights& w, Projector& project,
                       float* heads);
  void attend_plain(const float* q, std::size_t n, const LayerWeights& w, Projector& project,
                    float* heads);

  // The absorbed form's core, the part that reads the cache: for every head h, softmax over
  // keys j < `keys` of q_lat_h·c_j + q_pe_h·k_pe_j (q_lat [n_heads × kv_lora_rank] and
  // q_pe [n_heads × qk_rope_head_dim] already scaled), and latent_h = Σ softmax_j c_j
  // ([n_heads × kv_lora_rank]). 2·n_heads·(2·kv_lora_rank + qk_rope_head_dim) FLOPs per key
  // (mla_decode_flops) against (kv_lora_rank + qk_rope_head_dim) × 4 bytes read.
  void attend_latent(const float* q_lat, const float* q_pe, std::size_t keys, float* latent) const;

  // Appends n rows [n × (kv_lora_rank + qk_rope_head_dim)]: the normed latent, then k_pe
  // already roped. Throws std::length_error, storing nothing, past the capacity.
  void append(const float* rows, std::size_t n);

  std::size_t size() const { return size_; }  // tokens cached
  std::size_t capacity() const { return capacity_; }
  const float* row(std::size_t j) const { return cache_.as<float>() + j * stride_; }
  std::size_t bytes() const { return cache_.bytes(); }  // allocated
  void clear() { size_ = 0; }

  static constexpr std::size_t kChunk = 128;  // keys per partial softmax (~300 KB, in L2)

 private:
  LayerConfig c_;
  int threads_;
  std::size_t capacity_, stride_;  // stride_: floats from one row to the next
  AlignedBuffer cache_;
  std::size_t size_ = 0;

  // q [n × n_heads·qk_head_dim] and new latent rows from h; RoPE applied at their positions.
  void project_inputs(const float* h, std::size_t n, const LayerWeights& w, Projector& project,
                      std::vector<float>& q, std::vector<float>& rows);
};

// FLOPs of attend_latent over `tokens` keys: scores (2·(latent + rope) per key and head) and
// the softmax-weighted sum of the latents (2·latent per key and head).
std::uint64_t mla_decode_flops(std::uint64_t n_heads, std::uint64_t kv_lora_rank,
                               std::uint64_t qk_rope_head_dim, std::uint64_t tokens);

// RoPE on interleaved pairs: for each of n_vectors vectors of `dim` at `x` spaced `stride`
// apart, pair (2i, 2i + 1) turns by pos · inv_freq[i] (dim / 2 frequencies).
void rope_interleaved(float* x, std::size_t n_vectors, std::size_t stride, std::size_t dim,
                      std::size_t pos, const double* inv_freq);

}  // namespace kvscope
