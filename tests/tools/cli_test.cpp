// The kvscope binary as a user runs it: outputs, JSON schemas, exit codes and error lines.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/measure/cold_caches.hpp"
#include "support/kvscope_command.hpp"

namespace {

using kvscope::test::CommandResult;
using kvscope::test::kvscope;
using kvscope::test::small_llc;

nlohmann::json json_of(const std::string& args) {
  const CommandResult r = kvscope(args);
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

TEST(KvscopeSize, DefaultIs32HeadsX128X2000Tokens) {
  const nlohmann::json j = json_of("size --json");
  EXPECT_EQ(j["total_bytes"], 65536000);
  EXPECT_EQ(j["k_bytes"], 32768000);
  EXPECT_EQ(j["v_bytes"], 32768000);
  EXPECT_EQ(j["scale_bytes"], 0);
  EXPECT_EQ(j["bytes_per_token"], 32768);
  const CommandResult text = kvscope("size");
  EXPECT_NE(text.out.find("65,536,000 bytes (62.50 MiB)"), std::string::npos) << text.out;
}

TEST(KvscopeSize, Int8LayersBatchAndGqa) {
  const nlohmann::json j =
      json_of("size --json --kv-heads 8 --kv-dtype int8 --layers 2 --batch 3 --tokens 1000");
  EXPECT_EQ(j["k_bytes"], 8 * 128 * 1000 * 2 * 3);
  EXPECT_EQ(j["scale_bytes"], 2 * 8 * 4 * 1000 * 2 * 3);
  EXPECT_EQ(j["total_bytes"], 2 * 8 * 128 * 1000 * 2 * 3 + 2 * 8 * 4 * 1000 * 2 * 3);
  EXPECT_EQ(j["bytes_per_token"], (2 * 8 * 128 + 2 * 8 * 4) * 2);
  EXPECT_EQ(j["variant"], "GQA-8");
}

TEST(KvscopeSize, ModelPresetsFillTheShapeAndFlagsOverride) {
  nlohmann::json j = json_of("size --json --model llama-3-8b");
  EXPECT_EQ(j["n_kv_heads"], 8);
  EXPECT_EQ(j["layers"], 32);
  EXPECT_EQ(j["total_bytes"], 2LL * 8 * 128 * 4 * 2000 * 32);
  j = json_of("size --json --model falcon-7b");
  EXPECT_EQ(j["n_heads"], 71);
  EXPECT_EQ(j["variant"], "MQA");
  EXPECT_EQ(j["head_dim"], 64);
  j = json_of("size --json --model tinyllama-1.1b --layers 1");
  EXPECT_EQ(j["layers"], 1);
  EXPECT_EQ(j["n_kv_heads"], 4);
  for (const char* name : {"llama-2-7b", "mistral-7b"}) {
    EXPECT_EQ(json_of(std::string("size --json --model ") + name)["n_heads"], 32);
  }
}

TEST(KvscopeTrace, LessonByDefault) {
  const nlohmann::json j = json_of("trace --json");
  EXPECT_EQ(j["raw_scores"], nlohmann::json({3.0, 2.0}));
  EXPECT_EQ(j["scaled_scores"], nlohmann::json({1.5, 1.0}));
  EXPECT_NEAR(j["weights"][0].get<double>(), 0.622, 5e-4);
  EXPECT_NEAR(j["weights"][1].get<double>(), 0.378, 5e-4);
  EXPECT_NEAR(j["output"][0].get<double>(), 0.622, 5e-4);
  const CommandResult text = kvscope("trace");
  for (const char* step :
       {"raw scores", "scaled", "causal mask", "softmax", "output", "62% of v1 and 38% of v2"}) {
    EXPECT_NE(text.out.find(step), std::string::npos) << step << "\n" << text.out;
  }
}

TEST(KvscopeTrace, PositionMasksLaterKeys) {
  const nlohmann::json j = json_of("trace --json --position 0");
  EXPECT_EQ(j["weights"], nlohmann::json({1.0, 0.0}));
  EXPECT_EQ(j["output"], nlohmann::json({1.0, 0.0}));
  EXPECT_TRUE(j["masked_scores"][1].is_null());  // −inf has no JSON number
}

TEST(KvscopeTrace, CustomVectorsNoScaleAndDHead) {
  nlohmann::json j = json_of(
      "trace --json --query 1,0,0 --key 1,0,0 --key 0,1,0 --value 5 "
      "--value 7 --no-scale");
  EXPECT_EQ(j["scaled_scores"], nlohmann::json({1.0, 0.0}));
  j = json_of("trace --json --query 2,1 --key 1,1 --key 0,2 --value 1,0 --value 0,1 --d-head 16");
  EXPECT_EQ(j["scaled_scores"], nlohmann::json({0.75, 0.5}));
}

TEST(KvscopeDecode, JsonHasTheMeasurementFields) {
  const nlohmann::json j = json_of(
      "decode --json --heads 4 --kv-heads 1 --d-head 32 --tokens 100 --steps 3 --threads 1 "
      "--kv-dtype bf16 --isa scalar");
  for (const char* key : {"attn_seconds_median", "attn_tokens_per_s", "bytes_read_per_step",
                          "attn_gbps", "isa", "kv_dtype", "threads"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["bytes_read_per_step"], 2 * 1 * 32 * 2 * 100);
  EXPECT_EQ(j["isa"], "scalar");
  EXPECT_EQ(j["kv_dtype"], "bf16");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_EQ(j["steps"], 3);
  EXPECT_GT(j["attn_tokens_per_s"].get<double>(), 0.0);
}

// --versus: a second configuration stepped in turn with the first; both sides' fields and the
// ratio of their steps.
TEST(KvscopeDecode, VersusTimesTwoConfigurationsInTurn) {
  const std::string args =
      "decode --heads 4 --kv-heads 2 --d-head 16 --tokens 100 --steps 3 --threads 1 "
      "--versus kv-layout=paged:16,kv-dtype=int8";
  const nlohmann::json j = json_of(args + " --json");
  EXPECT_EQ(j["a"]["kv_layout"], "contiguous");
  EXPECT_EQ(j["a"]["kv_dtype"], "f32");
  EXPECT_EQ(j["b"]["kv_layout"], "paged:16");
  EXPECT_EQ(j["b"]["kv_dtype"], "int8");
  EXPECT_EQ(j["a"]["steps"], 3);
  EXPECT_EQ(j["b"]["steps"], 3);
  EXPECT_EQ(j["versus"], "kv-layout=paged:16,kv-dtype=int8");
  EXPECT_EQ(j["b_over_a"]["pairs"], 3);
  EXPECT_LE(j["b_over_a"]["low"].get<double>(), j["b_over_a"]["median"].get<double>());
  EXPECT_LE(j["b_over_a"]["median"].get<double>(), j["b_over_a"]["high"].get<double>());
  EXPECT_GT(j["b_over_a"]["low"].get<double>(), 0.0);
  const CommandResult text = kvscope(args);
  EXPECT_EQ(text.status, 0) << text.out;
  for (const char* part : {"a: decode attention", "b: decode attention", "(paged:16)",
                           "÷ a, step by step: median", "over 3 pairs"}) {
    EXPECT_NE(text.out.find(part), std::string::npos) << part << " in:\n" << text.out;
  }
}

TEST(KvscopeDecode, ColdByDefaultWarmOnRequestAndLayersReadEveryCache) {
  ASSERT_TRUE(small_llc);
  const std::string shape = "decode --json --heads 4 --d-head 16 --tokens 64 --steps 2 ";
  const nlohmann::json cold = json_of(shape);
  EXPECT_EQ(cold["cache_state"], "cold");
  EXPECT_EQ(cold["cold_method"], "copies");
  EXPECT_EQ(cold["llc_bytes"], 1 << 20);
  EXPECT_EQ(cold["llc_source"], "KVSCOPE_LLC_BYTES");
  const std::uint64_t cache = 2 * 4 * 64 * 16 * 4;
  const auto llcs = static_cast<std::uint64_t>(kvscope::last_level_caches_reached(cold["threads"]));
  EXPECT_EQ(cold["caches_allocated"], (4 * llcs << 20) / cache + 2);
  const nlohmann::json warm = json_of(shape + "--cache-state warm --layers 3");
  EXPECT_EQ(warm["cache_state"], "warm");
  EXPECT_EQ(warm["caches_allocated"], 3);
  EXPECT_EQ(warm["layers"], 3);
  EXPECT_EQ(warm["bytes_read_per_step"], 3 * cache);
  EXPECT_EQ(warm["bytes_read_per_layer"], cache);
  const nlohmann::json flush = json_of(shape + "--cold-method flush");
  EXPECT_EQ(flush["cold_method"], "flush");
  EXPECT_EQ(flush["caches_allocated"], 1);
}

TEST(KvscopeDecode, ColdCopiesThatCannotFitAreRefusedWithTheBytes) {
  ::setenv("KVSCOPE_LLC_BYTES", "1024G", 1);  // 2 TiB of copies of a 65 kB cache
  const CommandResult r =
      kvscope("decode --tokens 1000 --heads 4 --d-head 16 --cold-method copies --steps 1");
  const CommandResult fallback = kvscope("decode --json --tokens 1000 --heads 4 --d-head 16");
  ::setenv("KVSCOPE_LLC_BYTES", "1M", 1);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("needs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("last-level cache"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  ASSERT_EQ(fallback.status, 0) << fallback.out;
  EXPECT_EQ(nlohmann::json::parse(fallback.out)["cold_method"], "flush");
}

TEST(KvscopeCli, HelpForEverySubcommand) {
  for (const char* command : {"--help", "size --help", "trace --help", "decode --help"}) {
    const CommandResult r = kvscope(command);
    EXPECT_EQ(r.status, 0) << command;
    EXPECT_NE(r.out.find("--"), std::string::npos) << command;
  }
}

// Each bad input: non-zero exit and one line that names the problem.
TEST(KvscopeCli, BadInputGivesOneClearLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"size --heads 32 --kv-heads 5", "multiple of --kv-heads (5)"},
      {"size --tokens 0", "--tokens: must be at least 1, got 0"},
      {"size --d-head -4", "--d-head: must be at least 1, got -4"},
      {"size --batch 0", "--batch: must be at least 1, got 0"},
      {"size --kv-dtype q4", "unknown KV cache dtype 'q4'"},
      {"size --model gpt-9", "unknown model preset 'gpt-9'"},
      {"size --tokens 99999999999999 --layers 100000", "overflows 64 bits"},
      {"size --tokens abc", "--tokens"},
      {"size --frobnicate", "--frobnicate"},
      {"nonsense", "nonsense"},
      {"trace --query 1 --key 1,2 --value 1", "key 1 has 2 elements but the query has 1"},
      {"trace --key 1,1", "needs --query, --key and --value together"},
      {"trace --query 1,x --key 1,1 --value 1", "'x' is not a number"},
      {"trace --d-head 0", "--d-head: must be at least 1, got 0"},
      {"decode --isa avx9", "unknown ISA 'avx9'"},
      {"decode --threads 0 --tokens 10", "--threads: must be at least 1, got 0"},
      {"decode --steps 0 --tokens 10", "--steps: must be at least 1, got 0"},
      {"decode --heads 6 --kv-heads 4 --tokens 10", "multiple of n_kv_heads (4)"},
      {"decode --tokens 100000000000", "needs"},
      {"decode --tokens 10 --cache-state tepid", "cache state 'tepid': expected cold or warm"},
      {"decode --tokens 10 --cold-method hope", "cold method 'hope'"},
      {"decode --tokens 10 --layers 0", "--layers: must be at least 1, got 0"},
      {"decode --tokens 10 --versus colour=red", "--versus colour=red: unknown setting 'colour'"},
      {"decode --tokens 10 --versus paged", "--versus: 'paged' is not name=value"},
      {"decode --tokens 10 --versus kv-dtype=", "'kv-dtype=' is not name=value"},
      {"decode --tokens 10 --versus kv-dtype=q4", "--versus kv-dtype=q4: unknown KV cache dtype"},
      {"decode --tokens 10 --versus threads=0", "--versus threads=0: must be at least 1, got 0"},
      {"report --cache-state hot", "cache state 'hot'"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = kvscope(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << " → " << r.out;
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << args << " printed more than one line:\n"
                                                  << r.out;
  }
}

}  // namespace

namespace {

TEST(KvscopeReport, JsonCsvAndSvgFromASmallSweep) {
  const std::string svg = ::testing::TempDir() + "kvscope_report_test.svg";
  const nlohmann::json j = json_of(
      "report --json --heads 4 --d-head 16 --tokens 32,64 --kv-dtypes f32,int8 --steps 2 "
      "--no-layer --threads 1 --svg " +
      svg);
  ASSERT_EQ(j.size(), 2u * 2 * 2);  // tokens × (MHA, MQA: 4 heads have no GQA-8) × dtypes
  EXPECT_EQ(j[0]["n_kv_heads"], 4);
  EXPECT_EQ(j[0]["bytes_read_per_step"], 2 * 4 * 16 * 4 * 32);
  EXPECT_EQ(j[0]["cache_state"], "cold");
  EXPECT_EQ(j[0]["llc_bytes"], 1 << 20);
  std::FILE* file = std::fopen(svg.c_str(), "r");
  ASSERT_NE(file, nullptr);
  std::fclose(file);
  const CommandResult csv = kvscope(
      "report --csv --heads 4 --d-head 16 --tokens 32 --kv-heads 2 --kv-dtypes bf16 --steps 2 "
      "--no-layer");
  EXPECT_EQ(csv.status, 0) << csv.out;
  EXPECT_EQ(csv.out.rfind("variant,n_heads", 0), 0u) << csv.out;
  EXPECT_NE(csv.out.find("\nGQA-2,4,2,16,32,"), std::string::npos) << csv.out;
}

TEST(KvscopeReport, TextShowsTableExplanationAndMemory) {
  const CommandResult r = kvscope("report --heads 4 --d-head 16 --tokens 48 --steps 2 --threads 1");
  EXPECT_EQ(r.status, 0) << r.out;
  for (const char* part :
       {"variant", "read GB/s", "MHA", "MQA", "recomputes only the new token",
        "Where the time goes", "peak RSS", "last-level cache", "cache state cold"}) {
    EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
  }
}

TEST(KvscopeReport, BadFlagsAndImpossibleShapes) {
  const std::pair<const char*, const char*> cases[] = {
      {"report --tokens 2000,abc", "'abc' is not an integer"},
      {"report --tokens 0 --no-layer", "tokens"},
      {"report --kv-heads 5", "multiple of n_kv_heads (5)"},
      {"report --kv-dtypes f32,q3", "unknown KV cache dtype 'q3'"},
      {"report --tokens 9000000000 --no-layer", "this report needs"},
      {"report --json --csv", "excludes"},
  };
  for (const auto& [args, message] : cases) {
    const CommandResult r = kvscope(args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.out.find(message), std::string::npos) << args << " → " << r.out;
  }
}

}  // namespace

namespace {

std::string write_config(const std::string& text) {
  // One file per process: ctest runs tests in parallel, each TEST in its own process.
  const std::string path =
      ::testing::TempDir() + "kvscope_cli_config_" + std::to_string(::getpid()) + ".json";
  std::FILE* file = std::fopen(path.c_str(), "w");
  std::fputs(text.c_str(), file);
  std::fclose(file);
  return path;
}

TEST(KvscopeConfig, SizeAndReportTakeTheShapeFromConfigJson) {
  const std::string path = write_config(
      R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 2,
          "intermediate_size": 512, "num_hidden_layers": 3, "rms_norm_eps": 1e-5})");
  const nlohmann::json size = json_of("size --json --tokens 10 --config " + path);
  EXPECT_EQ(size["n_heads"], 8);
  EXPECT_EQ(size["n_kv_heads"], 2);
  EXPECT_EQ(size["head_dim"], 32);
  EXPECT_EQ(size["layers"], 3);
  EXPECT_EQ(size["total_bytes"], 2 * 2 * 32 * 4 * 10 * 3);
  const nlohmann::json report =
      json_of("report --json --tokens 16 --kv-dtypes f32 --steps 2 --threads 1 --config " + path);
  ASSERT_EQ(report.size(), 3u);  // MHA (8), GQA-2 (the model's own), MQA
  EXPECT_EQ(report[0]["n_heads"], 8);
  EXPECT_EQ(report[1]["n_kv_heads"], 2);
  EXPECT_GT(report[1]["layer_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(report[1]["prefill_tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(report[1]["weights_dtype"], "bf16");
  // Weights in bf16: 2 bytes per projection element, the two norms in f32.
  const std::uint64_t projections = 256 * 256 * 2 + 256 * 64 * 2 + 256 * 512 * 3;
  EXPECT_EQ(report[1]["layer_weight_bytes"], projections * 2 + 2 * 256 * 4);
}

// --weights-dtype bf16,f32: a layer per weights type, stepped in turn; the second's rows carry
// its own weight bytes and the pairs' ratio, and the text gives both in a table of their own.
TEST(KvscopeReport, WeightsTypesListCompareTheirLayersStepByStep) {
  const std::string shape =
      "report --heads 4 --d-head 16 --tokens 32 --kv-heads 4 --kv-dtypes f32 --steps 6 "
      "--repetitions 1 --threads 1 --no-prefill --weights-dtype bf16,f32";
  const nlohmann::json j = json_of(shape + " --json");
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["weights_dtype"], "bf16");
  EXPECT_EQ(j[1]["weights_dtype"], "f32");
  EXPECT_EQ(j[0]["layer_over_main_weights"]["pairs"], 0);
  EXPECT_EQ(j[1]["layer_over_main_weights"]["pairs"], 3);
  // The projections' elements in f32 take twice the bytes; the two norms are f32 either way.
  const auto bf16 = j[0]["layer_weight_bytes"].get<std::uint64_t>();
  const auto f32 = j[1]["layer_weight_bytes"].get<std::uint64_t>();
  EXPECT_EQ(f32 - 2 * 64 * 4, 2 * (bf16 - 2 * 64 * 4));
  const CommandResult text = kvscope(shape);
  EXPECT_EQ(text.status, 0) << text.out;
  for (const char* part : {"The full layer by weights type", "step ÷ main", "1 (main)",
                           "With f32 weights the layer step (MHA f32, 32 tokens) takes"})
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  for (const char* bad : {"bf16,bf16", "bf16,f8", "f32,bf16,f32"}) {
    const CommandResult r = kvscope("report --tokens 16 --weights-dtype " + std::string(bad));
    EXPECT_NE(r.status, 0) << bad;
  }
  const CommandResult no_layer = kvscope(shape + " --no-layer");
  EXPECT_NE(no_layer.status, 0);
  EXPECT_NE(no_layer.out.find("--no-layer"), std::string::npos) << no_layer.out;
  // One type other than the default, without the layer (rows then carry no weights type of
  // their own): the table as ever.
  const CommandResult plain = kvscope(
      "report --heads 4 --d-head 16 --tokens 16 --kv-heads 4 --kv-dtypes f32 --steps 2 "
      "--threads 1 --weights-dtype f32 --no-layer");
  EXPECT_EQ(plain.status, 0) << plain.out;
  EXPECT_NE(plain.out.find("\nMHA "), std::string::npos) << plain.out;
}

// --batch adds the full layer's step over B sequences: rows with `batch`, bytes that count the
// weights once and B caches, and the context where the cache's bytes overtake the weights'.
TEST(KvscopeReport, BatchRowsCountWeightsOnceAndNameTheCrossover) {
  const std::string shape =
      "report --heads 4 --d-head 16 --tokens 32 --kv-heads 4 --kv-dtypes f32,int8 --steps 2 "
      "--repetitions 1 --threads 1 --no-prefill --batch 1,3";
  const nlohmann::json j = json_of(shape + " --json");
  ASSERT_EQ(j.size(), 4u);  // f32 and int8 at batch 1, then each at batch 3
  // Per token of context, one layer: K and V of 4 heads × 16; int8 adds an f32 scale per row.
  const std::uint64_t per_token[] = {2 * 4 * 16 * 4, 2 * 4 * 16 + 2 * 4 * 4};
  for (std::size_t i = 0; i < 4; ++i) {
    const nlohmann::json& row = j[i];
    const std::uint64_t batch = i < 2 ? 1 : 3;
    EXPECT_EQ(row["batch"], batch) << i;
    EXPECT_EQ(row["kv_dtype"], i % 2 == 0 ? "f32" : "int8") << i;
    const auto weights = row["layer_weight_bytes"].get<std::uint64_t>();
    EXPECT_GT(weights, 0u);
    EXPECT_EQ(row["layer_bytes_per_step"], weights + batch * 32 * per_token[i % 2]) << i;
    const std::uint64_t step_bytes = batch * per_token[i % 2];
    EXPECT_EQ(row["kv_overtakes_weights_tokens"], (weights + step_bytes - 1) / step_bytes) << i;
    EXPECT_GT(row["layer_tokens_per_s"].get<double>(), 0.0) << i;
  }
  EXPECT_EQ(j[2]["attn_seconds_median"], j[0]["attn_seconds_median"]);  // per sequence
  const CommandResult text = kvscope(shape);
  EXPECT_EQ(text.status, 0) << text.out;
  for (const char* part : {"Batched decode", "At batch 3 (MHA f32)", "KV > weights at"})
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;

  const CommandResult no_layer = kvscope(shape + " --no-layer");
  EXPECT_NE(no_layer.status, 0);
  EXPECT_NE(no_layer.out.find("--no-layer"), std::string::npos) << no_layer.out;
  for (const char* bad : {"0", "5000", "2,x"}) {
    const CommandResult r = kvscope("report --batch " + std::string(bad));
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_NE(r.out.find("--batch"), std::string::npos) << bad << ": " << r.out;
  }
}

// --kv-layout: paged rows beside contiguous ones, the same bytes read, a sentence comparing
// the two; decode names its layout; a bad layout is one line naming it.
TEST(KvscopeReport, PagedRowsBesideContiguousOnes) {
  const std::string shape =
      "report --heads 4 --d-head 16 --tokens 100 --kv-heads 2 --kv-dtypes f32,int8 --steps 2 "
      "--repetitions 1 --threads 1 --no-prefill --kv-layout contiguous,paged:16";
  const nlohmann::json j = json_of(shape + " --json");
  ASSERT_EQ(j.size(), 4u);  // f32 contiguous, f32 paged, int8 contiguous, int8 paged
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(j[i]["kv_layout"], i % 2 == 0 ? "contiguous" : "paged:16") << i;
    EXPECT_EQ(j[i]["kv_dtype"], i < 2 ? "f32" : "int8") << i;
    EXPECT_EQ(j[i]["bytes_read_per_step"], j[i - i % 2]["bytes_read_per_step"]) << i;
    EXPECT_EQ(j[i]["attn_rel_error"], j[i - i % 2]["attn_rel_error"]) << i;
    EXPECT_GT(j[i]["layer_tokens_per_s"].get<double>(), 0.0) << i;
    // A paged row's steps were taken in turn with its contiguous row's: 2 pairs.
    const nlohmann::json& paired = j[i]["paged_over_contiguous"];
    EXPECT_EQ(paired["pairs"], i % 2 == 1 ? 2 : 0) << i;
    if (i % 2 == 1) {
      EXPECT_GT(paired["low"].get<double>(), 0.0) << i;
      EXPECT_LE(paired["low"].get<double>(), paired["median"].get<double>()) << i;
      EXPECT_LE(paired["median"].get<double>(), paired["high"].get<double>()) << i;
    }
  }
  const CommandResult text = kvscope(shape);
  EXPECT_EQ(text.status, 0) << text.out;
  for (const char* part : {"f32 paged:16", "Paged (16 tokens a page", "against",
                           "the median of 2 pairs of steps taken in turn"})
    EXPECT_NE(text.out.find(part), std::string::npos) << part << "\n" << text.out;
  // Every paged layout after the contiguous one is paired with it.
  const nlohmann::json three = json_of(
      "report --json --heads 4 --d-head 16 --tokens 100 --kv-heads 2 --kv-dtypes f32 --steps 2 "
      "--repetitions 1 --threads 1 --no-prefill --no-layer "
      "--kv-layout contiguous,paged:16,paged:32");
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[1]["paged_over_contiguous"]["pairs"], 2);
  EXPECT_EQ(three[2]["paged_over_contiguous"]["pairs"], 2);
  EXPECT_EQ(three[0]["paged_over_contiguous"]["pairs"], 0);
  // Paged before contiguous: nothing to pair (the contiguous row comes after).
  const nlohmann::json reversed = json_of(
      "report --json --heads 4 --d-head 16 --tokens 100 --kv-heads 2 --kv-dtypes f32 --steps 2 "
      "--repetitions 1 --threads 1 --no-prefill --no-layer --kv-layout paged:16,contiguous");
  ASSERT_EQ(reversed.size(), 2u);
  EXPECT_EQ(reversed[0]["paged_over_contiguous"]["pairs"], 0);
  const nlohmann::json d = json_of(
      "decode --json --heads 4 --kv-heads 2 --d-head 16 --tokens 100 --steps 2 --threads 1 "
      "--kv-layout paged:7");
  EXPECT_EQ(d["kv_layout"], "paged:7");
  EXPECT_EQ(d["bytes_read_per_step"], 2 * 2 * 16 * 4 * 100);
  for (const char* bad : {"report --kv-layout paged", "decode --kv-layout paged:x",
                          "report --kv-layout contiguous,pages:4"}) {
    const CommandResult r = kvscope(bad);
    EXPECT_NE(r.status, 0) << bad;
    EXPECT_NE(r.out.find("unknown KV layout"), std::string::npos) << bad << ": " << r.out;
  }
}

TEST(KvscopeConfig, BadConfigIsOneClearLine) {
  const std::string path =
      write_config(R"({"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8})");
  const CommandResult r = kvscope("size --config " + path);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("intermediate_size"), std::string::npos) << r.out;
  const CommandResult missing = kvscope("size --config /nonexistent/config.json");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.out.find("/nonexistent/config.json"), std::string::npos) << missing.out;
  const CommandResult both = kvscope("size --config " + path + " --model llama-2-7b");
  EXPECT_NE(both.status, 0);
  EXPECT_NE(both.out.find("excludes"), std::string::npos) << both.out;
}

}  // namespace
