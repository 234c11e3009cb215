#include "kernels/units/cpuid_caches.hpp"

#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace kvscope {

CpuidCaches read_cpuid_caches() {
  CpuidCaches out;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return out;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4), std::memcpy(vendor + 4, &d, 4), std::memcpy(vendor + 8, &c, 4);
  out.amd = std::strcmp(vendor, "AuthenticAMD") == 0 || std::strcmp(vendor, "HygonGenuine") == 0;
  const unsigned leaf = out.amd ? 0x8000001Du : 4u;
  const unsigned highest = out.amd ? __get_cpuid_max(0x80000000u, nullptr) : a;
  if (highest < leaf) return out;
  out.leaf = leaf;
  for (unsigned sub = 0; sub < 16; ++sub) {
    __cpuid_count(leaf, sub, a, b, c, d);
    const unsigned type = a & 0x1f;  // 0: no more caches, 1 data, 2 instruction, 3 unified
    if (type == 0) break;
    const std::uint64_t ways = ((b >> 22) & 0x3ff) + 1, partitions = ((b >> 12) & 0x3ff) + 1,
                        line = (b & 0xfff) + 1, sets = static_cast<std::uint64_t>(c) + 1;
    out.caches.push_back({static_cast<int>((a >> 5) & 0x7),
                          type == 1   ? CpuidCache::Type::data
                          : type == 2 ? CpuidCache::Type::instruction
                                      : CpuidCache::Type::unified,
                          ways * partitions * line * sets});
  }
#endif
  return out;
}

}  // namespace kvscope
