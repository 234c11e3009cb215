#pragma once
// The per-ISA roofline probes behind read_sweep() and fma_burn(): declarations and
// `extern template`s. Definitions: roofline_simd.hpp; instantiations: kernels/arch/.
#include <cstddef>
#include <xsimd/xsimd.hpp>

namespace kvscope::simd {

// Same contracts as read_sweep() / fma_burn() / read_with_fmas() in roofline.hpp, on
// architecture A (read_with_fmas_arch: fmas_per_float already checked).
template <class A>
float read_sweep_arch(const std::byte* data, std::size_t bytes, int threads);
template <class A>
double fma_burn_arch(std::size_t iterations, int threads, float* chains_sum);
template <class A>
float read_with_fmas_arch(const std::byte* data, std::size_t bytes, int fmas_per_float,
                          int threads);

#define KVSCOPE_ROOFLINE_KERNELS(PREFIX, ARCH)                                     \
  PREFIX template float read_sweep_arch<ARCH>(const std::byte*, std::size_t, int); \
  PREFIX template double fma_burn_arch<ARCH>(std::size_t, int, float*);            \
  PREFIX template float read_with_fmas_arch<ARCH>(const std::byte*, std::size_t, int, int);

KVSCOPE_ROOFLINE_KERNELS(extern, xsimd::avx512bw)
KVSCOPE_ROOFLINE_KERNELS(extern, xsimd::fma3<xsimd::avx2>)
KVSCOPE_ROOFLINE_KERNELS(extern, xsimd::sse2)

}  // namespace kvscope::simd
