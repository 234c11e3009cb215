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

// decode under a window times the step a model makes at that context: over the W cached rows.
TEST(DecodeWindow, TimesTheWindowNotTheContext) {
  const std::string shape =
      "decode --heads 4 --kv-heads 2 --d-head 16 --steps 2 --threads 1 --cache-state warm "
      "--window 64 --tokens ";
  const test::CommandResult r = test::kvscope(shape + "100 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tokens"], 64);
  EXPECT_EQ(j["context"], 100);
  EXPECT_EQ(j["window"], 64);
  EXPECT_EQ(j["bytes_read_per_step"], 2 * 2 * 16 * 4 * 64);
  const test::CommandResult text = test::kvscope(shape + "100");
  EXPECT_NE(text.out.find("sliding window 64: at a context of 100 tokens"), std::string::npos)
      << text.out;
  const nlohmann::json inside =
      nlohmann::json::parse(test::kvscope(shape + "50 --json").out);  // within the window
  EXPECT_EQ(inside["tokens"], 50);
}

// A small report: 4 heads × 16, f32, warm, no layer.
test::CommandResult small_report(const std::string& args) {
  return test::kvscope(
      "report --json --heads 4 --d-head 16 --kv-dtypes f32 --steps 2 --threads 1 --no-layer "
      "--cache-state warm " +
      args);
}

// The JSON rows after any note on stderr (the output holds both).
nlohmann::json report_rows(const test::CommandResult& r) {
  EXPECT_EQ(r.status, 0) << r.out;
  const std::size_t start = r.out.find('[');
  if (start == std::string::npos) return nlohmann::json::array();
  return nlohmann::json::parse(r.out.substr(start), nullptr, false);
}

TEST(ReportWindow, RowsBesideTheFullRowsReadOnlyTheWindow) {
  const nlohmann::json rows =
      report_rows(small_report("--kv-heads 4,2,1 --tokens 40,100 --window 64,32"));
  // 40: MHA, GQA-2, MQA, GQA-2 SWA-32; 100: the three full rows, SWA-64 and SWA-32.
  ASSERT_EQ(rows.size(), 9u) << rows.dump(1);
  const std::uint64_t per_token = 2 * 2 * 16 * 4;  // K and V of the 2 kv heads of GQA-2, f32
  EXPECT_EQ(rows[3]["variant"], "GQA-2 SWA-32");
  EXPECT_EQ(rows[3]["tokens"], 40);
  EXPECT_EQ(rows[3]["window"], 32);
  EXPECT_EQ(rows[3]["bytes_read_per_step"], per_token * 32);
  EXPECT_EQ(rows[7]["variant"], "GQA-2 SWA-64");
  EXPECT_EQ(rows[7]["tokens"], 100);
  EXPECT_EQ(rows[7]["window"], 64);
  EXPECT_EQ(rows[7]["cache_bytes"], per_token * 64);
  EXPECT_EQ(rows[7]["bytes_read_per_step"], per_token * 64);
  EXPECT_EQ(rows[7]["flops_per_step"], 4 * 4 * 16 * 64);
  EXPECT_EQ(rows[8]["variant"], "GQA-2 SWA-32");
  EXPECT_EQ(rows[8]["bytes_read_per_step"], per_token * 32);
  // The full rows hold their whole context, as without --window.
  for (int i : {0, 1, 2, 4, 5, 6}) {
    EXPECT_EQ(rows[i]["window"], 0) << i;
    EXPECT_EQ(rows[i]["bytes_read_per_step"], 2 * rows[i]["n_kv_heads"].get<std::uint64_t>() * 16 *
                                                  4 * rows[i]["tokens"].get<std::uint64_t>())
        << i;
  }
  EXPECT_EQ(rows[5]["variant"], "GQA-2");
  EXPECT_EQ(rows[5]["bytes_read_per_step"], per_token * 100);
}

TEST(ReportWindow, AWindowAtOrAboveEveryContextAddsNoRow) {
  const test::CommandResult r = small_report("--kv-heads 1 --tokens 40,64 --window 64");
  const nlohmann::json rows = report_rows(r);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[1]["window"], 0);
  EXPECT_NE(r.out.find("sliding window 64 is not below any context"), std::string::npos) << r.out;
}

TEST(ReportWindow, BadWindowsNameTheFlag) {
  for (const char* bad : {"0", "=-3", "abc", "64,x", "64,,32"}) {
    const std::string arg = std::string(bad).front() == '=' ? "--window" + std::string(bad)
                                                            : "--window " + std::string(bad);
    const test::CommandResult r = small_report("--kv-heads 1 --tokens 40 " + arg);
    EXPECT_NE(r.status, 0) << bad << ": " << r.out;
    EXPECT_NE(r.out.find("--window"), std::string::npos) << bad << ": " << r.out;
  }
}

// Mistral 7B v0.1's 4,096-token window adds its rows beside the full ones instead of
// windowing every row: at 4,100 tokens the window row caches 4,096.
TEST(ReportWindow, MistralPresetAddsItsWindowRow) {
  const nlohmann::json rows = report_rows(test::kvscope(
      "report --json --model mistral-7b-v0.1 --layers 1 --kv-heads 8 --kv-dtypes int8 "
      "--tokens 4100 --steps 1 --repetitions 1 --threads 1 --no-layer --cache-state warm"));
  ASSERT_EQ(rows.size(), 2u) << rows.dump(1);
  const std::uint64_t per_token = 8 * 2 * (128 + 4);  // int8 K and V and an f32 scale each
  EXPECT_EQ(rows[0]["variant"], "GQA-8");
  EXPECT_EQ(rows[0]["cache_bytes"], per_token * 4100);
  EXPECT_EQ(rows[1]["variant"], "GQA-8 SWA-4096");
  EXPECT_EQ(rows[1]["tokens"], 4100);
  EXPECT_EQ(rows[1]["window"], 4096);
  EXPECT_EQ(rows[1]["bytes_read_per_step"], per_token * 4096);
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
