// Loading a layer from a model directory and running it: every dtype, MHA/GQA/MQA,
// head_dim ≠ hidden/heads, a sharded index, prefill/decode splits, against the float64
// reference; and one clear error per model directory that disagrees with itself.
#include "engine/model/model_loader.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "engine/decoder_layer.hpp"
#include "support/model_files.hpp"
#include "support/reference_layer.hpp"
#include "support/run_split.hpp"

namespace kvscope {
namespace {

using test::TempDir;

LayerShape small_shape(std::int64_t heads, std::int64_t kv_heads, std::int64_t head_dim) {
  return {.hidden_size = 64,
          .n_heads = heads,
          .n_kv_heads = kv_heads,
          .head_dim = head_dim,
          .ffn_size = 96,
          .rms_norm_eps = 1e-5,
          .rope_theta = 10000.0,
          .capacity = 9};
}

using test::run_split;

struct Variant {
  const char* dtype;
  std::int64_t heads, kv_heads, head_dim;
  bool sharded;
};

void PrintTo(const Variant& v, std::ostream* os) {
  *os << v.dtype << " heads " << v.heads << " kv " << v.kv_heads << " head_dim " << v.head_dim
      << (v.sharded ? " sharded" : "");
}

class LoadAndRun : public ::testing::TestWithParam<Variant> {};

TEST_P(LoadAndRun, MatchesFloat64ReferenceForEverySplit) {
  const Variant v = GetParam();
  TempDir dir;
  const LayerShape shape = small_shape(v.heads, v.kv_heads, v.head_dim);
  const LayerWeights expected = test::write_model(dir.path(), shape, v.dtype, v.sharded);
  const LayerConfig config(shape);
  const LayerWeights loaded = load_layer_weights(dir.path(), 1, config);
  EXPECT_EQ(loaded.wq.to_f32(), expected.wq.to_f32());
  EXPECT_EQ(loaded.w_down.to_f32(), expected.w_down.to_f32());
  // Read in place, in the file's own type: no f32 copy of a bf16 checkpoint.
  EXPECT_TRUE(loaded.wq.is_borrowed());
  const std::string stored = v.dtype;
  EXPECT_EQ(to_string(loaded.w_down.dtype()),
            stored == "F32" ? "f32" : stored == "BF16" ? "bf16" : "f16");
  EXPECT_EQ(loaded.mlp_norm, expected.mlp_norm);

  const std::size_t n = 9;
  const std::vector<float> x = test::test_input(n, 64, 3);
  const std::vector<double> want = test::reference_layer(shape, expected, x, n);
  for (Isa isa : {Isa::scalar, best_isa()}) {
    for (std::size_t prefill : {n, std::size_t{0}, std::size_t{1}, std::size_t{5}}) {
      DecoderLayer layer(config, loaded, {.kv_dtype = KvDtype::f32, .isa = isa, .threads = 2});
      const std::vector<float> got = run_split(layer, x, n, prefill);
      EXPECT_LT(test::relative_error(got, want), 1e-4) << to_string(isa) << " prefill " << prefill;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LoadAndRun,
                         ::testing::Values(Variant{"F32", 4, 4, 16, false},   // MHA
                                           Variant{"F16", 4, 2, 16, false},   // GQA
                                           Variant{"BF16", 4, 1, 16, false},  // MQA
                                           Variant{"F32", 4, 2, 24, false},  // head_dim 24 ≠ 64 / 4
                                           Variant{"BF16", 8, 2, 8, true},  // sharded index
                                           Variant{"F16", 2, 1, 40, true}),
                         [](const auto& info) {
                           const Variant& v = info.param;
                           return std::string(v.dtype) + "_h" + std::to_string(v.heads) + "_kv" +
                                  std::to_string(v.kv_heads) + "_d" + std::to_string(v.head_dim) +
                                  (v.sharded ? "_sharded" : "");
                         });

// Expects loading layer `layer` of `dir` under `shape` to throw naming each of `parts`.
void expect_load_error(const std::filesystem::path& dir, const LayerShape& shape, std::size_t layer,
                       std::initializer_list<std::string> parts) {
  try {
    load_layer_weights(dir, layer, LayerConfig(shape));
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    for (const std::string& p : parts) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
    }
  }
}

TEST(ModelLoader, ConfigDisagreeingWithTensorsNamesTensorAndFields) {
  TempDir dir;
  const LayerShape shape = small_shape(4, 2, 16);
  test::write_model(dir.path(), shape, "F32", false);
  LayerShape wrong = shape;
  wrong.n_kv_heads = 4;
  expect_load_error(dir.path(), wrong, 0,
                    {"model.safetensors", "model.layers.0.self_attn.k_proj.weight", "[32, 64]",
                     "[64, 64]", "num_key_value_heads"});
  wrong = shape;
  wrong.ffn_size = 128;
  expect_load_error(dir.path(), wrong, 0, {"mlp.gate_proj.weight", "intermediate_size"});
}

TEST(ModelLoader, MissingFilesAndTensors) {
  TempDir dir;
  const LayerShape shape = small_shape(4, 2, 16);
  expect_load_error(dir.path(), shape, 0, {"neither model.safetensors"});
  test::write_model(dir.path(), shape, "F32", false);
  expect_load_error(dir.path(), shape, 2,
                    {"model.safetensors", "model.layers.2.self_attn.q_proj.weight", "not found"});
}

TEST(ModelLoader, BadIndexEntries) {
  TempDir dir;
  const LayerShape shape = small_shape(4, 2, 16);
  test::write_model(dir.path(), shape, "F32", true);
  const auto index_path = dir / "model.safetensors.index.json";
  auto index = nlohmann::json::parse(test::read_bytes(index_path));
  const std::string q0 = "model.layers.0.self_attn.q_proj.weight";

  index["weight_map"].erase(q0);
  test::write_bytes(index_path, index.dump());
  expect_load_error(dir.path(), shape, 0, {"index.json", q0, "missing from weight_map"});

  index["weight_map"][q0] = "../outside.safetensors";
  test::write_bytes(index_path, index.dump());
  expect_load_error(dir.path(), shape, 0, {"index.json", q0, "not a file in the model directory"});

  index["weight_map"][q0] = "model-00002-of-00002.safetensors";  // the other shard
  test::write_bytes(index_path, index.dump());
  expect_load_error(dir.path(), shape, 0, {"model-00002-of-00002.safetensors", q0, "not found"});

  index["weight_map"][q0] = "model-00009-of-00009.safetensors";
  test::write_bytes(index_path, index.dump());
  expect_load_error(dir.path(), shape, 0, {"model-00009-of-00009.safetensors", "cannot open"});

  test::write_bytes(index_path, "{\"weight_map\": 3}");
  expect_load_error(dir.path(), shape, 0, {"index.json", "weight_map"});
  test::write_bytes(index_path, "not json");
  expect_load_error(dir.path(), shape, 0, {"index.json", "not a JSON object"});
}

TEST(ModelLoader, TruncatedShardNamesTheFile) {
  TempDir dir;
  const LayerShape shape = small_shape(4, 2, 16);
  test::write_model(dir.path(), shape, "BF16", false);
  const std::string bytes = test::read_bytes(dir / "model.safetensors");
  test::write_bytes(dir / "model.safetensors", bytes.substr(0, bytes.size() - 100));
  expect_load_error(dir.path(), shape, 0, {"model.safetensors", "extend past"});
}

}  // namespace
}  // namespace kvscope
