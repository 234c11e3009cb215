// --compute exact|fast on the kvscope binary: the unit each command names, the JSON fields,
// and a clear error for a bad value.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/units/compute_unit.hpp"
#include "support/kvscope_command.hpp"

namespace kvscope::test {
namespace {

TEST(KvscopeCompute, DecodeNamesTheUnitItRanOn) {
  if (!cpu_supports(Isa::avx512)) GTEST_SKIP() << "CPU lacks AVX-512";
  for (const char* mode : {"exact", "fast"}) {
    const CommandResult r =
        kvscope(std::string("decode --json --kv-heads 1 --kv-dtype int8 ") +
                "--tokens 300 --steps 2 --cache-state warm --isa avx512 --compute " + mode);
    ASSERT_EQ(r.status, 0) << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["compute"], mode);
    const ComputeUnit want =
        attention_compute_unit(KvDtype::int8, Isa::avx512, parse_compute_mode(mode), 32, 128);
    EXPECT_EQ(j["compute_unit"], std::string(to_string(want)));
  }
}

TEST(KvscopeCompute, ReportRowsCarryUnitAndItsPeak) {
  const CommandResult r = kvscope(
      "report --json --no-layer --steps 1 --tokens 200 --kv-heads 1 --kv-dtypes f32,int8 "
      "--cache-state warm "
      "--heads 8 --d-head 64");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json rows = nlohmann::json::parse(r.out);
  ASSERT_EQ(rows.size(), 2u);
  for (const nlohmann::json& row : rows) {
    EXPECT_EQ(row["compute"], "fast");  // the default
    EXPECT_GT(row["compute_peak_gops"].get<double>(), 0.0);
    if (row["compute_unit"] == "fp32-fma") {
      EXPECT_EQ(row["compute_peak_gops"], row["fma_peak_gflops"]);
    }
  }
  EXPECT_EQ(rows[0]["compute_unit"], "fp32-fma");  // f32 caches always widen (no conversion)
}

// The header probes every unit this CPU has, whether a row ran on it or not (here only the
// f32 row runs, on fp32-fma).
TEST(KvscopeCompute, ReportHeaderProbesEveryUnitTheCpuHas) {
  const CommandResult r = kvscope(
      "report --no-layer --no-prefill --steps 1 --tokens 200 --kv-heads 1 --kv-dtypes f32 "
      "--cache-state warm --heads 8 --d-head 64");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::size_t at = r.out.find("Compute peaks measured");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  for (ComputeUnit unit : {ComputeUnit::fp32_fma, ComputeUnit::vnni_int8, ComputeUnit::avx512_bf16,
                           ComputeUnit::amx_int8, ComputeUnit::amx_bf16}) {
    const bool listed = line.find(std::string(to_string(unit)) + " ") != std::string::npos;
    const bool expected =
        unit == ComputeUnit::fp32_fma || (cpu_has(unit) && cpu_supports(Isa::avx512));
    EXPECT_EQ(expected, listed) << to_string(unit) << " in: " << line;
  }
}

TEST(KvscopeCompute, BadModeIsOneClearLine) {
  for (const char* command : {"decode --steps 1 --tokens 10", "report --no-layer --tokens 10",
                              "run --model /nonexistent --layer 0 --input x.npy --output y.npy"}) {
    const CommandResult r = kvscope(std::string(command) + " --compute quick");
    EXPECT_NE(r.status, 0) << command;
    EXPECT_NE(r.out.find("unknown compute mode 'quick' (expected exact or fast)"),
              std::string::npos)
        << command << ": " << r.out;
  }
}

}  // namespace
}  // namespace kvscope::test
