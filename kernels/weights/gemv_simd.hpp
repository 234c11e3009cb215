#pragma once
// Declaration of the xsimd GEMV kernel and its per-ISA × weight-type instantiations, for the
// dispatcher (kernels/weights/gemv.cpp). The body is in gemv_simd_impl.hpp, included only by
// kernels/arch/.
#include <cstddef>
#include <xsimd/xsimd.hpp>

#include "kernels/kv_dtype.hpp"

namespace kvscope {

// y[n] = W[n × k] · x[k], W's elements of type D (f32, or f16/bf16 as raw 16-bit patterns,
// widened to f32 in registers: exact). Four rows (one of each of four streams of rows,
// row_streams.hpp) share each load of x; each row keeps one vector accumulator (lane sums in
// k order modulo the lane count), the k % lanes tail is a zero-padded vector, reduced at the
// end. Memory-bound: W is read once, x stays in L1/L2.
template <class Arch, KvDtype D>
void gemv_kernel(const float* x, const void* w, std::size_t k, std::size_t n, float* y,
                 int threads);

#define KVSCOPE_GEMV_KERNEL(PREFIX, ARCH, DTYPE)                                                 \
  PREFIX template void gemv_kernel<ARCH, KvDtype::DTYPE>(const float*, const void*, std::size_t, \
                                                         std::size_t, float*, int);
// f16 on AVX2 needs F16C: that instantiation has its own unit (arch/gemv_avx2_f16c.cpp).
#define KVSCOPE_GEMV_KERNELS(PREFIX, ARCH) \
  KVSCOPE_GEMV_KERNEL(PREFIX, ARCH, f32)   \
  KVSCOPE_GEMV_KERNEL(PREFIX, ARCH, bf16)

// Instantiated only in the ISA-flagged units of kernels/arch/.
KVSCOPE_GEMV_KERNELS(extern, xsimd::avx512bw)
KVSCOPE_GEMV_KERNEL(extern, xsimd::avx512bw, f16)
KVSCOPE_GEMV_KERNELS(extern, xsimd::fma3<xsimd::avx2>)
KVSCOPE_GEMV_KERNEL(extern, xsimd::fma3<xsimd::avx2>, f16)
KVSCOPE_GEMV_KERNELS(extern, xsimd::sse2)
KVSCOPE_GEMV_KERNEL(extern, xsimd::sse2, f16)

}  // namespace kvscope
