// The AVX2 GEMV over f16 weights (built with -mavx2 -mfma -mf16c). Only called when the CPU
// reports F16C (kernels/weights/gemv.cpp checks), so -mf16c stays confined here.
#include "kernels/weights/gemv_simd_impl.hpp"

namespace kvscope {
KVSCOPE_GEMV_KERNEL(, xsimd::fma3<xsimd::avx2>, f16)
}  // namespace kvscope
