// AMX unit instantiations: int8 caches on AMX-INT8, bf16 on AMX-BF16, built with the
// dot units' flags plus -mamx-tile -mamx-int8 -mamx-bf16 and entered only when CPUID reports
// the units and Linux granted tile data. Nothing but instantiations here.
#include "kernels/attention_kernels.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/units/amx_heads_in_lanes.hpp"
#include "kernels/units/amx_tiles.hpp"

namespace kvscope::simd {
KVSCOPE_AMX_KERNELS()
template double amx_burn_arch<avx512_amx, true>(std::size_t, int);
template double amx_burn_arch<avx512_amx, false>(std::size_t, int);
template double amx_fed_burn_arch<avx512_amx>(std::size_t, bool);
}  // namespace kvscope::simd
