#include "kernels/units/cpu_features.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/units/cpuid_caches.hpp"

namespace kvscope {
namespace {

// XCR0 (the state the OS saves on context switch): bits 1-2 SSE/AVX, 5-7 AVX-512, 17-18 AMX.
std::uint64_t os_saved_state() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return 0;  // OSXSAVE
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

// The L1 data cache per core in KiB: the level-1 data cache of CPUID's deterministic cache
// leaves, else AMD's legacy leaf 0x80000005 (ECX bits 31-24); 0 when neither says.
unsigned l1d_kib(bool amd) {
  for (const CpuidCache& cache : read_cpuid_caches().caches) {
    if (cache.level == 1 && cache.type == CpuidCache::Type::data) return cache.bytes / 1024;
  }
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (amd && __get_cpuid(0x80000005u, &eax, &ebx, &ecx, &edx)) return ecx >> 24;
  return 0;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
    char vendor[13] = {};
    std::memcpy(vendor, &ebx, 4), std::memcpy(vendor + 4, &edx, 4),
        std::memcpy(vendor + 8, &ecx, 4);
    f.amd = std::strcmp(vendor, "AuthenticAMD") == 0;
  }
  f.l1d_kib = l1d_kib(f.amd);
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  const unsigned max_subleaf = eax;
  const std::uint64_t xcr0 = os_saved_state();
  const bool os_avx = (xcr0 & 0x6) == 0x6;
  const bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & (3u << 17)) == (3u << 17);
  const bool avx512f = (ebx >> 16) & 1;
  f.avx512_vnni = os_avx512 && avx512f && ((ecx >> 11) & 1);
  f.avx512_fp16 = os_avx512 && avx512f && ((edx >> 23) & 1);
  const bool amx_tile = (edx >> 24) & 1;
  const bool amx_bf16 = (edx >> 22) & 1;
  const bool amx_int8 = (edx >> 25) & 1;
  if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
    f.avx_vnni = os_avx && ((eax >> 4) & 1);
    f.avx512_bf16 = os_avx512 && avx512f && ((eax >> 5) & 1);
  }
  if (amx_tile && (amx_bf16 || amx_int8)) {
    // Linux keeps AMX tile data off until a process asks (since 5.16): ask once, here.
    constexpr int kArchReqXcompPerm = 0x1023;
    constexpr int kXfeatureXtiledata = 18;
    if (!os_amx) {
      f.amx_note = "AMX present but the OS does not save tile state";
    } else if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
      f.amx_note = std::string("AMX tile data refused by the kernel: ") + std::strerror(errno);
    } else {
      f.amx_granted = true;
      f.amx_bf16 = amx_bf16;
      f.amx_int8 = amx_int8;
    }
  }
  return f;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

std::string cpu_model_name() {
  unsigned regs[12] = {};
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  std::string brand;
  if (__get_cpuid(0x80000000, &eax, &ebx, &ecx, &edx) && eax >= 0x80000004) {
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      __get_cpuid(0x80000002 + leaf, &regs[4 * leaf], &regs[4 * leaf + 1], &regs[4 * leaf + 2],
                  &regs[4 * leaf + 3]);
    }
    char text[49] = {};
    std::memcpy(text, regs, 48);
    brand = text;
    while (!brand.empty() && brand.back() == ' ') brand.pop_back();
    while (!brand.empty() && brand.front() == ' ') brand.erase(brand.begin());
  }
  if (brand.empty()) brand = "unknown CPU";
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
    const unsigned base_family = (eax >> 8) & 0xf, base_model = (eax >> 4) & 0xf;
    const unsigned family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
    const unsigned model =
        base_family == 0xf || base_family == 0x6 ? base_model | ((eax >> 12) & 0xf0) : base_model;
    brand += " (family " + std::to_string(family) + ", model " + std::to_string(model) + ")";
  }
  return brand;
}

std::string describe(const CpuFeatures& f) {
  std::string out;
  const auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!out.empty()) out += ' ';
    out += name;
  };
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx_vnni, "avx_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx512_fp16, "avx512_fp16");
  add(f.amx_bf16, "amx_bf16");
  add(f.amx_int8, "amx_int8");
  if (out.empty()) out = "none";
  if (!f.amx_note.empty()) {
    out += " (" + f.amx_note + ")";
  } else if (!f.amx_bf16 && !f.amx_int8) {
    out += " (no amx)";
  }
  return out;
}

}  // namespace kvscope
