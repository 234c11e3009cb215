#pragma once
// The layer of a Hugging Face config.json: Llama (2, 3, 3.1–3.3), Mistral, Qwen2/2.5, Qwen3.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "engine/layer_config.hpp"

namespace kvscope {

// What config.json says about one decoder layer and the model around it.
struct HfModelConfig {
  std::string model_type;  // llama, mistral, qwen2 or qwen3
  // hidden_size, num_attention_heads, num_key_value_heads (default: num_attention_heads),
  // head_dim (default: hidden_size / num_attention_heads), intermediate_size,
  // rms_norm_eps (default 1e-6, as transformers' LlamaConfig), rope_theta (default 10000),
  // capacity = max_position_embeddings when present (else LayerShape's default), and the
  // family's fields: rope_scaling (llama3), biases (qwen2: q/k/v; attention_bias: q/k/v/o),
  // qk_norm (qwen3), sliding_window (mistral).
  LayerShape shape;
  std::int64_t num_hidden_layers = -1;  // -1 when absent
};

// Parses config.json text. Throws std::runtime_error starting with `label` and naming the
// field for: text that is not a JSON object, a missing required field, a field of the wrong
// type or below 1, hidden_size not divisible by num_attention_heads when head_dim is absent,
// num_attention_heads not a multiple of num_key_value_heads; and, never computing something
// else silently, for a model_type or key it does not implement (hf_config_keys.hpp), a
// rope_scaling type other than default and llama3, hidden_act other than silu, mlp_bias
// true, and Qwen's use_sliding_window true or a "sliding_attention" layer type.
HfModelConfig parse_hf_config(std::string_view json_text, std::string_view label);

// Reads and parses the config.json at `path` (errors name the path).
HfModelConfig load_hf_config(const std::filesystem::path& path);

// The LayerShape of `path`, for `kvscope size/report --config config.json`.
inline LayerShape load_layer_shape(const std::filesystem::path& path) {
  return load_hf_config(path).shape;
}

}  // namespace kvscope
