// `kvscope run` on the families through the built binary: Qwen3 and a Mistral window match
// the float64 reference for every split; whatever it does not implement (a model_type, a
// config key, a rope type, a tensor nothing reads) is refused in one line naming it, and a
// refused run writes no output file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "engine/model/npy.hpp"
#include "support/kvscope_command.hpp"
#include "support/model_files.hpp"
#include "support/reference_layer.hpp"

namespace kvscope {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kRows = 7;

LayerShape shape() {
  return {.hidden_size = 32,
          .n_heads = 4,
          .n_kv_heads = 2,
          .head_dim = 12,
          .ffn_size = 48,
          .rms_norm_eps = 1e-6,
          .rope_theta = 10000.0,
          .capacity = 1};
}

class RunFamilies : public ::testing::Test {
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

  // The run fails with one line naming every part, and no output file appears.
  void expect_refused(std::initializer_list<std::string> parts) {
    fs::remove(output());
    const test::CommandResult r = test::kvscope(args());
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    for (const std::string& p : parts) {
      EXPECT_NE(r.out.find(p), std::string::npos) << "\"" << r.out << "\" lacks " << p;
    }
    EXPECT_FALSE(fs::exists(output())) << r.out;
  }

  test::TempDir dir_;
  fs::path model_;
  std::vector<float> x_;
};

TEST_F(RunFamilies, Qwen3AndMistralWindowMatchTheReferenceForEverySplit) {
  LayerShape qwen3 = shape();
  qwen3.head_dim = 16;  // ≠ 32 / 4
  qwen3.qk_norm = true;
  LayerShape mistral = shape();
  mistral.sliding_window = 3;
  for (const auto& [model_type, s] : {std::pair{"qwen3", qwen3}, std::pair{"mistral", mistral}}) {
    const LayerWeights w = test::write_model(model_, s, "BF16", false, 7, model_type);
    const std::vector<double> want = test::reference_layer(s, w, x_, kRows);
    // Exact: BF16 weights with --compute fast would round prefill activations to bf16.
    for (const std::string split : {"", " --prefill 0", " --prefill 4", " --isa scalar"}) {
      const std::string extra = " --compute exact" + split;
      fs::remove(output());
      const test::CommandResult r = test::kvscope(args(extra));
      ASSERT_EQ(r.status, 0) << model_type << extra << ": " << r.out;
      EXPECT_LT(test::relative_error(read_npy(output()).data, want), 1e-4) << model_type << extra;
    }
  }
}

TEST_F(RunFamilies, RefusedRunsNameWhatIsNotImplementedAndWriteNothing) {
  test::write_model(model_, shape(), "F32", false);
  const fs::path config = model_ / "config.json";
  const nlohmann::json good = nlohmann::json::parse(test::read_bytes(config));
  const auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json c = good;
    c[key] = value;
    test::write_bytes(config, c.dump());
  };
  with("model_type", "gemma2");
  expect_refused({"config.json", "model_type \"gemma2\""});
  with("attn_logit_softcapping", 50.0);
  expect_refused({"config.json", "\"attn_logit_softcapping\""});
  with("partial_rotary_factor", 0.5);
  expect_refused({"config.json", "\"partial_rotary_factor\""});
  with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}});
  expect_refused({"config.json", "rope_scaling type \"yarn\""});

  // Tensors nothing consumes: q/k/v biases beside a config without attention_bias, in one
  // file and in shards (named by the index); the first by name is k_proj's.
  LayerShape biased = shape();
  biased.qkv_bias = true;
  for (bool sharded : {false, true}) {
    fs::remove_all(model_);
    fs::create_directory(model_);
    test::write_model(model_, biased, "F32", sharded);
    expect_refused({sharded ? "model.safetensors.index.json" : "model.safetensors",
                    "'model.layers.1.self_attn.k_proj.bias' is not used"});
  }
}

}  // namespace
}  // namespace kvscope
