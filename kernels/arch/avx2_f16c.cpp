// AVX2 + FMA + F16C instantiations for f16 caches and the tiled kernels' f16 widener (built
// with -mavx2 -mfma -mf16c). Only called when the CPU reports F16C (attend_arch checks), so
// -mf16c stays confined here.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/formats/tiled_keys.hpp"

namespace kvscope::simd {
KVSCOPE_ATTENTION_KERNELS(, avx2_fma, f16)
KVSCOPE_AVX2_F16_WIDEN_BLOCK()
}  // namespace kvscope::simd
