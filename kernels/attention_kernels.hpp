#pragma once
// The per-ISA attention kernels, as the dispatching unit and the tests see them: declarations
// and `extern template`s only (xsimd 8.1 needs the instantiations declared where they are
// called). Definitions: attention_decode.hpp, attention_prefill.hpp; instantiations, compiled
// with each ISA's flags: kernels/arch/.
#include <type_traits>
#include <xsimd/xsimd.hpp>

#include "kernels/attention.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/amx_kernels.hpp"
#include "kernels/units/compute_unit.hpp"
#include "kernels/units/dot_unit_kernels.hpp"

namespace kvscope::simd {

using avx2_fma = xsimd::fma3<xsimd::avx2>;

// Decode (p.n_queries == 1) and prefill (any n_queries ≥ 1) on architecture A for a cache of
// element type D on compute unit U; same contract as attend(). The caller checks the CPU
// supports A and U.
template <class A, KvDtype D, ComputeUnit U>
void attend_decode(const AttentionProblem& p, int threads);
template <class A, KvDtype D, ComputeUnit U>
void attend_prefill(const AttentionProblem& p, int threads);

#define KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, ARCH, DTYPE, UNIT)                 \
  PREFIX template void attend_decode<ARCH, KvDtype::DTYPE, ComputeUnit::UNIT>(  \
      const AttentionProblem&, int);                                            \
  PREFIX template void attend_prefill<ARCH, KvDtype::DTYPE, ComputeUnit::UNIT>( \
      const AttentionProblem&, int);
#define KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, DTYPE) \
  KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, ARCH, DTYPE, fp32_fma)
#define KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(PREFIX, ARCH) \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, f32)             \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, f16)             \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, bf16)            \
  KVSCOPE_ATTENTION_KERNELS(PREFIX, ARCH, int8)
// The dot units: int8 on VNNI, bf16 on AVX512-BF16 (kernels/arch/avx512_dot.cpp); int4 below.
#define KVSCOPE_DOT_UNIT_KERNELS(PREFIX)                            \
  KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, avx512_dot, int8, vnni_int8) \
  KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, avx512_dot, bf16, avx512_bf16)

// int4 keys and values on VNNI (kernels/units/dot_int4_keys.hpp).
template <class A>
void attend_decode_int4_dot(const AttentionProblem& p, int threads);
template <class A>
void attend_prefill_int4_dot(const AttentionProblem& p, int threads);
#define KVSCOPE_INT4_DOT_KERNELS(PREFIX)                                                 \
  PREFIX template void attend_decode_int4_dot<avx512_dot>(const AttentionProblem&, int); \
  PREFIX template void attend_prefill_int4_dot<avx512_dot>(const AttentionProblem&, int);
KVSCOPE_INT4_DOT_KERNELS(extern)

// The AMX units: int8 on AMX-INT8, bf16 on AMX-BF16 (kernels/arch/avx512_amx.cpp).
#define KVSCOPE_AMX_KERNELS(PREFIX)                                \
  KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, avx512_amx, int8, amx_int8) \
  KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, avx512_amx, bf16, amx_bf16) \
  KVSCOPE_ATTENTION_KERNELS_ON(PREFIX, avx512_amx, f16, amx_bf16)

KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(extern, xsimd::avx512bw)
KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(extern, avx2_fma)
KVSCOPE_ATTENTION_KERNELS_ALL_DTYPES(extern, xsimd::sse2)
KVSCOPE_DOT_UNIT_KERNELS(extern)
KVSCOPE_AMX_KERNELS(extern)

// Any K type with any V type, and int4 (kernels/formats/tiled_keys.hpp): one instantiation
// per ISA; the K and V readers are chosen once per call.
template <class A>
void attend_decode_tiled(const AttentionProblem& p, int threads);
template <class A>
void attend_prefill_tiled(const AttentionProblem& p, int threads);
#define KVSCOPE_TILED_KERNELS(PREFIX, ARCH)                                     \
  PREFIX template void attend_decode_tiled<ARCH>(const AttentionProblem&, int); \
  PREFIX template void attend_prefill_tiled<ARCH>(const AttentionProblem&, int);
KVSCOPE_TILED_KERNELS(extern, xsimd::avx512bw)
KVSCOPE_TILED_KERNELS(extern, avx2_fma)
KVSCOPE_TILED_KERNELS(extern, xsimd::sse2)
// The AVX2 f16 block widener needs F16C: compiled in kernels/arch/avx2_f16c.cpp only.
template <class A, KvDtype D>
void widen_block(const std::byte* src, std::size_t d, std::size_t n, std::size_t nv, float* tile,
                 const std::byte* next, std::size_t n_next);
#define KVSCOPE_AVX2_F16_WIDEN_BLOCK(PREFIX)                                                 \
  PREFIX template void widen_block<avx2_fma, KvDtype::f16>(const std::byte*, std::size_t,    \
                                                           std::size_t, std::size_t, float*, \
                                                           const std::byte*, std::size_t);
KVSCOPE_AVX2_F16_WIDEN_BLOCK(extern)

// Decode over int4 keys and values read in place, nibbles unpacked in registers
// (kernels/formats/int4_direct.hpp; instantiations: kernels/arch/int4_*.cpp).
template <class A>
void attend_decode_int4(const AttentionProblem& p, int threads);
#define KVSCOPE_INT4_KERNELS(PREFIX, ARCH) \
  PREFIX template void attend_decode_int4<ARCH>(const AttentionProblem&, int);
KVSCOPE_INT4_KERNELS(extern, xsimd::avx512bw)
KVSCOPE_INT4_KERNELS(extern, avx2_fma)
KVSCOPE_INT4_KERNELS(extern, xsimd::sse2)

// Query heads per kv head up to which int4 decode reads the cache in place, each query
// unpacking the nibbles itself; above it the tiled kernels widen each block once for all.
inline constexpr std::size_t kInt4DirectMaxGroup = 4;

// One attention call on architecture A: picks the kernel for the cache type and the number of
// queries once. A = fma3<avx2> with an f16 cache on a CPU without F16C runs the SSE2 kernel.
// int4 decode with few query heads per kv head reads the nibbles in place; keys and values of
// different types, and the other int4 calls, run the tiled kernels.
template <class A>
void attend_arch(const AttentionProblem& p, int threads) {
  if (p.n_queries == 0) return;
  if (threads < 1) threads = 1;
  const bool int4 = p.kv.k_dtype == KvDtype::int4 && p.kv.v_dtype == KvDtype::int4;
  if (int4 && p.n_queries == 1 && p.n_heads / p.kv.n_kv_heads <= kInt4DirectMaxGroup) {
    return attend_decode_int4<A>(p, threads);
  }
  if (p.kv.k_dtype != p.kv.v_dtype || int4) {
    if constexpr (std::is_same_v<A, avx2_fma>) {
      const bool f16 = p.kv.k_dtype == KvDtype::f16 || p.kv.v_dtype == KvDtype::f16;
      if (f16 && !cpu_has_f16c()) return attend_arch<xsimd::sse2>(p, threads);
    }
    return p.n_queries == 1 ? attend_decode_tiled<A>(p, threads)
                            : attend_prefill_tiled<A>(p, threads);
  }
  const auto run = [&]<KvDtype D>() {
    if (p.n_queries == 1) {
      attend_decode<A, D, ComputeUnit::fp32_fma>(p, threads);
    } else {
      attend_prefill<A, D, ComputeUnit::fp32_fma>(p, threads);
    }
  };
  switch (p.kv.k_dtype) {
    case KvDtype::f32:
      return run.template operator()<KvDtype::f32>();
    case KvDtype::f16:
      if constexpr (std::is_same_v<A, avx2_fma>) {
        // The AVX2 f16 kernels use F16C, which cpu_supports(Isa::avx2) does not check.
        if (!cpu_has_f16c()) return attend_arch<xsimd::sse2>(p, threads);
      }
      return run.template operator()<KvDtype::f16>();
    case KvDtype::bf16:
      return run.template operator()<KvDtype::bf16>();
    case KvDtype::int8:
      return run.template operator()<KvDtype::int8>();
    case KvDtype::int4:
      return;  // tiled above
  }
}

// One attention call on a dot or matrix unit (the cache's dtype is the unit's: int8 or int4
// for vnni-int8, int8 for amx-int8, bf16 for avx512-bf16, bf16 or f16 for amx-bf16). The
// caller checks the CPU has the unit.
inline void attend_dot_unit(const AttentionProblem& p, ComputeUnit unit, int threads) {
  if (p.n_queries == 0) return;
  if (threads < 1) threads = 1;
  const bool decode = p.n_queries == 1;
  if (unit == ComputeUnit::vnni_int8 && p.kv.k_dtype == KvDtype::int4) {
    return decode ? attend_decode_int4_dot<avx512_dot>(p, threads)
                  : attend_prefill_int4_dot<avx512_dot>(p, threads);
  }
  if (unit == ComputeUnit::amx_int8) {
    return decode ? attend_decode<avx512_amx, KvDtype::int8, ComputeUnit::amx_int8>(p, threads)
                  : attend_prefill<avx512_amx, KvDtype::int8, ComputeUnit::amx_int8>(p, threads);
  }
  if (unit == ComputeUnit::amx_bf16 && p.kv.k_dtype == KvDtype::f16) {
    return decode ? attend_decode<avx512_amx, KvDtype::f16, ComputeUnit::amx_bf16>(p, threads)
                  : attend_prefill<avx512_amx, KvDtype::f16, ComputeUnit::amx_bf16>(p, threads);
  }
  if (unit == ComputeUnit::amx_bf16) {
    return decode ? attend_decode<avx512_amx, KvDtype::bf16, ComputeUnit::amx_bf16>(p, threads)
                  : attend_prefill<avx512_amx, KvDtype::bf16, ComputeUnit::amx_bf16>(p, threads);
  }
  if (unit == ComputeUnit::vnni_int8) {
    return decode ? attend_decode<avx512_dot, KvDtype::int8, ComputeUnit::vnni_int8>(p, threads)
                  : attend_prefill<avx512_dot, KvDtype::int8, ComputeUnit::vnni_int8>(p, threads);
  }
  return decode ? attend_decode<avx512_dot, KvDtype::bf16, ComputeUnit::avx512_bf16>(p, threads)
                : attend_prefill<avx512_dot, KvDtype::bf16, ComputeUnit::avx512_bf16>(p, threads);
}

}  // namespace kvscope::simd
