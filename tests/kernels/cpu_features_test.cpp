// The caches read from CPUID (kernels/units/cpuid_caches.hpp; the L1 data cache of
// cpu_features(), which picks where the shared blocks' prefetches go, prefetch_policy.hpp, and
// the last-level cache of cold measurements) against what Linux says in sysfs, read its own way.
#include "kernels/units/cpu_features.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "kernels/units/cpuid_caches.hpp"

namespace kvscope {
namespace {

std::string read_word(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string word;
  in >> word;
  return word;
}

const char* sysfs_type(CpuidCache::Type type) {
  switch (type) {
    case CpuidCache::Type::data:
      return "Data";
    case CpuidCache::Type::instruction:
      return "Instruction";
    case CpuidCache::Type::unified:
      return "Unified";
  }
  return "";
}

// Bytes of cpu0's cache of `level` and `type` in sysfs ("32K", "32768K", "1M"); nullopt where
// sysfs names none.
std::optional<std::uint64_t> sysfs_bytes(int level, CpuidCache::Type type) {
  const std::filesystem::path caches = "/sys/devices/system/cpu/cpu0/cache";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(caches, error)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    if (read_word(entry.path() / "level") != std::to_string(level) ||
        read_word(entry.path() / "type") != sysfs_type(type)) {
      continue;
    }
    const std::string size = read_word(entry.path() / "size");
    if (size.size() < 2) return std::nullopt;
    const std::uint64_t number = std::stoull(size.substr(0, size.size() - 1));
    if (size.back() == 'K') return number << 10;
    if (size.back() == 'M') return number << 20;
    return std::nullopt;
  }
  return std::nullopt;
}

TEST(CpuidCaches, EachIsTheOneLinuxReports) {
  const CpuidCaches found = read_cpuid_caches();
  if (found.caches.empty()) GTEST_SKIP() << "CPUID's deterministic cache leaf is absent or empty";
  EXPECT_EQ(found.leaf, found.amd ? 0x8000001Du : 4u);
  int compared = 0;
  for (const CpuidCache& cache : found.caches) {
    const auto linux_bytes = sysfs_bytes(cache.level, cache.type);
    if (!linux_bytes) continue;
    EXPECT_EQ(cache.bytes, *linux_bytes)
        << "L" << cache.level << " " << sysfs_type(cache.type) << " cache";
    ++compared;
  }
  if (compared == 0) GTEST_SKIP() << "sysfs names none of CPUID's caches for cpu0";
}

TEST(CpuFeatures, L1DataCacheIsTheOneLinuxReports) {
  const auto linux_bytes = sysfs_bytes(1, CpuidCache::Type::data);
  if (!linux_bytes) GTEST_SKIP() << "sysfs names no level-1 data cache for cpu0";
  EXPECT_EQ(std::uint64_t{cpu_features().l1d_kib} << 10, *linux_bytes);
}

}  // namespace
}  // namespace kvscope
