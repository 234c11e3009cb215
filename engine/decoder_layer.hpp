#pragma once
// One Llama-style decoder layer with its KV cache: prefill n tokens, decode one at a time.
#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kv_cache.hpp"
#include "engine/kv_layout.hpp"
#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "engine/mla_attention.hpp"
#include "engine/projector.hpp"
#include "kernels/isa.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

// One sequence's state in a layer: its KV cache and the tokens it has seen. A layer owns one
// (prefill/decode below); a batch brings one per sequence (DecoderLayer::new_sequence()).
struct LayerSequence {
  KvCache cache;             // config.cache_rows() rows: a ring of W under a sliding window W
  std::size_t position = 0;  // tokens seen so far

  void reset() {
    cache.clear();
    position = 0;
  }
};

// y = x + Attention(RMSNorm(x)); out = y + down(silu(gate·h) ⊙ up·h), h = RMSNorm(y).
// Attention: Q=hW_Qᵀ(+b_q), K=hW_Kᵀ(+b_k), V=hW_Vᵀ(+b_v); with qk_norm, RMSNorm over head_dim
// on every q and k head; RoPE on q and k (the config's frequency table); causal
// softmax(QKᵀ/√head_dim)V per head, over the last W keys only with a sliding window W;
// heads concatenated and projected by W_O (+b_o). Positions continue from earlier calls: a
// prefill of n tokens followed by decode steps equals one prefill of them all.
//
// Batches: decode_batch() advances B sequences by one token each in one step. The
// projections and the MLP run once over the [B × hidden] rows (the weights are read once
// for B tokens); attention runs per sequence over its own cache, at its own position
// (ragged). Each sequence's output equals running it alone.
//
// With MLA (config.is_mla(), DeepSeek-V2) attention is MlaAttention over its latent cache
// instead (f32 only; the layer's own sequence only, no batches); the rest of the layer is the
// same.
class DecoderLayer {
 public:
  struct Options {
    KvTypes kv_dtype = KvDtype::f32;  // keys and values
    Isa isa = Isa::scalar;
    int threads = 1;
    ComputeMode compute = ComputeMode::exact;  // attention on the CPU's dot units if fast
    KvLayout kv_layout;  // paged: every sequence's pages come from one pool of the layer's
  };

  DecoderLayer(const LayerConfig& config, LayerWeights weights, Options options);

  // x: [n × hidden_size] at positions position() … + n − 1; returns [n × hidden_size].
  // Throws, with the cache unchanged, if n is 0, the tokens exceed the cache's capacity,
  // or x holds NaN or infinity.
  std::vector<float> prefill(const float* x, std::size_t n) { return prefill(own_, x, n); }

  // One token x: [hidden_size]: a prefill of one row.
  std::vector<float> decode(const float* x) { return prefill(x, 1); }

  // An empty sequence for this layer's batches (a cache of the layer's shape and type).
  LayerSequence new_sequence() const;

  // The same as prefill() and decode(), on `sequence` instead of the layer's own.
  std::vector<float> prefill(LayerSequence& sequence, const float* x, std::size_t n);

  // x: [B × hidden_size], row b the next token of sequences[b]; returns [B × hidden_size].
  // Throws, with every cache unchanged, if B is 0, a sequence appears twice, one is full or
  // was made for another shape, or x holds NaN or infinity.
  std::vector<float> decode_batch(const float* x, const std::vector<LayerSequence*>& sequences);

  const LayerConfig& config() const { return config_; }
  // Wall time spent in attention (scores, softmax, values: not the projections) since
  // construction: what share of a prefill or a step attention takes.
  double attention_seconds() const { return attention_seconds_; }
  // Wall time spent in the seven projections (reading the weights) since construction.
  double projection_seconds() const { return projector_.seconds(); }
  // The layer's own sequence: what prefill(x, n) and decode(x) advance.
  LayerSequence& own_sequence() { return own_; }
  const KvCache& cache() const { return own_.cache; }                  // empty for MLA: see mla()
  const MlaAttention* mla() const { return mla_ ? &*mla_ : nullptr; }  // MLA layers only
  std::size_t position() const { return own_.position; }               // tokens seen so far
  void reset() {
    own_.reset();
    if (mla_) mla_->clear();
  }
  // Allocates and touches the activations (and the projections' scratch) of a forward pass
  // of n rows, as a server does before its first request: the first prefill then pays no
  // page faults (on these VMs 0.14 s of a 0.72 s bf16 prefill of 2,000 tokens).
  void reserve_rows(std::size_t n);

  // Appends stand-in context rows k, v [n × n_kv_heads × head_dim] (RoPE already applied)
  // straight to the cache, without computing them: lets a measurement decode at position
  // n without paying for an n-token prefill first.
  // Not for MLA layers (std::logic_error): their cache holds latents, not k and v.
  void append_context(const float* k, const float* v, std::size_t n) {
    if (mla_) throw std::logic_error("append_context: an MLA layer caches latents, not k and v");
    append_context(own_, k, v, n);
  }
  // Under a sliding window W the cache is a ring: context past W overwrites the oldest rows,
  // as decoding those tokens would. Throws std::length_error, storing nothing, past the
  // capacity.
  void append_context(LayerSequence& sequence, const float* k, const float* v,
                      std::size_t n) const {
    if (n > config_.capacity() - sequence.position) {
      throw std::length_error("append_context: " + std::to_string(sequence.position) + " + " +
                              std::to_string(n) + " tokens exceed the capacity " +
                              std::to_string(config_.capacity()));
    }
    sequence.cache.append_ring(k, v, n);
    sequence.position += n;
  }

  // MLA's counterpart: stand-in latent rows [n × mla_row_width()] (normed latent, then the
  // roped k_pe) straight to the latent cache. Throws std::logic_error for a non-MLA layer.
  void append_latent_context(const float* rows, std::size_t n) {
    if (!mla_) throw std::logic_error("append_latent_context: not an MLA layer");
    mla_->append(rows, n);
    own_.position += n;
  }

 private:
  // An empty cache of the layer's shape, type and layout.
  KvCache make_cache() const;

  // `rows` consecutive rows of x belong to `sequence`, the next tokens after its position.
  struct Run {
    LayerSequence* sequence;
    std::size_t rows;
  };

  LayerConfig config_;
  LayerWeights weights_;
  Options options_;
  std::shared_ptr<KvPagePool> pool_;  // paged layout only
  LayerSequence own_;                 // MLA layers: only its position (the latent cache is in mla_)
  std::optional<MlaAttention> mla_;
  Projector projector_;  // matmul_ref for Isa::scalar, else oneDNN / GEMV
  double attention_seconds_ = 0;
  // forward()'s activations, kept between calls: a 2,000-token prefill's are hundreds of MB,
  // and on these VMs each fresh page is a trip to the hypervisor (see AlignedBuffer), which
  // took a quarter of a bf16 prefill when they were allocated per call.
  struct Activations {
    std::vector<float> h, y, gate, up, q, k, v, heads;
  };
  Activations act_;

  // The layer over x [n × hidden], n the rows of all runs together; validates first.
  std::vector<float> forward(const float* x, const std::vector<Run>& runs);

  // Llama-style attention of the normed rows h [n × hidden] of `runs`: y = heads·W_Oᵀ (+b_o).
  void attention_block(const float* h, const std::vector<Run>& runs, std::size_t n, float* y);

  // Appends the roped k, v of a run's queries to its cache and attends each q to the keys
  // it sees, on `threads` threads; heads: [n × q_width].
  void attend_new_tokens(LayerSequence& sequence, const float* q, const float* k, const float* v,
                         std::size_t n, float* heads, int threads);
};

}  // namespace kvscope
