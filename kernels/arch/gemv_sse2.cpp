// The sse2 instantiations of the GEMV kernel (built with this ISA's flags only).
#include "kernels/weights/gemv_simd_impl.hpp"

namespace kvscope {
KVSCOPE_GEMV_KERNELS(, xsimd::sse2)
KVSCOPE_GEMV_KERNEL(, xsimd::sse2, f16)
}  // namespace kvscope
