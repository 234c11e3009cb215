#pragma once
// The instruction sets an attention call can run on, and how one is chosen.
#include <string_view>

namespace kvscope {

// scalar is the plain-loop reference; the others are xsimd instantiations.
enum class Isa { scalar, sse2, avx2, avx512 };

std::string_view to_string(Isa isa);

// Parses "scalar", "sse2", "avx2" or "avx512"; throws std::invalid_argument naming the value.
Isa parse_isa(std::string_view name);

// Whether this CPU can run code built for `isa`.
bool cpu_supports(Isa isa);
// Throws std::invalid_argument ("<context>ISA 'avx512' is not supported by this CPU") unless
// cpu_supports(isa): the check of every entry point that takes an Isa.
void require_cpu_supports(Isa isa, std::string_view context = {});
// Whether the CPU has F16C (half-float conversions; the AVX2 f16 kernels need it). CPUID
// leaf 1 directly: clang 14's __builtin_cpu_supports does not know "f16c".
bool cpu_has_f16c();

// The fastest ISA this CPU supports.
Isa best_isa();

// `requested` if non-empty, else $KVSCOPE_ISA if set, else best_isa(). Throws
// std::invalid_argument for an unknown name or an ISA this CPU lacks.
Isa select_isa(std::string_view requested = {});

}  // namespace kvscope
