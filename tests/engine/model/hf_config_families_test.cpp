// config.json of each supported family parsed into the fields that change the math, and
// every key, rope type and model_type kvscope does not implement refused with its name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "engine/layer_config.hpp"
#include "engine/model/hf_config.hpp"

namespace kvscope {
namespace {

using nlohmann::json;

json base(const std::string& model_type) {
  return {{"model_type", model_type},
          {"hidden_size", 64},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"vocab_size", 1000},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.45.0"},
          {"architectures", {"SomeForCausalLM"}},
          {"use_cache", true},
          {"initializer_range", 0.02},
          {"max_position_embeddings", 4096},
          {"hidden_act", "silu"},
          {"attention_dropout", 0.0}};
}

HfModelConfig parse(const json& config) { return parse_hf_config(config.dump(), "config.json"); }

// Expects parsing to throw one line naming config.json and every part.
void expect_refused(const json& config, std::initializer_list<std::string> parts) {
  try {
    parse(config);
    ADD_FAILURE() << "accepted " << config.dump();
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
    for (const std::string& p : parts) {
      EXPECT_NE(message.find(p), std::string::npos) << message << " lacks " << p;
    }
  }
}

TEST(HfConfigFamilies, Llama31RopeScaling) {
  json c = base("llama");
  c["rope_theta"] = 500000.0;
  c["pretraining_tp"] = 1;
  c["mlp_bias"] = false;
  c["attention_bias"] = false;
  c["rope_scaling"] = {{"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192},
                       {"rope_type", "llama3"}};
  const HfModelConfig hf = parse(c);
  EXPECT_EQ(hf.model_type, "llama");
  EXPECT_EQ(hf.shape.rope_scaling.kind, RopeScaling::Kind::llama3);
  EXPECT_DOUBLE_EQ(hf.shape.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(hf.shape.rope_scaling.original_max_positions, 8192.0);
  EXPECT_FALSE(hf.shape.qkv_bias || hf.shape.o_bias);
  c["rope_scaling"] = {{"type", "default"}};  // legacy spelling, no scaling
  EXPECT_EQ(parse(c).shape.rope_scaling.kind, RopeScaling::Kind::none);
  c["attention_bias"] = true;
  EXPECT_TRUE(parse(c).shape.qkv_bias && parse(c).shape.o_bias);
}

TEST(HfConfigFamilies, QwenMistralFields) {
  json qwen2 = base("qwen2");
  qwen2["use_sliding_window"] = false;
  qwen2["sliding_window"] = 131072;
  qwen2["max_window_layers"] = 28;
  qwen2["rope_scaling"] = nullptr;
  const LayerShape q2 = parse(qwen2).shape;
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_FALSE(q2.o_bias || q2.qk_norm);
  EXPECT_EQ(q2.sliding_window, 0);  // use_sliding_window false: no window

  json qwen3 = base("qwen3");
  qwen3["head_dim"] = 32;  // ≠ 64 / 4
  qwen3["attention_bias"] = false;
  qwen3["use_sliding_window"] = false;
  qwen3["sliding_window"] = nullptr;
  qwen3["layer_types"] = {"full_attention", "full_attention"};
  const LayerShape q3 = parse(qwen3).shape;
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_FALSE(q3.qkv_bias || q3.o_bias);
  EXPECT_EQ(q3.head_dim, 32);

  json mistral = base("mistral");
  mistral["sliding_window"] = 4096;
  EXPECT_EQ(parse(mistral).shape.sliding_window, 4096);
  mistral["sliding_window"] = nullptr;  // Mistral v0.2 and later
  EXPECT_EQ(parse(mistral).shape.sliding_window, 0);
}

// DeepSeek-V2-Lite's config.json (its keys and values; yarn rope scaling as released).
json deepseek_v2_lite() {
  json c = base("deepseek_v2");
  c["hidden_size"] = 2048;
  c["num_attention_heads"] = 16;
  c["num_key_value_heads"] = 16;
  c["intermediate_size"] = 10944;
  c["num_hidden_layers"] = 27;
  c["max_position_embeddings"] = 163840;
  c["rms_norm_eps"] = 1e-6;
  c["rope_theta"] = 10000;
  c["kv_lora_rank"] = 512;
  c["q_lora_rank"] = nullptr;
  c["qk_nope_head_dim"] = 128;
  c["qk_rope_head_dim"] = 64;
  c["v_head_dim"] = 128;
  c["first_k_dense_replace"] = 1;
  c["moe_layer_freq"] = 1;
  c["moe_intermediate_size"] = 1408;
  c["n_routed_experts"] = 64;
  c["n_shared_experts"] = 2;
  c["num_experts_per_tok"] = 6;
  c["n_group"] = 1;
  c["topk_group"] = 1;
  c["topk_method"] = "greedy";
  c["norm_topk_prob"] = false;
  c["scoring_func"] = "softmax";
  c["routed_scaling_factor"] = 1.0;
  c["aux_loss_alpha"] = 0.001;
  c["seq_aux"] = true;
  c["attention_bias"] = false;
  c["pretraining_tp"] = 1;
  c["auto_map"] = {{"AutoConfig", "configuration_deepseek.DeepseekV2Config"}};
  c["rope_scaling"] = {
      {"type", "yarn"},         {"factor", 40},   {"original_max_position_embeddings", 4096},
      {"beta_fast", 32},        {"beta_slow", 1}, {"mscale", 0.707},
      {"mscale_all_dim", 0.707}};
  return c;
}

TEST(HfConfigFamilies, DeepseekV2LatentAttention) {
  json c = deepseek_v2_lite();
  HfModelConfig hf = parse(c);
  EXPECT_EQ(hf.model_type, "deepseek_v2");
  EXPECT_EQ(hf.shape.mla.kv_lora_rank, 512);
  EXPECT_EQ(hf.shape.mla.q_lora_rank, 0);  // null: q_proj
  EXPECT_EQ(hf.shape.mla.qk_nope_head_dim, 128);
  EXPECT_EQ(hf.shape.mla.qk_rope_head_dim, 64);
  EXPECT_EQ(hf.shape.mla.v_head_dim, 128);
  EXPECT_EQ(hf.shape.head_dim, 64);  // transformers: head_dim = qk_rope_head_dim
  EXPECT_EQ(hf.first_moe_layer, 1);
  EXPECT_EQ(hf.shape.rope_scaling.kind, RopeScaling::Kind::yarn);
  // Read for sizes, refused when computed, by name.
  hf.shape.capacity = 16;
  try {
    LayerConfig config(hf.shape);
    ADD_FAILURE() << "yarn accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rope_scaling type \"yarn\""), std::string::npos);
  }
  c["rope_scaling"] = nullptr;
  hf = parse(c);
  hf.shape.capacity = 16;
  const LayerConfig config(hf.shape);
  EXPECT_TRUE(config.is_mla());
  EXPECT_EQ(config.kv_cache_bytes(KvDtype::f32), 16u * (512 + 64) * 4);
  c["q_lora_rank"] = 1536;  // DeepSeek-V2 (the large one)
  EXPECT_EQ(parse(c).shape.mla.q_lora_rank, 1536);
  c.erase("q_lora_rank");  // transformers' default
  EXPECT_EQ(parse(c).shape.mla.q_lora_rank, 1536);
  c.erase("first_k_dense_replace");  // transformers' default 0: every layer is MoE
  EXPECT_EQ(parse(c).first_moe_layer, 0);
  EXPECT_EQ(parse(base("llama")).first_moe_layer, -1);
}

TEST(HfConfigFamilies, DeepseekV2RefusesWhatItDoesNotImplement) {
  const auto with = [](const char* key, const json& value) {
    json c = deepseek_v2_lite();
    c[key] = value;
    return c;
  };
  expect_refused(with("attention_bias", true), {"attention_bias", "deepseek_v2"});
  expect_refused(with("mlp_bias", true), {"mlp_bias"});
  expect_refused(with("moe_layer_freq", 2), {"moe_layer_freq"});
  expect_refused(with("head_dim", 128), {"head_dim", "qk_rope_head_dim"});
  expect_refused(with("num_key_value_heads", 1), {"num_key_value_heads", "deepseek_v2"});
  expect_refused(with("qk_rope_head_dim", 63), {"qk_rope_head_dim", "even"});
  expect_refused(with("kv_lora_rank", 0), {"kv_lora_rank"});
  expect_refused(with("num_nextn_predict_layers", 1), {"\"num_nextn_predict_layers\""});
  expect_refused(with("rope_scaling", {{"type", "yarn"}, {"factor", 40}, {"extra", 1}}),
                 {"rope_scaling", "extra"});
  json missing = deepseek_v2_lite();
  missing.erase("v_head_dim");
  expect_refused(missing, {"v_head_dim"});
  json llama_yarn = base("llama");  // other families refuse yarn while parsing
  llama_yarn["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expect_refused(llama_yarn, {"rope_scaling", "yarn"});
}

TEST(HfConfigFamilies, RefusesWhatItDoesNotImplementNamingIt) {
  expect_refused(base("gemma2"), {"model_type \"gemma2\"", "llama, mistral, qwen2, qwen3"});
  expect_refused(base("deepseek_v3"), {"model_type \"deepseek_v3\"", "deepseek_v2"});
  json no_type = base("llama");
  no_type.erase("model_type");
  expect_refused(no_type, {"model_type"});

  for (const char* key :
       {"attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar",
        "partial_rotary_factor", "quantization_config", "rope_parameters", "some_future_key"}) {
    json c = base("llama");
    c[key] = 1;
    expect_refused(c, {std::string("\"") + key + "\"", "llama"});
  }
  json llama_window = base("llama");  // a key of another family is not understood here
  llama_window["sliding_window"] = 4096;
  expect_refused(llama_window, {"\"sliding_window\"", "\"llama\""});

  for (const char* type : {"yarn", "linear", "dynamic", "longrope"}) {
    json c = base("llama");
    c["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
    expect_refused(c, {"rope_scaling", type});
  }
  json extra = base("llama");
  extra["rope_scaling"] = {{"rope_type", "llama3"},
                           {"factor", 8.0},
                           {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0},
                           {"original_max_position_embeddings", 8192},
                           {"attention_factor", 2.0}};
  expect_refused(extra, {"rope_scaling", "attention_factor"});
  json partial = base("llama");
  partial["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  expect_refused(partial, {"rope_scaling.low_freq_factor"});

  json qwen_window = base("qwen2");
  qwen_window["use_sliding_window"] = true;
  qwen_window["sliding_window"] = 4096;
  expect_refused(qwen_window, {"use_sliding_window"});
  json sliding_layers = base("qwen3");
  sliding_layers["layer_types"] = {"full_attention", "sliding_attention"};
  expect_refused(sliding_layers, {"layer_types", "sliding_attention"});
  json gelu = base("mistral");
  gelu["hidden_act"] = "gelu";
  expect_refused(gelu, {"hidden_act", "gelu"});
  json mlp_bias = base("llama");
  mlp_bias["mlp_bias"] = true;
  expect_refused(mlp_bias, {"mlp_bias"});
}

}  // namespace
}  // namespace kvscope
