// `kvscope size` and `report` with a sliding window: the new presets, --window, and --config
// of each family.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/kvscope_command.hpp"
#include "support/model_files.hpp"

namespace kvscope {
namespace {

nlohmann::json size_json(const std::string& args) {
  const test::CommandResult r = test::kvscope("size --json " + args);
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(SizeWindow, MistralV01StopsGrowingAtItsWindow) {
  // 8 kv heads × 128 × (K + V) × 4 bytes = 8,192 bytes per token and layer, 32 layers.
  const nlohmann::json past = size_json("--model mistral-7b-v0.1 --tokens 8192");
  EXPECT_EQ(past["window"], 4096);
  EXPECT_EQ(past["cached_tokens"], 4096);
  EXPECT_EQ(past["total_bytes"], 8192ull * 4096 * 32);
  EXPECT_EQ(size_json("--model mistral-7b-v0.1 --tokens 1000")["cached_tokens"], 1000);
  EXPECT_EQ(size_json("--model mistral-7b --tokens 8192")["cached_tokens"], 8192);
  EXPECT_EQ(size_json("--model llama-3.1-8b --tokens 10 --window 4")["total_bytes"],
            8192ull * 4 * 32);
  const test::CommandResult bad = test::kvscope("size --window 0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("--window"), std::string::npos) << bad.out;
}

TEST(SizeWindow, ReportRowsReadOnlyTheWindow) {
  const test::CommandResult r = test::kvscope(
      "report --json --heads 4 --d-head 16 --kv-heads 1 --kv-dtypes f32 --tokens 40,100 "
      "--window 64 --steps 2 --threads 1 --no-layer --cache-state warm");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["tokens"], 40);
  EXPECT_EQ(rows[1]["tokens"], 64);  // 100 tokens of context, 64 cached
  EXPECT_EQ(rows[1]["cache_bytes"], 2 * 64 * 16 * 4);
}

TEST(SizeWindow, NewPresetsCarryTheirShapes) {
  const nlohmann::json qwen25 = size_json("--model qwen2.5-7b --tokens 1");
  EXPECT_EQ(qwen25["n_heads"], 28);
  EXPECT_EQ(qwen25["n_kv_heads"], 4);
  EXPECT_EQ(qwen25["layers"], 28);
  const nlohmann::json qwen3 = size_json("--model qwen3-8b --tokens 1");
  EXPECT_EQ(qwen3["layers"], 36);
  EXPECT_EQ(qwen3["n_kv_heads"], 8);
}

TEST(SizeWindow, ConfigOfEveryFamily) {
  test::TempDir dir;
  LayerShape s{.hidden_size = 64, .n_heads = 4, .n_kv_heads = 2, .head_dim = 24, .ffn_size = 96};
  for (const char* type : {"llama", "qwen2", "qwen3", "mistral"}) {
    LayerShape shape = s;
    if (std::string(type) == "mistral") shape.sliding_window = 5;
    test::write_bytes(dir / "config.json", test::config_json(shape, 3, type).dump());
    const nlohmann::json j = size_json("--tokens 10 --config " + (dir / "config.json").string());
    EXPECT_EQ(j["head_dim"], 24) << type;
    EXPECT_EQ(j["cached_tokens"], std::string(type) == "mistral" ? 5 : 10) << type;
  }
  nlohmann::json gemma = test::config_json(s, 3, "gemma2");
  test::write_bytes(dir / "config.json", gemma.dump());
  const test::CommandResult r = test::kvscope("size --config " + (dir / "config.json").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("model_type \"gemma2\""), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kvscope
