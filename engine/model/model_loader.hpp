#pragma once
// Loading one decoder layer of a Hugging Face Llama-family model directory:
//   DIR/config.json, and DIR/model.safetensors or shards listed in
//   DIR/model.safetensors.index.json ({"weight_map": {tensor name: shard file name}}).
#include <cstddef>
#include <filesystem>

#include "engine/layer_weights.hpp"
#include "engine/model/hf_config.hpp"

namespace kvscope {

// The tensors of layer `layer`, the projections read in place from the mapped files in
// their stored type (F32, BF16, F16: no copy; the mapping lives as long as the weights),
// the norm vectors converted to f32:
//   model.layers.I.self_attn.{q,k,v,o}_proj.weight, model.layers.I.mlp.{gate,up,down}_proj
//   .weight, model.layers.I.{input,post_attention}_layernorm.weight, stored [out, in]; and
//   where `config` asks for them self_attn.{q,k,v}_proj.bias, self_attn.o_proj.bias,
//   self_attn.{q,k}_norm.weight. An MLA layer (deepseek_v2) has instead of q/k/v/o_proj
//   self_attn.q_proj.weight or self_attn.q_{a_proj,a_layernorm,b_proj}.weight,
//   self_attn.kv_a_proj_with_mqa.weight, kv_a_layernorm.weight, kv_b_proj.weight and
//   o_proj.weight. A mixture-of-experts tensor (mlp.experts*, mlp.gate.*, mlp.shared_experts*)
//   and any other model.layers.I.* tensor is refused (naming it): something would be ignored.
// Only those tensors' bytes are read (the files are memory-mapped). Throws
// std::runtime_error naming the file and the tensor or field: a missing file or tensor, a
// malformed safetensors file or index, a shape that disagrees with `config` (naming the
// config.json fields it follows from), or a dtype other than F32, F16, BF16.
LayerWeights load_layer_weights(const std::filesystem::path& model_dir, std::size_t layer,
                                const LayerConfig& config);

}  // namespace kvscope
