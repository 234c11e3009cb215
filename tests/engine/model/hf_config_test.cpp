// config.json parsing: defaults, head_dim, and one error naming the field per bad config.
#include "engine/model/hf_config.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "support/model_files.hpp"

namespace kvscope {
namespace {

HfModelConfig parse(const std::string& text) { return parse_hf_config(text, "config.json"); }

void expect_error(const std::string& text, const std::string& part) {
  try {
    parse(text);
    FAIL() << "no exception for " << text;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(HfConfig, Llama2Defaults) {
  const HfModelConfig c =
      parse(R"({"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
      "intermediate_size": 11008, "num_hidden_layers": 32, "rms_norm_eps": 1e-05})");
  EXPECT_EQ(c.shape.hidden_size, 4096);
  EXPECT_EQ(c.shape.n_heads, 32);
  EXPECT_EQ(c.shape.n_kv_heads, 32);  // default = heads
  EXPECT_EQ(c.shape.head_dim, 128);   // hidden / heads
  EXPECT_EQ(c.shape.ffn_size, 11008);
  EXPECT_DOUBLE_EQ(c.shape.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.shape.rope_theta, 10000.0);
  EXPECT_EQ(c.num_hidden_layers, 32);
  EXPECT_EQ(c.shape.rope_scaling.kind, RopeScaling::Kind::none);
  EXPECT_FALSE(c.shape.qkv_bias || c.shape.o_bias || c.shape.qk_norm);
  EXPECT_EQ(c.shape.sliding_window, 0);
}

TEST(HfConfig, GqaExplicitHeadDimAndThetaAndNulls) {
  const HfModelConfig c =
      parse(R"({"model_type": "llama", "hidden_size": 3072, "num_attention_heads": 24,
      "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 8192, "rope_theta": 500000.0,
      "max_position_embeddings": 8192, "rope_scaling": null, "attention_bias": false})");
  EXPECT_EQ(c.shape.n_kv_heads, 8);
  EXPECT_EQ(c.shape.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.shape.rope_theta, 500000.0);
  EXPECT_EQ(c.shape.capacity, 8192);
  EXPECT_EQ(c.shape.rope_scaling.kind, RopeScaling::Kind::none);
  EXPECT_EQ(parse(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
      "intermediate_size": 8, "head_dim": null})")
                .shape.head_dim,
            16);
}

TEST(HfConfig, LoadLayerShapeFromFile) {
  test::TempDir dir;
  test::write_bytes(dir / "config.json",
                    R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                        "intermediate_size": 96})");
  EXPECT_EQ(load_layer_shape(dir / "config.json").head_dim, 16);
  EXPECT_THROW(load_layer_shape(dir / "absent.json"), std::runtime_error);
}

TEST(HfConfig, RefusesBadConfigsNamingTheField) {
  const std::string base =
      R"("model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 96)";
  expect_error("{not json", "not valid JSON");
  expect_error("[1]", "not a JSON object");
  expect_error(R"({"model_type": "llama", "num_attention_heads": 4, "intermediate_size": 96})",
               "\"hidden_size\"");
  expect_error(R"({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})",
               "\"intermediate_size\"");
  expect_error(R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 96})",
               "\"num_attention_heads\"");
  expect_error(
      R"({"model_type": "llama", "hidden_size": "64", "num_attention_heads": 4, "intermediate_size": 96})",
      "\"hidden_size\" must be a positive integer");
  expect_error(
      R"({"model_type": "llama", "hidden_size": 0, "num_attention_heads": 4, "intermediate_size": 96})",
      "\"hidden_size\"");
  expect_error(
      R"({"model_type": "llama", "hidden_size": 64.5, "num_attention_heads": 4, "intermediate_size": 96})",
      "\"hidden_size\"");
  expect_error("{" + base + R"(, "num_key_value_heads": 3})",
               "num_attention_heads (4) is not a multiple of num_key_value_heads (3)");
  expect_error(
      R"({"model_type": "llama", "hidden_size": 65, "num_attention_heads": 4, "intermediate_size": 96})",
      "not divisible");
  expect_error("{" + base + R"(, "head_dim": 15})", "head_dim (15) must be even");
  expect_error("{" + base + R"(, "rms_norm_eps": -1})", "\"rms_norm_eps\"");
  expect_error("{" + base + R"(, "rope_theta": "x"})", "\"rope_theta\"");
}

}  // namespace
}  // namespace kvscope
