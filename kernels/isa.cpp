#include "kernels/isa.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace kvscope {

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return "scalar";
    case Isa::sse2:
      return "sse2";
    case Isa::avx2:
      return "avx2";
    case Isa::avx512:
      return "avx512";
  }
  return "?";
}

Isa parse_isa(std::string_view name) {
  for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (name == to_string(isa)) return isa;
  }
  throw std::invalid_argument("unknown ISA '" + std::string(name) +
                              "' (expected scalar, sse2, avx2 or avx512)");
}

bool cpu_supports(Isa isa) {
  switch (isa) {
    case Isa::scalar:
      return true;
    case Isa::sse2:
      return __builtin_cpu_supports("sse2");
    case Isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512cd");
  }
  return false;
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

Isa best_isa() {
  for (Isa isa : {Isa::avx512, Isa::avx2, Isa::sse2}) {
    if (cpu_supports(isa)) return isa;
  }
  return Isa::scalar;
}

void require_cpu_supports(Isa isa, std::string_view context) {
  if (!cpu_supports(isa)) {
    throw std::invalid_argument(std::string(context) + "ISA '" + std::string(to_string(isa)) +
                                "' is not supported by this CPU");
  }
}

Isa select_isa(std::string_view requested) {
  std::string_view name = requested;
  const char* env = std::getenv("KVSCOPE_ISA");
  if (name.empty() && env != nullptr && *env != '\0') name = env;
  if (name.empty()) return best_isa();
  const Isa isa = parse_isa(name);
  if (!cpu_supports(isa)) {
    throw std::invalid_argument("ISA '" + std::string(name) + "' is not supported by this CPU");
  }
  return isa;
}

}  // namespace kvscope
