#pragma once
// How many bytes a KV cache takes: the arithmetic behind `kvscope size`.
#include <cstdint>
#include <string>

#include "kernels/kv_dtype.hpp"

namespace kvscope {

struct KvShape {
  std::int64_t n_kv_heads = 32;
  std::int64_t head_dim = 128;
  std::int64_t tokens = 2000;
  std::int64_t layers = 1;
  std::int64_t batch = 1;
  KvTypes dtype = KvDtype::f32;  // keys and values (one KvDtype sets both)
  // MLA (DeepSeek-V2): per token and layer one latent of mla_latent values and one roped key
  // part of mla_rope values, shared by every head (n_kv_heads and head_dim then unused). 0: not
  // MLA.
  std::int64_t mla_latent = 0, mla_rope = 0;
};

// Byte counts of a cache; totals are over all layers and sequences of the batch.
// MLA: "K" is the latent, "V" the rope part (the latent serves as both keys and values).
struct KvFootprint {
  std::uint64_t k_bytes_per_token_layer = 0;  // n_kv_heads × head_dim × element bytes (int4:
                                              // the nibbles, 16 bytes per group of 32)
  std::uint64_t v_bytes_per_token_layer = 0;
  std::uint64_t scale_bytes_per_token_layer = 0;  // K's and V's scales: int8 n_kv_heads × 4,
                                                  // int4 n_kv_heads × groups × 2 (f16)
  std::uint64_t bytes_per_token_layer = 0;        // K + V + scales for one token in one layer
  std::uint64_t bytes_per_token = 0;              // over all layers
  std::uint64_t bytes_per_layer = 0;              // tokens × batch, one layer
  std::uint64_t k_bytes = 0;                      // totals
  std::uint64_t v_bytes = 0;
  std::uint64_t scale_bytes = 0;
  std::uint64_t total_bytes = 0;
};

// "MHA" when every query head has its own kv head, "MQA" for one shared kv head,
// otherwise "GQA-<n_kv_heads>".
std::string attention_variant(std::int64_t n_heads, std::int64_t n_kv_heads);

// Throws std::invalid_argument for a size below 1 (naming it), for an MLA cache of a type
// other than f32 (kvscope's latent cache is f32), and std::overflow_error when a count does
// not fit in 64 bits.
KvFootprint kv_footprint(const KvShape& shape);

}  // namespace kvscope
