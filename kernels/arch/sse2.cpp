// SSE2 instantiations: the x86-64 baseline, no extra flags; the last fallback.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/formats/tiled_keys.hpp"
#include "kernels/kv_encode_simd.hpp"
#include "kernels/roofline_kernels.hpp"
#include "kernels/roofline_simd.hpp"

namespace kvscope::simd {
KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(, xsimd::sse2)
KVSCOPE_TILED_KERNELS(, xsimd::sse2)
KVSCOPE_ROOFLINE_KERNELS(, xsimd::sse2)
KVSCOPE_KV_ENCODE_KERNELS(, xsimd::sse2)
}  // namespace kvscope::simd
