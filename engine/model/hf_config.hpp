#pragma once
// The layer shape of a Hugging Face Llama-family config.json.
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "engine/layer_config.hpp"

namespace kvscope {

// What config.json says about one decoder layer and the model around it.
struct HfModelConfig {
  // hidden_size, num_attention_heads, num_key_value_heads (default: num_attention_heads),
  // head_dim (default: hidden_size / num_attention_heads), intermediate_size,
  // rms_norm_eps (default 1e-6, as transformers' LlamaConfig), rope_theta (default 10000),
  // capacity = max_position_embeddings when present (else LayerShape's default).
  LayerShape shape;
  std::int64_t num_hidden_layers = -1;  // -1 when absent
  bool has_rope_scaling = false;        // a non-null "rope_scaling": RoPE frequencies differ
  bool has_biases = false;              // "attention_bias" or "mlp_bias" true
};

// Parses config.json text. Throws std::runtime_error starting with `label` and naming the
// field for: text that is not a JSON object, a missing required field, a field of the wrong
// type or below 1, hidden_size not divisible by num_attention_heads when head_dim is absent,
// or num_attention_heads not a multiple of num_key_value_heads.
HfModelConfig parse_hf_config(std::string_view json_text, std::string_view label);

// Reads and parses the config.json at `path` (errors name the path).
HfModelConfig load_hf_config(const std::filesystem::path& path);

// The LayerShape of `path`, for `kvscope size/report --config config.json`.
inline LayerShape load_layer_shape(const std::filesystem::path& path) {
  return load_hf_config(path).shape;
}

}  // namespace kvscope
