// Cache formats at the command line: int4 sizes, separate K and V types (--k-dtype, --v-dtype,
// K:V pairs in report), and the accuracy columns of report.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/kvscope_command.hpp"

namespace {

using kvscope::test::CommandResult;
using kvscope::test::kvscope;

nlohmann::json json_of(const std::string& args) {
  const CommandResult r = kvscope(args);
  EXPECT_EQ(r.status, 0) << r.out;
  return nlohmann::json::parse(r.out);
}

TEST(KvscopeFormats, SizeOfInt4CountsNibblesAndGroupScales) {
  const nlohmann::json j = json_of("size --json --kv-dtype int4");
  EXPECT_EQ(j["k_bytes"].get<long long>() + j["v_bytes"].get<long long>(), 8'192'000);
  EXPECT_EQ(j["scale_bytes"], 1'024'000);
  EXPECT_EQ(j["total_bytes"], 9'216'000);
  EXPECT_EQ(j["kv_dtype"], "int4");
}

TEST(KvscopeFormats, KAndVTypesAreSetTogetherOrApart) {
  nlohmann::json j = json_of("size --json --kv-dtype int8:f16 --tokens 10 --kv-heads 2");
  EXPECT_EQ(j["kv_dtype"], "int8:f16");
  EXPECT_EQ(j["k_dtype"], "int8");
  EXPECT_EQ(j["v_dtype"], "f16");
  EXPECT_EQ(j["k_bytes"], 2 * 128 * 10);
  EXPECT_EQ(j["v_bytes"], 2 * 128 * 10 * 2);
  EXPECT_EQ(j["scale_bytes"], 2 * 10 * 4);
  j = json_of("size --json --kv-dtype int8 --v-dtype bf16");
  EXPECT_EQ(j["kv_dtype"], "int8:bf16");
  j = json_of("size --json --k-dtype int4 --v-dtype int4");
  EXPECT_EQ(j["kv_dtype"], "int4");
  EXPECT_EQ(j["k_dtype"], "int4");
}

// A dot unit serves one cache type: int8 keys with f16 values run exact, and say so.
TEST(KvscopeFormats, DecodeWithMixedTypesReportsTheUnitItRan) {
  const nlohmann::json j = json_of(
      "decode --json --heads 16 --kv-heads 1 --d-head 64 --tokens 300 --k-dtype int8 "
      "--v-dtype f16 --compute fast --steps 2 --cache-state warm --threads 1");
  EXPECT_EQ(j["kv_dtype"], "int8:f16");
  EXPECT_EQ(j["compute_unit"], "fp32-fma");
}

TEST(KvscopeFormats, ReportTakesPairsAndPrintsAccuracy) {
  const nlohmann::json j = json_of(
      "report --json --heads 4 --d-head 64 --tokens 256 --kv-heads 4 --kv-dtypes "
      "f32,int8,int8:f16,int4 --steps 2 --no-layer --threads 1 --cache-state warm");
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[2]["kv_dtype"], "int8:f16");
  EXPECT_EQ(j[2]["k_dtype"], "int8");
  EXPECT_EQ(j[2]["v_dtype"], "f16");
  EXPECT_EQ(j[0]["attn_rel_error"], 0.0);
  EXPECT_EQ(j[0]["attn_weight_kl"], 0.0);
  for (int i = 1; i < 4; ++i) {
    EXPECT_GT(j[i]["attn_rel_error"].get<double>(), 0.0) << j[i]["kv_dtype"];
    EXPECT_GT(j[i]["attn_weight_kl"].get<double>(), 0.0) << j[i]["kv_dtype"];
  }
  // int4 is coarser than int8; f16 values are finer than int8 values.
  EXPECT_GT(j[3]["attn_rel_error"].get<double>(), j[1]["attn_rel_error"].get<double>());
  EXPECT_LT(j[2]["attn_rel_error"].get<double>(), j[1]["attn_rel_error"].get<double>());
  const CommandResult text = kvscope(
      "report --heads 4 --d-head 64 --tokens 256 --kv-heads 4 --kv-dtypes int4 --steps 2 "
      "--no-layer --threads 1 --cache-state warm --data uniform");
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find("rel err"), std::string::npos) << text.out;
  const CommandResult bad = kvscope("report --data gaussian --tokens 32 --no-layer");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("unknown --data 'gaussian'"), std::string::npos) << bad.out;
}

}  // namespace
