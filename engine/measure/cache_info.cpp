#include "engine/measure/cache_info.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "kernels/units/cpuid_caches.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kvscope {
namespace {

std::optional<std::string> read_word(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  return word;
}

// "32768K" → 33554432; "32M" → 33554432; "1048576" → 1048576; nullopt when unreadable.
std::optional<std::uint64_t> parse_size(const std::string& text) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string suffix = text.substr(used);
  if (suffix.empty()) return value;
  if (suffix == "K") return value << 10;
  if (suffix == "M") return value << 20;
  if (suffix == "G") return value << 30;
  return std::nullopt;
}

}  // namespace

std::optional<LastLevelCache> read_sysfs_llc(const std::string& cpu_cache_dir) {
  std::error_code error;
  std::optional<LastLevelCache> best;
  for (const auto& entry : std::filesystem::directory_iterator(cpu_cache_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("index", 0) != 0) continue;
    const auto level = read_word(entry.path() / "level");
    const auto type = read_word(entry.path() / "type");
    const auto size_text = read_word(entry.path() / "size");
    if (!level || !type || !size_text || *type == "Instruction") continue;
    const auto size = parse_size(*size_text);
    const int lvl = std::atoi(level->c_str());
    if (!size || *size == 0 || lvl < 1) continue;
    if (!best || lvl > best->level || (lvl == best->level && *size > best->bytes)) {
      best = LastLevelCache{*size, lvl, "sysfs " + name};
    }
  }
  return best;
}

std::optional<LastLevelCache> read_cpuid_llc() {
  const CpuidCaches found = read_cpuid_caches();
  std::optional<LastLevelCache> best;
  for (const CpuidCache& cache : found.caches) {
    if (cache.type == CpuidCache::Type::instruction) continue;
    if (!best || cache.level > best->level) {
      char source[32];
      std::snprintf(source, sizeof source, "CPUID 0x%X", found.leaf);
      best = LastLevelCache{cache.bytes, cache.level, source};
    }
  }
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!best && found.amd && __get_cpuid(0x80000006u, &a, &b, &c, &d)) {
    // Legacy AMD leaf (some hypervisors leave 0x8000001D empty): EDX[31:18] is the L3 in
    // 512 KiB units, ECX[31:16] the L2 in KiB.
    if ((d >> 18) != 0)
      return LastLevelCache{std::uint64_t{d >> 18} * (512 << 10), 3, "CPUID 0x80000006"};
    if ((c >> 16) != 0) return LastLevelCache{std::uint64_t{c >> 16} << 10, 2, "CPUID 0x80000006"};
  }
#endif
  return best;
}

LastLevelCache detect_llc() {
  if (const char* env = std::getenv("KVSCOPE_LLC_BYTES"); env != nullptr && *env != '\0') {
    const auto bytes = parse_size(env);
    if (!bytes || *bytes == 0) {
      throw std::invalid_argument(std::string("KVSCOPE_LLC_BYTES '") + env +
                                  "' is not a positive byte count (e.g. 33554432 or 32M)");
    }
    return {*bytes, 0, "KVSCOPE_LLC_BYTES"};
  }
  if (auto llc = read_sysfs_llc("/sys/devices/system/cpu/cpu0/cache")) return *llc;
  if (auto llc = read_cpuid_llc()) return *llc;
  return {32ull << 20, 0, "fallback: neither sysfs nor CPUID gave a size"};
}

std::string describe(const LastLevelCache& llc) {
  char text[160];
  const double mib = static_cast<double>(llc.bytes) / (1 << 20);
  if (llc.level > 0) {
    std::snprintf(text, sizeof text, "%.0f MiB L%d (%s)", mib, llc.level, llc.source.c_str());
  } else {
    std::snprintf(text, sizeof text, "%.0f MiB (%s)", mib, llc.source.c_str());
  }
  return text;
}

}  // namespace kvscope
