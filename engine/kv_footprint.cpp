#include "engine/kv_footprint.hpp"

#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"

namespace kvscope {
namespace {

std::uint64_t positive(std::int64_t value, const char* name) {
  if (value < 1) {
    throw std::invalid_argument(std::string(name) + " must be at least 1, got " +
                                std::to_string(value));
  }
  return static_cast<std::uint64_t>(value);
}

}  // namespace

std::string attention_variant(std::int64_t n_heads, std::int64_t n_kv_heads) {
  if (n_kv_heads == n_heads) return "MHA";
  if (n_kv_heads == 1) return "MQA";
  return "GQA-" + std::to_string(n_kv_heads);
}

KvFootprint kv_footprint(const KvShape& s) {
  const bool mla = s.mla_latent != 0;
  if (mla && s.dtype != KvTypes(KvDtype::f32)) {
    throw std::invalid_argument("MLA's latent cache is f32 only in kvscope, not " +
                                to_string(s.dtype));
  }
  const std::uint64_t kv_heads = mla ? 1 : positive(s.n_kv_heads, "kv heads");
  const std::uint64_t head_dim = mla ? 1 : positive(s.head_dim, "head_dim");
  const std::uint64_t tokens = positive(s.tokens, "tokens");
  const std::uint64_t layers = positive(s.layers, "layers");
  const std::uint64_t batch = positive(s.batch, "batch");

  KvFootprint f;
  // One row's element bytes (without its scales) and scale bytes, times the kv heads.
  const auto data_bytes = [&](KvDtype t) {
    // int4 rows hold their scales inline: the rest are the nibbles.
    const std::uint64_t row = t == KvDtype::int4
                                  ? kv_row_bytes(t, head_dim) - kv_row_scale_bytes(t, head_dim)
                                  : checked_mul(head_dim, kv_element_bytes(t), "KV row bytes");
    return checked_mul(kv_heads, row, "KV row bytes");
  };
  const auto scale_bytes = [&](KvDtype t) {
    return checked_mul(kv_heads, kv_row_scale_bytes(t, head_dim), "KV scale bytes");
  };
  if (mla) {
    f.k_bytes_per_token_layer =
        checked_mul(positive(s.mla_latent, "MLA latent"), sizeof(float), "MLA latent bytes");
    f.v_bytes_per_token_layer =
        checked_mul(positive(s.mla_rope, "MLA rope"), sizeof(float), "MLA rope bytes");
  } else {
    f.k_bytes_per_token_layer = data_bytes(s.dtype.k);
    f.v_bytes_per_token_layer = data_bytes(s.dtype.v);
    f.scale_bytes_per_token_layer = scale_bytes(s.dtype.k) + scale_bytes(s.dtype.v);
  }
  f.bytes_per_token_layer = checked_add(
      checked_add(f.k_bytes_per_token_layer, f.v_bytes_per_token_layer, "KV bytes per token"),
      f.scale_bytes_per_token_layer, "KV bytes per token");
  f.bytes_per_token = checked_mul(f.bytes_per_token_layer, layers, "KV bytes per token");

  const std::uint64_t sequences = checked_mul(tokens, batch, "tokens × batch");
  f.bytes_per_layer = checked_mul(f.bytes_per_token_layer, sequences, "KV bytes per layer");
  const std::uint64_t token_layers = checked_mul(sequences, layers, "tokens × batch × layers");
  f.k_bytes = checked_mul(f.k_bytes_per_token_layer, token_layers, "K bytes");
  f.v_bytes = checked_mul(f.v_bytes_per_token_layer, token_layers, "V bytes");
  f.scale_bytes = checked_mul(f.scale_bytes_per_token_layer, token_layers, "scale bytes");
  f.total_bytes =
      checked_add(checked_add(f.k_bytes, f.v_bytes, "KV bytes"), f.scale_bytes, "KV bytes");
  return f;
}

}  // namespace kvscope
