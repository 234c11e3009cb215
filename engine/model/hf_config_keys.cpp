#include "engine/model/hf_config_keys.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvscope {
namespace {

using Keys = std::vector<std::string_view>;

// Read by parse_hf_config for every family (values checked there).
const Keys kParsed = {"model_type",
                      "hidden_size",
                      "num_attention_heads",
                      "num_key_value_heads",
                      "head_dim",
                      "intermediate_size",
                      "rms_norm_eps",
                      "rope_theta",
                      "rope_scaling",
                      "max_position_embeddings",
                      "num_hidden_layers",
                      "hidden_act"};

// Harmless for one decoder layer: the vocabulary, embeddings and lm_head (not in a layer),
// token ids, the dtype the weights were saved in (each tensor carries its own), weight
// initialisation, the KV-cache switch, dropout (off at inference) and output switches.
const Keys kHarmless = {
    "architectures",     "transformers_version", "torch_dtype",          "dtype",
    "_name_or_path",     "vocab_size",           "bos_token_id",         "eos_token_id",
    "pad_token_id",      "tie_word_embeddings",  "initializer_range",    "use_cache",
    "attention_dropout", "output_attentions",    "output_hidden_states", "return_dict"};

struct Family {
  std::string_view model_type;
  Keys keys;  // family keys, each read or value-checked by parse_hf_config
};

// pretraining_tp only splits Llama's matmuls into slices that sum to the same product.
// max_window_layers and sliding_window matter to Qwen only with use_sliding_window true,
// and layer_types only as "sliding_attention": parse_hf_config refuses both.
const Family kFamilies[] = {
    {"llama", {"attention_bias", "mlp_bias", "pretraining_tp"}},
    {"mistral", {"sliding_window"}},
    {"qwen2", {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"}},
    {"qwen3",
     {"attention_bias", "use_sliding_window", "sliding_window", "max_window_layers",
      "layer_types"}},
    // DeepSeek-V2: the MLA sizes and first_k_dense_replace are read, attention_bias, mlp_bias
    // and moe_layer_freq value-checked; the routing and expert keys shape only the MoE layers,
    // which are refused (first_k_dense_replace and the loader); auto_map names Python code.
    {"deepseek_v2",
     {"kv_lora_rank",
      "q_lora_rank",
      "qk_nope_head_dim",
      "qk_rope_head_dim",
      "v_head_dim",
      "first_k_dense_replace",
      "attention_bias",
      "mlp_bias",
      "pretraining_tp",
      "moe_layer_freq",
      "n_routed_experts",
      "n_shared_experts",
      "num_experts_per_tok",
      "moe_intermediate_size",
      "routed_scaling_factor",
      "topk_method",
      "n_group",
      "topk_group",
      "norm_topk_prob",
      "scoring_func",
      "aux_loss_alpha",
      "seq_aux",
      "ep_size",
      "auto_map"}},
};

bool contains(const Keys& keys, std::string_view key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

[[noreturn]] void fail(std::string_view label, const std::string& message) {
  throw std::runtime_error(std::string(label) + ": " + message);
}

}  // namespace

std::string check_config_keys(const nlohmann::json& config, std::string_view label) {
  std::string supported;
  for (const Family& f : kFamilies)
    supported += (supported.empty() ? "" : ", ") + std::string(f.model_type);
  const auto type = config.find("model_type");
  if (type == config.end() || !type->is_string()) {
    fail(label, "missing string field \"model_type\" (kvscope runs " + supported + ")");
  }
  const std::string model_type = type->get<std::string>();
  const auto family = std::find_if(std::begin(kFamilies), std::end(kFamilies),
                                   [&](const Family& f) { return f.model_type == model_type; });
  if (family == std::end(kFamilies)) {
    const std::string why =
        model_type.starts_with("deepseek")
            ? " (of the DeepSeek models only deepseek_v2's dense layers are implemented)"
            : "";
    fail(label, "model_type \"" + model_type + "\" is not supported" + why + "; kvscope runs " +
                    supported);
  }
  for (const auto& [key, value] : config.items()) {
    if (contains(kParsed, key) || contains(kHarmless, key) || contains(family->keys, key)) continue;
    fail(label, "key \"" + key + "\" is not implemented for model_type \"" + model_type +
                    "\" and may change the layer's math: refused");
  }
  return model_type;
}

}  // namespace kvscope
