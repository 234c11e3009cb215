#pragma once
// Attention and layer shapes of well-known models, for `--model PRESET`.
#include <cstdint>
#include <span>
#include <string_view>

namespace kvscope {

struct ModelPreset {
  std::string_view name;
  std::int64_t n_heads, n_kv_heads, head_dim, n_layers, hidden_size, ffn_size;
  std::int64_t window = 0;  // sliding window: the cache keeps the last `window` tokens; 0: none
  // MLA (DeepSeek-V2): the cache keeps kv_lora_rank latent + qk_rope_head_dim rope values per
  // token, shared by every head; head_dim is then a query/key head's nope + rope. 0: not MLA.
  std::int64_t kv_lora_rank = 0, qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0, q_lora_rank = 0;  // MLA: for the full layer (0: q_proj)
};

// llama-2-7b, llama-3-8b, llama-3.1-8b, mistral-7b, mistral-7b-v0.1 (window 4096),
// qwen2.5-7b, qwen3-8b, tinyllama-1.1b, falcon-7b, deepseek-v2-lite (MLA; its layers' attention,
// 26 of whose 27 MLPs are MoE) (from their config.json).
std::span<const ModelPreset> model_presets();

// Throws std::invalid_argument listing the known names when `name` is not one.
const ModelPreset& find_model_preset(std::string_view name);

}  // namespace kvscope
