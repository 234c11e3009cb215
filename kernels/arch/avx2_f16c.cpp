// AVX2 + FMA + F16C instantiations for f16 caches (built with -mavx2 -mfma -mf16c). Only
// called when the CPU reports F16C (attend_arch checks), so -mf16c stays confined here.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"

namespace kvscope::simd {
KVSCOPE_ATTENTION_KERNELS(, avx2_fma, f16)
}  // namespace kvscope::simd
