#pragma once
// The attention kernels and probes of the dot-product units (AVX-512 VNNI, AVX512-BF16), as
// the dispatching units see them: declarations and `extern template`s. Definitions:
// dot_unit_attention.hpp and dot_unit_probes.hpp; instantiations: kernels/arch/avx512_dot.cpp,
// the only unit compiled with -mavx512vnni -mavx512bf16.
#include <cstddef>
#include <xsimd/xsimd.hpp>

namespace kvscope::simd {

// The xsimd architecture of kernels/arch/avx512_dot.cpp: an avx512bw of its own, so that no
// template instantiated there (softmax, scratch, the decode driver) is the same symbol as one
// of the plain AVX-512 unit, which the linker could then hand to CPUs without these units.
struct avx512_dot : xsimd::avx512bw {
  static constexpr char const* name() noexcept { return "avx512_dot"; }
};

// Independent chains of vpdpbusd (64 int8 multiply-adds each) or vdpbf16ps (32 bf16
// multiply-adds each) on every thread; returns 2 operations per multiply-add done.
template <class A>
double vnni_burn_arch(std::size_t iterations, int threads);
template <class A>
double bf16_dot_burn_arch(std::size_t iterations, int threads);

extern template double vnni_burn_arch<avx512_dot>(std::size_t, int);
extern template double bf16_dot_burn_arch<avx512_dot>(std::size_t, int);

inline double vnni_burn(std::size_t iterations, int threads) {
  return vnni_burn_arch<avx512_dot>(iterations, threads);
}
inline double bf16_dot_burn(std::size_t iterations, int threads) {
  return bf16_dot_burn_arch<avx512_dot>(iterations, threads);
}

}  // namespace kvscope::simd

#if XSIMD_WITH_AVX512BW
namespace xsimd::types {
template <class T>
struct get_bool_simd_register<T, kvscope::simd::avx512_dot> {
  using type = simd_avx512_bool_register<T>;
};
XSIMD_DECLARE_SIMD_REGISTER_ALIAS(kvscope::simd::avx512_dot, avx512bw);
}  // namespace xsimd::types
#endif
