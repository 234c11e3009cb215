// AVX2 + FMA instantiations (built with -mavx2 -mfma), except f16: see avx2_f16c.cpp.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/formats/tiled_keys.hpp"
#include "kernels/kv_encode_simd.hpp"
#include "kernels/roofline_kernels.hpp"
#include "kernels/roofline_simd.hpp"

namespace kvscope::simd {
KVSCOPE_ATTENTION_KERNELS(, avx2_fma, f32)
KVSCOPE_ATTENTION_KERNELS(, avx2_fma, bf16)
KVSCOPE_ATTENTION_KERNELS(, avx2_fma, int8)
KVSCOPE_TILED_KERNELS(, avx2_fma)
KVSCOPE_ROOFLINE_KERNELS(, avx2_fma)
KVSCOPE_KV_ENCODE_KERNELS(, avx2_fma)
}  // namespace kvscope::simd
