// int4 decode read in place (kernels/formats/int4_direct.hpp) on avx2, built with this ISA's
// flags only. Nothing but instantiations here.
#include "kernels/attention_kernels.hpp"
#include "kernels/formats/int4_direct.hpp"

namespace kvscope::simd {
KVSCOPE_INT4_KERNELS(, avx2_fma)
}  // namespace kvscope::simd
