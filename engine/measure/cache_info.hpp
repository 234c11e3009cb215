#pragma once
// The last-level cache of this machine: how many bytes a measurement must stream through
// between two reads of the same data before that data is in no cache level.
#include <cstdint>
#include <optional>
#include <string>

namespace kvscope {

struct LastLevelCache {
  std::uint64_t bytes = 0;
  int level = 0;       // 3 on most x86 servers; 0 when unknown
  std::string source;  // where the size came from, e.g. "sysfs index3", "CPUID 0x8000001D"
};

// The largest unified (or data) cache under `cpu_cache_dir` (a sysfs folder like
// /sys/devices/system/cpu/cpu0/cache holding index*/{level,type,size}); nullopt when the
// folder is missing or holds no readable entry. Sizes read "32768K", "32M" or a plain number.
std::optional<LastLevelCache> read_sysfs_llc(const std::string& cpu_cache_dir);

// The highest cache level from CPUID's deterministic cache leaves (Intel leaf 4, AMD
// 0x8000001D, else AMD's legacy 0x80000006); nullopt off x86 or when the leaves are absent.
std::optional<LastLevelCache> read_cpuid_llc();

// In order: $KVSCOPE_LLC_BYTES (for VMs whose CPUID reports a size the guest does not
// get, and for tests), sysfs, CPUID, then a 32 MiB fallback named as such. Throws
// std::invalid_argument when $KVSCOPE_LLC_BYTES is not a positive integer.
LastLevelCache detect_llc();

// "508 MiB L3 (CPUID 0x8000001D)"
std::string describe(const LastLevelCache& llc);

}  // namespace kvscope
