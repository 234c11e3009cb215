// The avx2 instantiations of the GEMV kernel (built with this ISA's flags only).
#include "kernels/weights/gemv_simd_impl.hpp"

namespace kvscope {
KVSCOPE_GEMV_KERNELS(, xsimd::fma3<xsimd::avx2>)
}  // namespace kvscope
