// The sse2 instantiation of the GEMV kernel (built with this ISA's flags only).
#include "kernels/gemv_simd_impl.hpp"

namespace kvscope {
template void gemv_kernel<xsimd::sse2>(const float*, const float*, std::size_t, std::size_t, float*,
                                       int);
}  // namespace kvscope
