// AVX-512 instantiations (built with -mavx512f -mavx512cd -mavx512dq -mavx512bw). Nothing but
// instantiations here, or the linker could hand AVX-512 code to every CPU.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/formats/tiled_keys.hpp"
#include "kernels/kv_encode_simd.hpp"
#include "kernels/roofline_kernels.hpp"
#include "kernels/roofline_simd.hpp"

namespace kvscope::simd {
KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(, xsimd::avx512bw)
KVSCOPE_TILED_KERNELS(, xsimd::avx512bw)
KVSCOPE_ROOFLINE_KERNELS(, xsimd::avx512bw)
KVSCOPE_KV_ENCODE_KERNELS(, xsimd::avx512bw)
}  // namespace kvscope::simd
