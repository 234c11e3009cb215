// DeepSeek-V2 (multi-head latent attention) through the built binary: `kvscope run` on a
// dense layer matches the float64 reference for every split (BF16 weights, q_lora_rank set);
// what it does not implement (a mixture-of-experts layer or tensor, yarn rope scaling, a
// quantized latent cache) is refused in one line naming it, writing nothing; `kvscope size`
// reports variant MLA and the latent + rope bytes for the deepseek-v2-lite preset and for a
// config.json; `kvscope report` gives one MLA row per context with the same columns (FLOPs
// of the absorbed read, latent + rope bytes, the full layer's step; no prefill); decode
// refuses an MLA model rather than measure another shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/model/npy.hpp"
#include "support/kvscope_command.hpp"
#include "support/model_files.hpp"
#include "support/reference_layer.hpp"
#include "support/reference_mla.hpp"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kRows = 7;

LayerShape mla_shape() {
  LayerShape s{.hidden_size = 32,
               .n_heads = 4,
               .n_kv_heads = 4,
               .head_dim = 8,
               .ffn_size = 48,
               .rms_norm_eps = 1e-6,
               .rope_theta = 10000.0,
               .capacity = 1};
  s.mla = {.kv_lora_rank = 24,
           .q_lora_rank = 16,
           .qk_nope_head_dim = 8,
           .qk_rope_head_dim = 8,
           .v_head_dim = 12};
  return s;
}

class RunMla : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_ / "model";
    fs::create_directory(model_);
    x_ = test::test_input(kRows, 32, 11);
    write_npy(dir_ / "x.npy", std::vector<std::uint64_t>{kRows, 32}, x_);
  }
  std::string args(const std::string& extra = "") const {
    return "run --model " + model_.string() + " --layer 1 --input " + (dir_ / "x.npy").string() +
           " --output " + output().string() + extra;
  }
  fs::path output() const { return dir_ / "y.npy"; }
  fs::path config() const { return model_ / "config.json"; }

  // The run fails with one line naming every part, and no output file appears.
  void expect_refused(const std::string& extra, std::initializer_list<std::string> parts) {
    fs::remove(output());
    const test::CommandResult r = test::kvscope(args(extra));
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    for (const std::string& p : parts) {
      EXPECT_NE(r.out.find(p), std::string::npos) << "\"" << r.out << "\" lacks " << p;
    }
    EXPECT_FALSE(fs::exists(output())) << r.out;
  }
  void edit_config(const char* key, const nlohmann::json& value) {
    nlohmann::json c = nlohmann::json::parse(test::read_bytes(config()));
    c[key] = value;
    test::write_bytes(config(), c.dump());
  }

  test::TempDir dir_;
  fs::path model_;
  std::vector<float> x_;
};

TEST_F(RunMla, DenseLayerMatchesTheReferenceForEverySplit) {
  const LayerShape s = mla_shape();
  const LayerWeights w = test::write_model(model_, s, "BF16", false, 7, "deepseek_v2");
  const std::vector<double> want = test::reference_mla_layer(s, w, x_, kRows);
  for (const std::string split : {"", " --prefill 0", " --prefill 4", " --isa scalar"}) {
    const std::string extra = " --compute exact" + split;
    fs::remove(output());
    const test::CommandResult r = test::kvscope(args(extra));
    ASSERT_EQ(r.status, 0) << extra << ": " << r.out;
    EXPECT_NE(r.out.find("MLA"), std::string::npos) << r.out;
    EXPECT_LT(test::relative_error(read_npy(output()).data, want), 1e-4) << extra;
  }
}

TEST_F(RunMla, RefusesWhatItDoesNotImplementAndWritesNothing) {
  const LayerShape s = mla_shape();
  test::write_model(model_, s, "F32", false, 7, "deepseek_v2");
  expect_refused(" --kv-dtype int8", {"MLA", "f32 only", "int8"});
  edit_config("first_k_dense_replace", 1);  // layer 1 is then MoE
  expect_refused("", {"--layer", "mixture-of-experts", "first_k_dense_replace 1"});
  edit_config("first_k_dense_replace", 2);
  edit_config("rope_scaling", {{"type", "yarn"},
                               {"factor", 40},
                               {"original_max_position_embeddings", 4096},
                               {"beta_fast", 32},
                               {"beta_slow", 1},
                               {"mscale", 0.707},
                               {"mscale_all_dim", 0.707}});
  expect_refused("", {"config.json", "rope_scaling type \"yarn\""});
  edit_config("rope_scaling", nullptr);
  edit_config("attention_bias", true);
  expect_refused("", {"config.json", "attention_bias"});
  edit_config("attention_bias", false);

  // A layer with MoE tensors although the config calls it dense: named by the loader.
  auto tensors = test::layer_tensors(s, test::test_weights(s, 7, "F32"), 1, "F32");
  tensors["model.layers.1.mlp.experts.0.gate_proj.weight"] = {"F32", {1}, std::string(4, '\0')};
  test::write_bytes(model_ / "model.safetensors", test::safetensors_bytes(tensors));
  expect_refused("", {"model.layers.1.mlp.experts.0.gate_proj.weight", "mixture-of-experts"});
}

nlohmann::json size_json(const std::string& args) {
  const test::CommandResult r = test::kvscope("size --json " + args);
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(SizeMla, DeepseekV2LitePresetAndConfig) {
  const nlohmann::json lite = size_json("--model deepseek-v2-lite --tokens 1000");
  EXPECT_EQ(lite["variant"], "MLA");
  EXPECT_EQ(lite["n_heads"], 16);
  EXPECT_EQ(lite["layers"], 27);
  EXPECT_EQ(lite["kv_lora_rank"], 512);
  EXPECT_EQ(lite["qk_rope_head_dim"], 64);
  EXPECT_EQ(lite["bytes_per_token_layer"], (512 + 64) * 4);  // 2,304
  EXPECT_EQ(lite["bytes_per_token"], 2304 * 27);
  EXPECT_EQ(lite["total_bytes"], 2304ull * 27 * 1000);

  test::TempDir dir;
  LayerShape s = mla_shape();
  test::write_bytes(dir / "config.json", test::config_json(s, 3, "deepseek_v2").dump());
  const nlohmann::json j = size_json("--tokens 10 --config " + (dir / "config.json").string());
  EXPECT_EQ(j["variant"], "MLA");
  EXPECT_EQ(j["bytes_per_token_layer"], (24 + 8) * 4);
  EXPECT_EQ(j["layers"], 3);

  const test::CommandResult text = test::kvscope("size --model deepseek-v2-lite");
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("latent"), std::string::npos) << text.out;

  for (const std::string bad :
       {"size --model deepseek-v2-lite --kv-dtype int8",
        "size --model deepseek-v2-lite --d-head 64", "size --model deepseek-v2-lite --kv-heads 1",
        "decode --model deepseek-v2-lite",
        "report --model deepseek-v2-lite --kv-dtypes f32,int8"}) {
    const test::CommandResult r = test::kvscope(bad);
    EXPECT_NE(r.status, 0) << bad << ": " << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << bad << ": " << r.out;
    EXPECT_TRUE(r.out.find("MLA") != std::string::npos) << bad << ": " << r.out;
  }
}

TEST(ReportMla, OneRowPerContextWithTheAbsorbedAccounting) {
  test::TempDir dir;
  test::write_bytes(dir / "config.json", test::config_json(mla_shape(), 3, "deepseek_v2").dump());
  const std::string config = " --config " + (dir / "config.json").string();
  const test::CommandResult r =
      test::kvscope("report --json --tokens 32,64 --steps 2 --threads 1" + config);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_EQ(j.size(), 2u) << r.out;
  for (std::size_t i = 0; i < 2; ++i) {
    const std::int64_t tokens = i == 0 ? 32 : 64;
    EXPECT_EQ(j[i]["variant"], "MLA");
    EXPECT_EQ(j[i]["n_heads"], 4);
    EXPECT_EQ(j[i]["n_kv_heads"], 1);
    EXPECT_EQ(j[i]["head_dim"], 24 + 8);
    EXPECT_EQ(j[i]["tokens"], tokens);
    EXPECT_EQ(j[i]["bytes_read_per_step"], tokens * (24 + 8) * 4);
    EXPECT_EQ(j[i]["flops_per_step"], 2 * 4 * (2 * 24 + 8) * tokens);
    EXPECT_GT(j[i]["layer_tokens_per_s"].get<double>(), 0.0);
    EXPECT_EQ(j[i]["prefill_tokens_per_s"], 0.0);
    EXPECT_GT(j[i]["speed_of_light_seconds"].get<double>(), 0.0);
  }
  const test::CommandResult text =
      test::kvscope("report --tokens 32 --steps 2 --threads 1 --no-layer" + config);
  ASSERT_EQ(text.status, 0) << text.out;
  for (const char* part : {"MLA", "absorbed", "compute-heavier per byte", "Where the time goes"}) {
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  }
}

}  // namespace
}  // namespace kvscope
