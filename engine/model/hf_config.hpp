#pragma once
// The layer of a Hugging Face config.json: Llama (2, 3, 3.1–3.3), Mistral, Qwen2/2.5, Qwen3,
// DeepSeek-V2 (its dense layers, multi-head latent attention).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "engine/layer_config.hpp"

namespace kvscope {

// What config.json says about one decoder layer and the model around it.
struct HfModelConfig {
  std::string model_type;  // llama, mistral, qwen2, qwen3 or deepseek_v2
  // hidden_size, num_attention_heads, num_key_value_heads (default: num_attention_heads),
  // head_dim (default: hidden_size / num_attention_heads), intermediate_size,
  // rms_norm_eps (default 1e-6, as transformers' LlamaConfig), rope_theta (default 10000),
  // capacity = max_position_embeddings when present (else LayerShape's default), and the
  // family's fields: rope_scaling (llama3), biases (qwen2: q/k/v; attention_bias: q/k/v/o),
  // qk_norm (qwen3), sliding_window (mistral), the MLA sizes (deepseek_v2: kv_lora_rank,
  // q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; head_dim = qk_rope_head_dim).
  LayerShape shape;
  std::int64_t num_hidden_layers = -1;  // -1 when absent
  // deepseek_v2: layers from first_k_dense_replace on have a mixture-of-experts MLP, which
  // kvscope does not run; -1 for the other families (every layer is dense).
  std::int64_t first_moe_layer = -1;
};

// Parses config.json text. Throws std::runtime_error starting with `label` and naming the
// field for: text that is not a JSON object, a missing required field, a field of the wrong
// type or below 1, hidden_size not divisible by num_attention_heads when head_dim is absent,
// num_attention_heads not a multiple of num_key_value_heads; and, never computing something
// else silently, for a model_type or key it does not implement (hf_config_keys.hpp), a
// rope_scaling type other than default and llama3 (deepseek_v2's yarn is read, and refused by
// LayerConfig), hidden_act other than silu, mlp_bias true, Qwen's use_sliding_window true or a
// "sliding_attention" layer type, and for deepseek_v2 attention_bias true, moe_layer_freq other
// than 1, a head_dim other than qk_rope_head_dim or fewer kv heads than heads.
HfModelConfig parse_hf_config(std::string_view json_text, std::string_view label);

// Reads and parses the config.json at `path` (errors name the path).
HfModelConfig load_hf_config(const std::filesystem::path& path);

// The LayerShape of `path`, for `kvscope size/report --config config.json`.
inline LayerShape load_layer_shape(const std::filesystem::path& path) {
  return load_hf_config(path).shape;
}

}  // namespace kvscope
