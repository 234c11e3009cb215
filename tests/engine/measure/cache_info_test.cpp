// The last-level cache reader: sysfs parsing on a fake tree, CPUID, the environment override.
#include "engine/measure/cache_info.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace kvscope {
namespace {

namespace fs = std::filesystem;

void write_index(const fs::path& dir, const char* name, const char* level, const char* type,
                 const char* size) {
  fs::create_directories(dir / name);
  std::ofstream(dir / name / "level") << level << "\n";
  std::ofstream(dir / name / "type") << type << "\n";
  std::ofstream(dir / name / "size") << size << "\n";
}

fs::path fresh_dir(const char* name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(CacheInfo, SysfsTakesTheHighestUnifiedLevel) {
  const fs::path dir = fresh_dir("kvscope_sysfs_cache");
  write_index(dir, "index0", "1", "Data", "48K");
  write_index(dir, "index1", "1", "Instruction", "32K");
  write_index(dir, "index2", "2", "Unified", "1024K");
  write_index(dir, "index3", "3", "Unified", "32768K");
  const auto llc = read_sysfs_llc(dir.string());
  ASSERT_TRUE(llc.has_value());
  EXPECT_EQ(llc->bytes, 32u << 20);
  EXPECT_EQ(llc->level, 3);
  EXPECT_EQ(llc->source, "sysfs index3");
}

TEST(CacheInfo, SysfsSkipsInstructionCachesAndUnreadableSizes) {
  const fs::path dir = fresh_dir("kvscope_sysfs_cache_odd");
  write_index(dir, "index0", "2", "Unified", "2M");
  write_index(dir, "index1", "3", "Instruction", "64M");
  write_index(dir, "index2", "3", "Unified", "lots");
  const auto llc = read_sysfs_llc(dir.string());
  ASSERT_TRUE(llc.has_value());
  EXPECT_EQ(llc->bytes, 2u << 20);
  EXPECT_EQ(llc->level, 2);
  EXPECT_FALSE(read_sysfs_llc((dir / "missing").string()).has_value());
  EXPECT_FALSE(read_sysfs_llc(fresh_dir("kvscope_sysfs_empty").string()).has_value());
}

TEST(CacheInfo, CpuidGivesAPlausibleSizeWhereItAnswers) {
  const auto llc = read_cpuid_llc();
  if (!llc) GTEST_SKIP() << "no CPUID cache leaves here";
  EXPECT_GE(llc->level, 2);
  EXPECT_GE(llc->bytes, 256u << 10);
  EXPECT_LE(llc->bytes, std::uint64_t{16} << 30);
}

TEST(CacheInfo, DetectHonoursTheOverrideAndOtherwiseIsPlausibleOrNamedFallback) {
  ::setenv("KVSCOPE_LLC_BYTES", "24M", 1);
  EXPECT_EQ(detect_llc().bytes, 24u << 20);
  EXPECT_EQ(detect_llc().source, "KVSCOPE_LLC_BYTES");
  ::setenv("KVSCOPE_LLC_BYTES", "lots", 1);
  try {
    detect_llc();
    FAIL() << "accepted a bad KVSCOPE_LLC_BYTES";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'lots'"), std::string::npos) << e.what();
  }
  ::setenv("KVSCOPE_LLC_BYTES", "0", 1);
  EXPECT_THROW(detect_llc(), std::invalid_argument);
  ::unsetenv("KVSCOPE_LLC_BYTES");
  const LastLevelCache llc = detect_llc();
  EXPECT_GE(llc.bytes, 256u << 10);
  EXPECT_LE(llc.bytes, std::uint64_t{16} << 30);
  EXPECT_FALSE(llc.source.empty());
  EXPECT_NE(describe(llc).find("MiB"), std::string::npos);
}

}  // namespace
}  // namespace kvscope
