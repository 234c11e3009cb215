#pragma once
// Loading KV-cache elements into f32 SIMD registers: the widening conversions xsimd 8.1
// lacks (f16 → f32, bf16 → f32, int8 → f32), as small per-architecture overloads.
//
// Include only from ISA-flagged translation units (kernels/arch/): the overloads use
// intrinsics of their architecture. Everything here is a template on, or an overload for,
// one architecture, so no helper compiled with AVX-512 flags can be shared with a unit
// built for a lesser ISA.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#include "kernels/kv_dtype.hpp"

namespace kvscope::simd {

template <class A>
using fbatch = xsimd::batch<float, A>;

// The C++ type one stored element of dtype D occupies in the cache.
template <KvDtype D>
struct ElemOf {
  using type = std::uint16_t;  // f16, bf16: raw 16-bit patterns
};
template <>
struct ElemOf<KvDtype::f32> {
  using type = float;
};
template <>
struct ElemOf<KvDtype::int8> {
  using type = std::int8_t;
};
template <KvDtype D>
using elem_t = typename ElemOf<D>::type;

// ---- AVX-512 (avx512bw TU; every instruction used here is AVX512F) -----------------------
#if XSIMD_WITH_AVX512BW
inline fbatch<xsimd::avx512bw> widen_f16(const std::uint16_t* p, xsimd::avx512bw) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline fbatch<xsimd::avx512bw> widen_bf16(const std::uint16_t* p, xsimd::avx512bw) {
  // bf16 is the top half of an f32: zero-extend to 32 bits and shift left by 16.
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}
inline fbatch<xsimd::avx512bw> widen_i8(const std::int8_t* p, xsimd::avx512bw) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
#endif

// ---- AVX2 + FMA (fma3<avx2> TUs) ---------------------------------------------------------
#if XSIMD_WITH_FMA3_AVX2
#ifdef __F16C__  // only the TU built with -mf16c (called behind a runtime F16C check)
inline fbatch<xsimd::fma3<xsimd::avx2>> widen_f16(const std::uint16_t* p,
                                                  xsimd::fma3<xsimd::avx2>) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
#endif
inline fbatch<xsimd::fma3<xsimd::avx2>> widen_bf16(const std::uint16_t* p,
                                                   xsimd::fma3<xsimd::avx2>) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
inline fbatch<xsimd::fma3<xsimd::avx2>> widen_i8(const std::int8_t* p, xsimd::fma3<xsimd::avx2>) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
#endif

// ---- SSE2 (the baseline TU; no F16C, no SSE4.1 sign extension) ---------------------------
inline __m128i load_u16x4_as_u32(const std::uint16_t* p) {
  return _mm_unpacklo_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)),
                            _mm_setzero_si128());
}
inline fbatch<xsimd::sse2> widen_f16(const std::uint16_t* p, xsimd::sse2) {
  // Shift exponent and mantissa into f32 position, then multiply by 2^112 to rebias the
  // exponent (15 → 127); the multiply also normalizes half subnormals exactly. Inf/NaN
  // (half exponent 31) get the f32 all-ones exponent; the sign is put back last.
  const __m128i h = load_u16x4_as_u32(p);
  const __m128i em = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x7fff)), 13);
  const __m128 magnitude = _mm_mul_ps(_mm_castsi128_ps(em), _mm_set1_ps(0x1p112f));
  const __m128i inf_nan = _mm_cmpgt_epi32(em, _mm_set1_epi32(0x0f7fffff));
  const __m128i exp_all_ones = _mm_and_si128(inf_nan, _mm_set1_epi32(0x7f800000));
  const __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
  return _mm_castsi128_ps(
      _mm_or_si128(_mm_or_si128(_mm_castps_si128(magnitude), exp_all_ones), sign));
}
inline fbatch<xsimd::sse2> widen_bf16(const std::uint16_t* p, xsimd::sse2) {
  return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(),
                                             _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
inline fbatch<xsimd::sse2> widen_i8(const std::int8_t* p, xsimd::sse2) {
  std::int32_t four;
  std::memcpy(&four, p, sizeof four);
  __m128i x = _mm_cvtsi32_si128(four);
  x = _mm_unpacklo_epi8(x, x);   // each byte twice
  x = _mm_unpacklo_epi16(x, x);  // each byte four times: arithmetic shift sign-extends
  return _mm_cvtepi32_ps(_mm_srai_epi32(x, 24));
}

// W = fbatch<A>::size consecutive elements of dtype D at p, as f32 (int8 unscaled).
template <KvDtype D, class A>
inline fbatch<A> load_elems(const elem_t<D>* p) {
  if constexpr (D == KvDtype::f32) {
    return fbatch<A>::load_unaligned(p);
  } else if constexpr (D == KvDtype::f16) {
    return widen_f16(p, A{});
  } else if constexpr (D == KvDtype::bf16) {
    return widen_bf16(p, A{});
  } else {
    return widen_i8(p, A{});
  }
}

// The first n < W elements at p, zero-padded to W lanes; reads exactly n elements.
template <KvDtype D, class A>
inline fbatch<A> load_elems_partial(const elem_t<D>* p, std::size_t n) {
  elem_t<D> tmp[fbatch<A>::size] = {};
  for (std::size_t i = 0; i < n; ++i) tmp[i] = p[i];
  return load_elems<D, A>(tmp);
}

}  // namespace kvscope::simd
