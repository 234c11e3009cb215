// The avx512 instantiations of the GEMV kernel (built with this ISA's flags only).
#include "kernels/weights/gemv_simd_impl.hpp"

namespace kvscope {
KVSCOPE_GEMV_KERNELS(, xsimd::avx512bw)
KVSCOPE_GEMV_KERNEL(, xsimd::avx512bw, f16)
}  // namespace kvscope
