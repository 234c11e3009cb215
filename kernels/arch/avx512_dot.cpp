// Dot-product unit instantiations: AVX-512 VNNI (int8 and int4 caches) and AVX512-BF16 (bf16
// caches), built with the AVX-512 flags plus -mavx512vnni -mavx512bf16 and entered only when CPUID
// reports both the ISA and the unit. Nothing but instantiations here.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/units/dot_heads_in_lanes.hpp"
#include "kernels/units/dot_int4_keys.hpp"
#include "kernels/units/dot_unit_attention.hpp"
#include "kernels/units/dot_unit_probes.hpp"

namespace kvscope::simd {
KVSCOPE_DOT_UNIT_KERNELS()
KVSCOPE_INT4_DOT_KERNELS()
template double vnni_burn_arch<avx512_dot>(std::size_t, int);
template double bf16_dot_burn_arch<avx512_dot>(std::size_t, int);
}  // namespace kvscope::simd
