// config.json of each supported family parsed into the fields that change the math, and
// every key, rope type and model_type kvscope does not implement refused with its name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

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

TEST(HfConfigFamilies, RefusesWhatItDoesNotImplementNamingIt) {
  expect_refused(base("gemma2"), {"model_type \"gemma2\"", "llama, mistral, qwen2, qwen3"});
  json deepseek = base("deepseek_v2");
  deepseek["kv_lora_rank"] = 512;
  expect_refused(deepseek, {"deepseek_v2", "kv_lora_rank"});
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
