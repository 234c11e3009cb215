// int4 decode read in place (kernels/formats/int4_direct.hpp) on sse2, built with this ISA's
// flags only. Nothing but instantiations here.
#include "kernels/attention_kernels.hpp"
#include "kernels/formats/int4_direct.hpp"

namespace kvscope::simd {
KVSCOPE_INT4_KERNELS(, xsimd::sse2)
}  // namespace kvscope::simd
