#pragma once
// The attention kernels and probes of the AMX units (AMX-INT8, AMX-BF16), as the dispatching
// units see them: the architecture tag and declarations. Definitions: amx_heads_in_lanes.hpp
// and amx_tiles.hpp; instantiations: kernels/arch/avx512_amx.cpp, the only unit compiled with
// -mamx-tile -mamx-int8 -mamx-bf16.
#include <cstddef>
#include <xsimd/xsimd.hpp>

namespace kvscope::simd {

// The xsimd architecture of kernels/arch/avx512_amx.cpp, an avx512bw of its own (as
// avx512_dot): no template instantiated there is the same symbol as one of another unit.
struct avx512_amx : xsimd::avx512bw {
  static constexpr char const* name() noexcept { return "avx512_amx"; }
};

// Independent tile dot products on every thread (amx_tiles.hpp); 2 operations per
// multiply-add.
template <class A, bool Int8>
double amx_burn_arch(std::size_t iterations, int threads);
extern template double amx_burn_arch<avx512_amx, true>(std::size_t, int);
extern template double amx_burn_arch<avx512_amx, false>(std::size_t, int);
// The bf16 products fed by operand tile loads from L1 (amx_tiles.hpp); returns the loads.
template <class A>
double amx_fed_burn_arch(std::size_t iterations, bool products);
extern template double amx_fed_burn_arch<avx512_amx>(std::size_t, bool);

}  // namespace kvscope::simd

#if XSIMD_WITH_AVX512BW
namespace xsimd::types {
template <class T>
struct get_bool_simd_register<T, kvscope::simd::avx512_amx> {
  using type = simd_avx512_bool_register<T>;
};
XSIMD_DECLARE_SIMD_REGISTER_ALIAS(kvscope::simd::avx512_amx, avx512bw);
}  // namespace xsimd::types
#endif
