#pragma once
// The caches CPUID's deterministic cache leaves describe (Intel's leaf 4, AMD's 0x8000001D),
// read in one place for the L1 data cache (cpu_features.cpp: where shared blocks are
// prefetched) and the last-level cache (engine/measure/cache_info.cpp: cold measurements).
#include <cstdint>
#include <vector>

namespace kvscope {

struct CpuidCache {
  enum class Type { data, instruction, unified };
  int level = 0;  // 1, 2, 3, …
  Type type = Type::unified;
  std::uint64_t bytes = 0;  // ways × partitions × line size × sets
};

struct CpuidCaches {
  bool amd = false;   // AuthenticAMD or HygonGenuine: the caches come from leaf 0x8000001D
  unsigned leaf = 0;  // 4, 0x8000001D, or 0 when the CPU has no such leaf
  std::vector<CpuidCache> caches;  // in subleaf order; empty off x86, or where a hypervisor
                                   // leaves the leaf empty (some do on AMD)
};

CpuidCaches read_cpuid_caches();

}  // namespace kvscope
