#pragma once
// Declaration of the xsimd GEMV kernel and its per-ISA instantiations, for the dispatcher
// (kernels/gemv.cpp). The body is in gemv_simd_impl.hpp, included only by kernels/arch/.
#include <cstddef>
#include <xsimd/xsimd.hpp>

namespace kvscope {

// y[n] = W[n × k] · x[k]. Four rows share each load of x; each row keeps one vector
// accumulator (lane sums in k order modulo the lane count), reduced at the end, then the
// k % lanes tail is added in scalar. Memory-bound: W is read once, x stays in L1/L2.
template <class Arch>
void gemv_kernel(const float* x, const float* w, std::size_t k, std::size_t n, float* y,
                 int threads);

// Instantiated only in the ISA-flagged units of kernels/arch/.
extern template void gemv_kernel<xsimd::avx512bw>(const float*, const float*, std::size_t,
                                                  std::size_t, float*, int);
extern template void gemv_kernel<xsimd::fma3<xsimd::avx2>>(const float*, const float*, std::size_t,
                                                           std::size_t, float*, int);
extern template void gemv_kernel<xsimd::sse2>(const float*, const float*, std::size_t, std::size_t,
                                              float*, int);

}  // namespace kvscope
