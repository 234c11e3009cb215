#include "engine/model/model_loader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <variant>

#include "engine/model/safetensors.hpp"

namespace kvscope {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void fail(const fs::path& file, const std::string& message) {
  throw std::runtime_error(file.string() + ": " + message);
}

// Tensor name → shard file, from the index if there is one, else everything in
// model.safetensors. Opens each shard once, on first use.
class ShardSet {
 public:
  explicit ShardSet(const fs::path& dir) : dir_(dir) {
    const fs::path index = dir / "model.safetensors.index.json";
    if (!fs::exists(index)) {
      single_ = dir / "model.safetensors";
      if (!fs::exists(single_)) {
        fail(dir, "holds neither model.safetensors nor model.safetensors.index.json");
      }
      return;
    }
    index_path_ = index;
    std::ifstream in(index, std::ios::binary);
    if (!in) fail(index, std::string("cannot open: ") + std::strerror(errno));
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    json parsed = json::parse(text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) fail(index, "not a JSON object");
    const auto map = parsed.find("weight_map");
    if (map == parsed.end() || !map->is_object()) fail(index, "missing object \"weight_map\"");
    weight_map_ = *map;
  }

  // The open shard holding `tensor`.
  std::shared_ptr<const SafetensorsFile> file_of(const std::string& tensor) {
    fs::path file = single_;
    if (file.empty()) {
      const auto it = weight_map_.find(tensor);
      if (it == weight_map_.end()) {
        fail(index_path_, "tensor '" + tensor + "' is missing from weight_map");
      }
      if (!it->is_string())
        fail(index_path_, "weight_map entry of '" + tensor + "' is not a string");
      const fs::path name = it->get<std::string>();
      // Shards live beside the index: refuse names that would reach elsewhere.
      if (name.empty() || name.has_parent_path() || name == "." || name == "..") {
        fail(index_path_, "weight_map entry of '" + tensor + "' names \"" + name.string() +
                              "\", not a file in the model directory");
      }
      file = dir_ / name;
    }
    auto& open = open_[file.string()];
    if (!open) open = std::make_shared<const SafetensorsFile>(file);
    if (!open->contains(tensor)) {
      fail(file, "tensor '" + tensor + "' not found" +
                     (single_.empty()
                          ? " (weight_map of " + index_path_.filename().string() + " points here)"
                          : ""));
    }
    return open;
  }

  // Every tensor name starting with `prefix`, in the index's weight_map or the single file.
  std::vector<std::string> names_with_prefix(const std::string& prefix) {
    std::vector<std::string> names;
    if (!single_.empty()) {
      auto& open = open_[single_.string()];
      if (!open) open = std::make_unique<SafetensorsFile>(single_);
      for (const auto& [name, entry] : open->header().tensors) {
        if (name.starts_with(prefix)) names.push_back(name);
      }
    } else {
      for (const auto& [name, file] : weight_map_.items()) {
        if (name.starts_with(prefix)) names.push_back(name);
      }
    }
    return names;
  }

  // The file that lists the tensors: the index, or the single file.
  const fs::path& listing() const { return single_.empty() ? index_path_ : single_; }

 private:
  fs::path dir_, single_, index_path_;
  json weight_map_;
  std::map<std::string, std::shared_ptr<const SafetensorsFile>> open_;
};

// One tensor to load: its name suffix, where it goes (a projection read in place, or a norm
// vector converted to f32), the expected shape, and which config.json fields those sizes
// come from (for messages).
struct TensorSpec {
  const char* suffix;
  std::variant<WeightMatrix LayerWeights::*, std::vector<float> LayerWeights::*> member;
  std::vector<std::uint64_t> shape;
  const char* derived_from;
};

WeightDtype weight_dtype_of(const TensorEntry& entry, const fs::path& file,
                            const std::string& name) {
  if (entry.dtype == "F32") return WeightDtype::f32;
  if (entry.dtype == "BF16") return WeightDtype::bf16;
  if (entry.dtype == "F16") return WeightDtype::f16;
  fail(file,
       "tensor '" + name + "' has dtype " + entry.dtype + ", not supported (F32, F16 or BF16)");
}

// DeepSeek-V2's attention tensors (MLA), as transformers names them.
std::vector<TensorSpec> mla_specs(const LayerConfig& c) {
  const std::uint64_t hidden = c.hidden_size(), heads = c.n_heads();
  const std::uint64_t q_out = heads * c.qk_head_dim(), q_lora = c.q_lora_rank();
  std::vector<TensorSpec> specs;
  if (q_lora == 0) {
    specs.push_back({"self_attn.q_proj.weight",
                     &LayerWeights::wq,
                     {q_out, hidden},
                     "[num_attention_heads·(qk_nope_head_dim + qk_rope_head_dim), hidden_size]"});
  } else {
    specs.push_back({"self_attn.q_a_proj.weight",
                     &LayerWeights::wq_a,
                     {q_lora, hidden},
                     "[q_lora_rank, hidden_size]"});
    specs.push_back(
        {"self_attn.q_a_layernorm.weight", &LayerWeights::q_a_norm, {q_lora}, "[q_lora_rank]"});
    specs.push_back({"self_attn.q_b_proj.weight",
                     &LayerWeights::wq_b,
                     {q_out, q_lora},
                     "[num_attention_heads·(qk_nope_head_dim + qk_rope_head_dim), q_lora_rank]"});
  }
  specs.push_back({"self_attn.kv_a_proj_with_mqa.weight",
                   &LayerWeights::wkv_a,
                   {c.mla_row_width(), hidden},
                   "[kv_lora_rank + qk_rope_head_dim, hidden_size]"});
  specs.push_back({"self_attn.kv_a_layernorm.weight",
                   &LayerWeights::kv_a_norm,
                   {c.kv_lora_rank()},
                   "[kv_lora_rank]"});
  specs.push_back({"self_attn.kv_b_proj.weight",
                   &LayerWeights::wkv_b,
                   {heads * (c.qk_nope_head_dim() + c.v_head_dim()), c.kv_lora_rank()},
                   "[num_attention_heads·(qk_nope_head_dim + v_head_dim), kv_lora_rank]"});
  specs.push_back({"self_attn.o_proj.weight",
                   &LayerWeights::wo,
                   {hidden, c.o_width()},
                   "[hidden_size, num_attention_heads·v_head_dim]"});
  return specs;
}

}  // namespace

LayerWeights load_layer_weights(const fs::path& model_dir, std::size_t layer,
                                const LayerConfig& c) {
  const std::uint64_t hidden = c.hidden_size(), q = c.q_width(), kv = c.kv_width(),
                      ffn = c.ffn_size();
  const char* const q_fields = "[num_attention_heads·head_dim, hidden_size]";
  const char* const kv_fields = "[num_key_value_heads·head_dim, hidden_size]";
  std::vector<TensorSpec> specs =
      c.is_mla() ? mla_specs(c)
                 : std::vector<TensorSpec>{
                       {"self_attn.q_proj.weight", &LayerWeights::wq, {q, hidden}, q_fields},
                       {"self_attn.k_proj.weight", &LayerWeights::wk, {kv, hidden}, kv_fields},
                       {"self_attn.v_proj.weight", &LayerWeights::wv, {kv, hidden}, kv_fields},
                       {"self_attn.o_proj.weight",
                        &LayerWeights::wo,
                        {hidden, q},
                        "[hidden_size, num_attention_heads·head_dim]"}};
  const std::vector<TensorSpec> common = {
      {"mlp.gate_proj.weight",
       &LayerWeights::w_gate,
       {ffn, hidden},
       "[intermediate_size, hidden_size]"},
      {"mlp.up_proj.weight",
       &LayerWeights::w_up,
       {ffn, hidden},
       "[intermediate_size, hidden_size]"},
      {"mlp.down_proj.weight",
       &LayerWeights::w_down,
       {hidden, ffn},
       "[hidden_size, intermediate_size]"},
      {"input_layernorm.weight", &LayerWeights::attn_norm, {hidden}, "[hidden_size]"},
      {"post_attention_layernorm.weight", &LayerWeights::mlp_norm, {hidden}, "[hidden_size]"},
  };
  specs.insert(specs.end(), common.begin(), common.end());
  // The families' extra tensors, each only where the config asks for it.
  if (c.qkv_bias()) {
    specs.push_back(
        {"self_attn.q_proj.bias", &LayerWeights::bq, {q}, "[num_attention_heads·head_dim]"});
    specs.push_back(
        {"self_attn.k_proj.bias", &LayerWeights::bk, {kv}, "[num_key_value_heads·head_dim]"});
    specs.push_back(
        {"self_attn.v_proj.bias", &LayerWeights::bv, {kv}, "[num_key_value_heads·head_dim]"});
  }
  if (c.o_bias())
    specs.push_back({"self_attn.o_proj.bias", &LayerWeights::bo, {hidden}, "[hidden_size]"});
  if (c.qk_norm()) {
    const std::uint64_t d = c.head_dim();
    specs.push_back({"self_attn.q_norm.weight", &LayerWeights::q_norm, {d}, "[head_dim]"});
    specs.push_back({"self_attn.k_norm.weight", &LayerWeights::k_norm, {d}, "[head_dim]"});
  }

  ShardSet shards(model_dir);
  LayerWeights weights;
  const std::string prefix = "model.layers." + std::to_string(layer) + ".";
  // A mixture-of-experts MLP (router, experts, shared experts) is not run: say so by name
  // before a dense tensor is found missing.
  for (const std::string& name : shards.names_with_prefix(prefix)) {
    if (name.starts_with(prefix + "mlp.experts") || name.starts_with(prefix + "mlp.gate.") ||
        name.starts_with(prefix + "mlp.shared_experts")) {
      fail(shards.listing(), "tensor '" + name +
                                 "' belongs to a mixture-of-experts MLP, which is not "
                                 "implemented (dense SwiGLU layers only)");
    }
  }
  for (const TensorSpec& spec : specs) {
    const std::string name = prefix + spec.suffix;
    const std::shared_ptr<const SafetensorsFile> file = shards.file_of(name);
    const TensorEntry& entry = file->entry(name);
    if (entry.shape != spec.shape) {
      fail(file->path(), "tensor '" + name + "' has shape " + shape_to_string(entry.shape) +
                             " but config.json gives " + shape_to_string(spec.shape) + " = " +
                             spec.derived_from);
    }
    if (const auto* matrix = std::get_if<WeightMatrix LayerWeights::*>(&spec.member)) {
      const WeightDtype dtype = weight_dtype_of(entry, file->path(), name);
      weights.** matrix = WeightMatrix::borrowed(file->tensor_bytes(name, spec.shape).data(), dtype,
                                                 spec.shape[0], spec.shape[1], file);
    } else {
      weights.*std::get<std::vector<float> LayerWeights::*>(spec.member) =
          file->read_f32(name, spec.shape);
    }
  }
  // A layer tensor nothing above reads would change the math if it were real: refuse it.
  for (const std::string& name : shards.names_with_prefix(prefix)) {
    const bool consumed = std::any_of(specs.begin(), specs.end(), [&](const TensorSpec& spec) {
      return name == prefix + spec.suffix;
    });
    if (!consumed) {
      fail(shards.listing(), "tensor '" + name +
                                 "' is not used by this layer as config.json describes it "
                                 "(kvscope would ignore it): refused");
    }
  }
  return weights;
}

}  // namespace kvscope
