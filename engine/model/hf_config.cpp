#include "engine/model/hf_config.hpp"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

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

bool flag(const json& config, const char* field) {
  const auto it = config.find(field);
  return it != config.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace

HfModelConfig parse_hf_config(std::string_view json_text, std::string_view label) {
  json config = json::parse(json_text.begin(), json_text.end(), nullptr, false);
  if (config.is_discarded()) fail(label, "not valid JSON");
  if (!config.is_object()) fail(label, "not a JSON object");

  HfModelConfig result;
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
  if (s.head_dim % 2 != 0) {
    fail(label, "head_dim (" + std::to_string(s.head_dim) + ") must be even for RoPE");
  }
  s.ffn_size = positive_integer(config, "intermediate_size", label);
  s.rms_norm_eps = positive_number(config, "rms_norm_eps", label, 1e-6);
  s.rope_theta = positive_number(config, "rope_theta", label, 10000.0);
  s.capacity = positive_integer(config, "max_position_embeddings", label, s.capacity, false);
  result.num_hidden_layers = positive_integer(config, "num_hidden_layers", label, -1, false);
  result.has_rope_scaling = config.contains("rope_scaling") && !config["rope_scaling"].is_null();
  result.has_biases = flag(config, "attention_bias") || flag(config, "mlp_bias");
  return result;
}

HfModelConfig load_hf_config(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), std::string("cannot open: ") + std::strerror(errno));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_hf_config(text, path.string());
}

}  // namespace kvscope
