#include "engine/model/hf_config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model/hf_config_keys.hpp"

namespace kvscope {
namespace {

using nlohmann::json;

[[noreturn]] void fail(std::string_view label, const std::string& message) {
  throw std::runtime_error(std::string(label) + ": " + message);
}

// The field as a positive integer; `fallback` if absent or null, an error if required.
std::int64_t positive_integer(const json& config, const char* field, std::string_view label,
                              std::int64_t fallback = 0, bool required = true) {
  const auto it = config.find(field);
  if (it == config.end() || it->is_null()) {
    if (required) fail(label, std::string("missing field \"") + field + "\"");
    return fallback;
  }
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1) {
    fail(label,
         std::string("field \"") + field + "\" must be a positive integer, got " + it->dump());
  }
  return it->get<std::int64_t>();
}

double positive_number(const json& config, const char* field, std::string_view label,
                       double fallback) {
  const auto it = config.find(field);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_number() || !(it->get<double>() > 0.0) || !std::isfinite(it->get<double>())) {
    fail(label,
         std::string("field \"") + field + "\" must be a positive number, got " + it->dump());
  }
  return it->get<double>();
}

// A boolean field (absent or null: false).
bool flag(const json& config, const char* field, std::string_view label) {
  const auto it = config.find(field);
  if (it == config.end() || it->is_null()) return false;
  if (!it->is_boolean()) {
    fail(label, std::string("field \"") + field + "\" must be true or false, got " + it->dump());
  }
  return it->get<bool>();
}

// "rope_scaling": null, {"rope_type" (or legacy "type"): "default"} or Llama 3.1's
// {"rope_type": "llama3", "factor", "low_freq_factor", "high_freq_factor",
// "original_max_position_embeddings"}; any other type or extra key is refused.
RopeScaling rope_scaling(const json& config, const std::string& model_type,
                         std::string_view label) {
  const auto it = config.find("rope_scaling");
  if (it == config.end() || it->is_null()) return {};
  if (!it->is_object()) fail(label, "field \"rope_scaling\" must be an object or null");
  const json& r = *it;
  const json* type = r.contains("rope_type") ? &r["rope_type"]
                     : r.contains("type")    ? &r["type"]
                                             : nullptr;
  if (type == nullptr || !type->is_string()) {
    fail(label, "rope_scaling has no string \"rope_type\"");
  }
  const std::string name = type->get<std::string>();
  std::vector<std::string> keys = {"rope_type", "type"};
  RopeScaling result;
  if (name == "llama3") {
    result.kind = RopeScaling::Kind::llama3;
    const std::string prefix = "rope_scaling.";
    auto number = [&](const char* field) {
      keys.emplace_back(field);
      if (!r.contains(field) || !r[field].is_number()) {
        fail(label, prefix + field + " (a number) is required for rope_type llama3");
      }
      return r[field].get<double>();
    };
    result.factor = number("factor");
    result.low_freq_factor = number("low_freq_factor");
    result.high_freq_factor = number("high_freq_factor");
    result.original_max_positions = number("original_max_position_embeddings");
  } else if (name == "yarn" && model_type == "deepseek_v2") {
    // Read (for the cache size) but refused when computed: see RopeScaling.
    result.kind = RopeScaling::Kind::yarn;
    keys.insert(keys.end(), {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow",
                             "mscale", "mscale_all_dim"});
  } else if (name != "default") {
    fail(label, "rope_scaling type \"" + name +
                    "\" is not implemented (kvscope implements default and llama3)");
  }
  for (const auto& [key, value] : r.items()) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      fail(label, "rope_scaling key \"" + key + "\" is not implemented for rope_type " + name);
    }
  }
  return result;
}

// The fields by which the families differ (the keys were checked by check_config_keys).
void family_fields(const json& config, const std::string& model_type, std::string_view label,
                   LayerShape& s) {
  const auto act = config.find("hidden_act");
  if (act != config.end() && !(act->is_string() && act->get<std::string>() == "silu")) {
    fail(label, "hidden_act " + act->dump() + " is not implemented (SwiGLU with silu only)");
  }
  if (flag(config, "mlp_bias", label)) fail(label, "mlp_bias true is not implemented");
  s.rope_scaling = rope_scaling(config, model_type, label);
  // Qwen2 always biases q, k and v, never o; attention_bias (Llama, Qwen3) biases all four.
  const bool attention_bias = flag(config, "attention_bias", label);
  if (model_type == "deepseek_v2") {
    if (attention_bias) {
      fail(label,
           "attention_bias true (biases on q_a_proj, kv_a_proj_with_mqa and o_proj) is not "
           "implemented for deepseek_v2");
    }
    return;
  }
  s.qkv_bias = model_type == "qwen2" || attention_bias;
  s.o_bias = attention_bias;
  s.qk_norm = model_type == "qwen3";
  if (model_type == "mistral") {
    s.sliding_window = positive_integer(config, "sliding_window", label, 0, false);
  }
  if (flag(config, "use_sliding_window", label)) {
    fail(label,
         "use_sliding_window true (Qwen's window on layers from max_window_layers) is "
         "not implemented");
  }
  const auto types = config.find("layer_types");
  if (types != config.end() && !types->is_null()) {
    if (!types->is_array()) fail(label, "field \"layer_types\" must be a list");
    for (const json& t : *types) {
      if (t != "full_attention") {
        fail(label, "layer_types entry " + t.dump() + " is not implemented (full_attention only)");
      }
    }
  }
}

// DeepSeek-V2's attention sizes (MLA) and where its mixture-of-experts layers begin. As
// transformers' DeepseekV2Config: q_lora_rank absent means 1536 and null means q_proj;
// head_dim is qk_rope_head_dim and there are as many kv heads as heads (a different
// head_dim or num_key_value_heads is refused rather than ignored).
void mla_fields(const json& config, std::string_view label, HfModelConfig& result) {
  LayerShape& s = result.shape;
  MlaShape& m = s.mla;
  m.kv_lora_rank = positive_integer(config, "kv_lora_rank", label);
  m.qk_nope_head_dim = positive_integer(config, "qk_nope_head_dim", label);
  m.qk_rope_head_dim = positive_integer(config, "qk_rope_head_dim", label);
  m.v_head_dim = positive_integer(config, "v_head_dim", label);
  const auto q_lora = config.find("q_lora_rank");
  m.q_lora_rank = q_lora == config.end() ? 1536
                  : q_lora->is_null()    ? 0
                                         : positive_integer(config, "q_lora_rank", label);
  if (m.qk_rope_head_dim % 2 != 0) {
    fail(label,
         "qk_rope_head_dim (" + std::to_string(m.qk_rope_head_dim) + ") must be even for RoPE");
  }
  const auto head_dim = config.find("head_dim");
  if (head_dim != config.end() && !head_dim->is_null() && *head_dim != m.qk_rope_head_dim) {
    fail(label, "head_dim " + head_dim->dump() + " differs from qk_rope_head_dim (" +
                    std::to_string(m.qk_rope_head_dim) + "), which deepseek_v2 uses as head_dim");
  }
  if (s.n_kv_heads != s.n_heads) {
    fail(label, "num_key_value_heads (" + std::to_string(s.n_kv_heads) +
                    ") must equal num_attention_heads (" + std::to_string(s.n_heads) +
                    ") for deepseek_v2's latent attention");
  }
  s.head_dim = m.qk_rope_head_dim;
  const auto dense = config.find("first_k_dense_replace");
  result.first_moe_layer = 0;  // transformers' default: every layer is MoE
  if (dense != config.end() && !dense->is_null()) {
    if (!dense->is_number_integer() || dense->get<std::int64_t>() < 0) {
      fail(label,
           "field \"first_k_dense_replace\" must be a non-negative integer, got " + dense->dump());
    }
    result.first_moe_layer = dense->get<std::int64_t>();
  }
  // DeepSeek's own code makes layer i ≥ first_k_dense_replace MoE only when i % moe_layer_freq
  // is 0; transformers ignores the key. With 1 (every released config) both agree.
  const auto freq = config.find("moe_layer_freq");
  if (freq != config.end() && !freq->is_null() && *freq != 1) {
    fail(label, "moe_layer_freq " + freq->dump() + " is not implemented (1 only)");
  }
}

}  // namespace

HfModelConfig parse_hf_config(std::string_view json_text, std::string_view label) {
  json config = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (config.is_discarded()) fail(label, "not valid JSON");
  if (!config.is_object()) fail(label, "not a JSON object");

  HfModelConfig result;
  result.model_type = check_config_keys(config, label);
  LayerShape& s = result.shape;
  s.hidden_size = positive_integer(config, "hidden_size", label);
  s.n_heads = positive_integer(config, "num_attention_heads", label);
  s.n_kv_heads = positive_integer(config, "num_key_value_heads", label, s.n_heads, false);
  if (s.n_heads % s.n_kv_heads != 0) {
    fail(label, "num_attention_heads (" + std::to_string(s.n_heads) +
                    ") is not a multiple of num_key_value_heads (" + std::to_string(s.n_kv_heads) +
                    ")");
  }
  const bool has_head_dim = config.contains("head_dim") && !config["head_dim"].is_null();
  if (!has_head_dim && s.hidden_size % s.n_heads != 0) {
    fail(label, "hidden_size (" + std::to_string(s.hidden_size) +
                    ") is not divisible by num_attention_heads (" + std::to_string(s.n_heads) +
                    ") and no head_dim is given");
  }
  s.head_dim = positive_integer(config, "head_dim", label, s.hidden_size / s.n_heads, false);
  if (s.head_dim % 2 != 0 && result.model_type != "deepseek_v2") {
    fail(label, "head_dim (" + std::to_string(s.head_dim) + ") must be even for RoPE");
  }
  s.ffn_size = positive_integer(config, "intermediate_size", label);
  s.rms_norm_eps = positive_number(config, "rms_norm_eps", label, 1e-6);
  s.rope_theta = positive_number(config, "rope_theta", label, 10000.0);
  s.capacity = positive_integer(config, "max_position_embeddings", label, s.capacity, false);
  result.num_hidden_layers = positive_integer(config, "num_hidden_layers", label, -1, false);
  family_fields(config, result.model_type, label, s);
  if (result.model_type == "deepseek_v2") mla_fields(config, label, result);
  return result;
}

HfModelConfig load_hf_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), std::string("cannot open: ") + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_hf_config(text, path.string());
}

}  // namespace kvscope
