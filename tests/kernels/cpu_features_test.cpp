// The L1 data cache that cpu_features() reads from CPUID (it picks where the shared blocks'
// prefetches go, prefetch_policy.hpp) against what Linux says in sysfs, read its own way.
#include "kernels/units/cpu_features.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace kvscope {
namespace {

std::string read_word(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string word;
  in >> word;
  return word;
}

// cpu0's level-1 data cache in KiB from sysfs ("32K"); nullopt where sysfs does not say.
std::optional<unsigned> sysfs_l1d_kib() {
  const std::filesystem::path caches = "/sys/devices/system/cpu/cpu0/cache";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(caches, error)) {
    if (entry.path().filename().string().rfind("index", 0) != 0) continue;
    if (read_word(entry.path() / "level") != "1" || read_word(entry.path() / "type") != "Data") {
      continue;
    }
    const std::string size = read_word(entry.path() / "size");
    if (size.size() < 2 || size.back() != 'K') return std::nullopt;
    return static_cast<unsigned>(std::stoul(size.substr(0, size.size() - 1)));
  }
  return std::nullopt;
}

TEST(CpuFeatures, L1DataCacheIsTheOneLinuxReports) {
  const std::optional<unsigned> linux_kib = sysfs_l1d_kib();
  if (!linux_kib) GTEST_SKIP() << "sysfs names no level-1 data cache for cpu0";
  EXPECT_EQ(cpu_features().l1d_kib, *linux_kib);
}

}  // namespace
}  // namespace kvscope
