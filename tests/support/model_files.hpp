#pragma once
// Test-only writers for the files `kvscope run` reads: safetensors files, model directories
// (config.json + one file or shards with an index) and temporary directories.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "kernels/number_formats.hpp"

namespace kvscope::test {

namespace fs = std::filesystem;

// A fresh directory under the test temp dir, removed with everything in it at scope exit.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("kvscope_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

inline void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Rounds each value to one the dtype holds exactly, so a test's float64 reference uses the
// very weights the loader decodes: BF16 keeps the top 16 bits; F16 rounds to a multiple of
// 2^-10 (exact for |w| < 2, which every test weight is).
inline void snap_to_dtype(std::vector<float>& values, const std::string& dtype) {
  for (float& v : values) {
    if (dtype == "BF16") {
      std::uint32_t bits;
      std::memcpy(&bits, &v, 4);
      bits &= 0xffff0000u;
      std::memcpy(&v, &bits, 4);
    } else if (dtype == "F16") {
      v = std::round(v * 1024.0f) / 1024.0f;
    }
  }
}

// Little-endian bytes of `values` in dtype (values already exact in it).
inline std::string encode(const std::vector<float>& values, const std::string& dtype) {
  std::string out;
  if (dtype == "F32") {
    out.resize(values.size() * 4);
    std::memcpy(out.data(), values.data(), out.size());
    return out;
  }
  out.resize(values.size() * 2);
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::uint16_t bits =
        dtype == "BF16" ? f32_to_bf16_bits(values[i]) : f32_to_f16_bits(values[i]);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

struct TestTensor {
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::string bytes;
};

// A safetensors file: 8-byte length, JSON header padded with spaces to a multiple of 8, data.
inline std::string safetensors_bytes(const std::map<std::string, TestTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const auto& [name, t] : tensors) {
    header[name] = {{"dtype", t.dtype},
                    {"shape", t.shape},
                    {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data += t.bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const std::uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + text + data;
}

// A raw file: the 8-byte length `header_length`, then `header` and `data` as given.
inline std::string raw_safetensors(std::uint64_t header_length, const std::string& header,
                                   const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header_length >> (8 * i)) & 0xff);
  return out + header + data;
}

// config.json of `model_type` (llama, mistral, qwen2, qwen3, deepseek_v2) for shape `s`, with the
// keys that family's real configs carry: Llama 3.1's rope_scaling when s has it, Mistral's
// sliding_window, Qwen's sliding_window with use_sliding_window false, attention_bias.
inline nlohmann::json config_json(const LayerShape& s, int num_layers,
                                  const std::string& model_type = "llama") {
  nlohmann::json c = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", model_type},
                      {"hidden_size", s.hidden_size},
                      {"num_attention_heads", s.n_heads},
                      {"num_key_value_heads", s.n_kv_heads},
                      {"head_dim", s.head_dim},
                      {"intermediate_size", s.ffn_size},
                      {"rms_norm_eps", s.rms_norm_eps},
                      {"rope_theta", s.rope_theta},
                      {"num_hidden_layers", num_layers},
                      {"max_position_embeddings", 4096},
                      {"torch_dtype", "float32"}};
  if (s.rope_scaling.kind == RopeScaling::Kind::llama3) {
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", s.rope_scaling.factor},
                         {"low_freq_factor", s.rope_scaling.low_freq_factor},
                         {"high_freq_factor", s.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings",
                          static_cast<std::int64_t>(s.rope_scaling.original_max_positions)}};
  }
  if (model_type == "llama" || model_type == "qwen3") c["attention_bias"] = s.o_bias;
  if (model_type == "mistral") {
    c["sliding_window"] = s.sliding_window > 0 ? nlohmann::json(s.sliding_window) : nullptr;
  }
  if (model_type == "deepseek_v2") {  // as DeepSeek-V2-Lite's config, its two layers dense
    const MlaShape& m = s.mla;
    c["architectures"] = {"DeepseekV2ForCausalLM"};
    c["kv_lora_rank"] = m.kv_lora_rank;
    c["q_lora_rank"] = m.q_lora_rank > 0 ? nlohmann::json(m.q_lora_rank) : nullptr;
    c["qk_nope_head_dim"] = m.qk_nope_head_dim;
    c["qk_rope_head_dim"] = m.qk_rope_head_dim;
    c["v_head_dim"] = m.v_head_dim;
    c["first_k_dense_replace"] = num_layers;
    c["attention_bias"] = false;
    c["moe_layer_freq"] = 1;
    c["n_routed_experts"] = 64;
    c["n_shared_experts"] = 2;
    c["num_experts_per_tok"] = 6;
    c["moe_intermediate_size"] = 1408;
    c["topk_method"] = "greedy";
    c["n_group"] = 1;
    c["topk_group"] = 1;
    c["norm_topk_prob"] = false;
    c["scoring_func"] = "softmax";
    c["aux_loss_alpha"] = 0.001;
    c["seq_aux"] = true;
    c["routed_scaling_factor"] = 1.0;
  }
  if (model_type == "qwen2" || model_type == "qwen3") {
    c["use_sliding_window"] = false;
    c["sliding_window"] = 4;  // ignored by transformers without use_sliding_window
    c["max_window_layers"] = 1;
  }
  return c;
}

// The tensors of layer `layer` (those `w` holds), by full name, with their [out, in] shapes.
inline std::map<std::string, TestTensor> layer_tensors(const LayerShape& s, const LayerWeights& w,
                                                       int layer, const std::string& dtype) {
  (void)s;
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  std::map<std::string, TestTensor> t;
  // Every matrix the weights hold (Llama's q/k/v/o, or MLA's), [out, in] as stored.
  const std::pair<const char*, const WeightMatrix*> matrices[] = {
      {"self_attn.q_proj.weight", &w.wq},       {"self_attn.k_proj.weight", &w.wk},
      {"self_attn.v_proj.weight", &w.wv},       {"self_attn.q_a_proj.weight", &w.wq_a},
      {"self_attn.q_b_proj.weight", &w.wq_b},   {"self_attn.kv_a_proj_with_mqa.weight", &w.wkv_a},
      {"self_attn.kv_b_proj.weight", &w.wkv_b}, {"self_attn.o_proj.weight", &w.wo},
      {"mlp.gate_proj.weight", &w.w_gate},      {"mlp.up_proj.weight", &w.w_up},
      {"mlp.down_proj.weight", &w.w_down}};
  for (const auto& [name, m] : matrices) {
    if (m->rows() > 0) t[p + name] = {dtype, {m->rows(), m->cols()}, encode(m->to_f32(), dtype)};
  }
  const std::pair<const char*, const std::vector<float>*> vectors[] = {
      {"input_layernorm.weight", &w.attn_norm},
      {"post_attention_layernorm.weight", &w.mlp_norm},
      {"self_attn.q_proj.bias", &w.bq},
      {"self_attn.k_proj.bias", &w.bk},
      {"self_attn.v_proj.bias", &w.bv},
      {"self_attn.o_proj.bias", &w.bo},
      {"self_attn.q_norm.weight", &w.q_norm},
      {"self_attn.k_norm.weight", &w.k_norm},
      {"self_attn.q_a_layernorm.weight", &w.q_a_norm},
      {"self_attn.kv_a_layernorm.weight", &w.kv_a_norm}};
  for (const auto& [name, values] : vectors) {
    if (!values->empty()) t[p + name] = {dtype, {values->size()}, encode(*values, dtype)};
  }
  return t;
}

// Random weights of `s`, snapped to `dtype`.
inline LayerWeights test_weights(const LayerShape& s, std::uint64_t seed,
                                 const std::string& dtype) {
  LayerShape with_capacity = s;
  with_capacity.capacity = 1;
  LayerWeights w = LayerWeights::random(LayerConfig(with_capacity), seed);
  for (WeightMatrix* m : w.matrices()) {
    std::vector<float> values = m->to_f32();
    snap_to_dtype(values, dtype);
    *m = WeightMatrix(values, m->rows(), m->cols());
  }
  for (std::vector<float>* v : w.vectors()) snap_to_dtype(*v, dtype);
  return w;
}

// Writes config.json (of `model_type`) and two layers (0 and 1, weights seeded `seed` and `seed +
// 1`) to `dir`: one model.safetensors, or with `sharded` layer 0 in model-00001-of-00002 and layer
// 1 in model-00002-of-00002 plus model.safetensors.index.json. Returns layer 1's weights (as
// snapped).
inline LayerWeights write_model(const fs::path& dir, const LayerShape& s, const std::string& dtype,
                                bool sharded, std::uint64_t seed = 7,
                                const std::string& model_type = "llama") {
  write_bytes(dir / "config.json", config_json(s, 2, model_type).dump(2));
  const LayerWeights w0 = test_weights(s, seed, dtype);
  const LayerWeights w1 = test_weights(s, seed + 1, dtype);
  auto t0 = layer_tensors(s, w0, 0, dtype);
  auto t1 = layer_tensors(s, w1, 1, dtype);
  if (!sharded) {
    t0.merge(t1);
    write_bytes(dir / "model.safetensors", safetensors_bytes(t0));
    return w1;
  }
  const std::string shard0 = "model-00001-of-00002.safetensors";
  const std::string shard1 = "model-00002-of-00002.safetensors";
  write_bytes(dir / shard0, safetensors_bytes(t0));
  write_bytes(dir / shard1, safetensors_bytes(t1));
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  for (const auto& [name, t] : t0) index["weight_map"][name] = shard0;
  for (const auto& [name, t] : t1) index["weight_map"][name] = shard1;
  write_bytes(dir / "model.safetensors.index.json", index.dump(2));
  return w1;
}

// `rows` × `width` inputs uniform in [-2, 2), deterministic.
inline std::vector<float> test_input(std::size_t rows, std::size_t width, std::uint64_t seed) {
  std::vector<float> x(rows * width);
  fill_uniform(x, seed, -2.0f, 2.0f);
  return x;
}

}  // namespace kvscope::test
