#pragma once
// The dot units' instructions (vpdpbusd, vdpbf16ps), lane masks, and a query packed for
// them (int8: quantized per query with its scale and the offset of unsigned keys; bf16:
// rounded). Shared by the tile kernel (dot_unit_attention.hpp), the queries-in-lanes kernel
// and the in-place row kernels (dot_key_rows.hpp). Include only from kernels/arch/avx512_dot.cpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/kv_dtype.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/units/dot_tiles.hpp"

namespace kvscope::simd {

// acc + the dot products of groups of 4 u8 (a) × s8 (b), and of pairs of bf16 a × b. As
// inline assembly: GCC 12 copies the accumulator of the vpdpbusd / vdpbf16ps intrinsics into
// a fresh register and back around every instruction in a loop (measured 35% slower); "+v"
// keeps it in place. Operands in AT&T order: b, a, acc.
inline __m512i dot_u8s8(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
}
inline __m512 dot_bf16(__m512 acc, __m512i a, __m512i b) {
  asm("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(b));
  return acc;
}

// int8 P·V's weights: y ∈ [0, 255] in steps of the block's largest / 255, as u8 for vpdpbusd.
// One digit, rounded, errs by |y − round(y)| per row, and the output by at most Σ|y − round(y)|
// ÷ Σ y of max|v| per block. Under an attention sink (one key taking most of a block's weight,
// the others under half a step each, rounded to 0) that reached 3x the dot-unit tests' bound
// (AttentionSinkKeepsTheSmallWeightsMass). So where a lane's block would err by more than
// kOneDigitError of max|v| (two_digits), its weights take two digits for two vpdpbusd passes:
// hi = ⌊y⌋, lo = round((y − hi) · 255), y = hi + lo / 255 within 1/510; elsewhere one, rounded
// (lo = 0), as before.
inline constexpr float kOneDigitError = 1.0f / 128;
struct WeightDigits {
  __m512i hi, lo;
};
// Per lane, summed over a block's rows: a bound on the rounding error one digit makes
// (|y − round(y)| ≤ min(y, ½)), less kOneDigitError of the weight; two digits where it comes
// out above 0. Where no block needs two digits (uniform data) the check costs int8 decode
// 2-7% of its time (AMD Zen 4, warm and cold, 2,000 and 512 tokens).
struct DigitError {
  __m512 excess = _mm512_setzero_ps();
  void add(__m512 y) {
    excess = _mm512_add_ps(excess, _mm512_fnmadd_ps(y, _mm512_set1_ps(kOneDigitError),
                                                    _mm512_min_ps(y, _mm512_set1_ps(0.5f))));
  }
  __mmask16 two_digits() const {
    return _mm512_cmp_ps_mask(excess, _mm512_setzero_ps(), _CMP_GT_OQ);
  }
};
inline WeightDigits weight_digits(__m512 y, bool two) {
  if (!two) return {_mm512_cvtps_epi32(y), _mm512_setzero_si512()};
  const __m512 hi = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m512 lo = _mm512_mul_ps(_mm512_sub_ps(y, hi), _mm512_set1_ps(255.0f));
  return {_mm512_cvttps_epi32(hi), _mm512_cvtps_epi32(lo)};
}

// Lanes [0, n − first) of a 16-key vector starting at key `first`.
inline __mmask16 lanes_below(std::size_t n, std::size_t first) {
  return n >= first + 16 ? __mmask16(0xffff)
         : n > first     ? __mmask16((1u << (n - first)) - 1)
                         : __mmask16(0);
}

// One query prepared for the unit: 32-bit groups of its quantized or rounded elements.
struct DotQuery {
  std::int32_t* groups = nullptr;  // [segments · 16]
  float scale = 1.0f;              // int8: sq (score = sq · k_scale · integer dot)
  std::int32_t offset = 0;         // int8: 128 · Σ q8, the bias of the unsigned keys
};

// max |q[j]| over j < d.
inline float query_absmax(const float* q, std::size_t d) {
  __m512 vmax = _mm512_setzero_ps();
  for (std::size_t j = 0; j < d; j += 16) {
    vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_maskz_loadu_ps(lanes_below(d, j), q + j)));
  }
  return _mm512_reduce_max_ps(vmax);
}

// q[j, j + 16) × inv rounded to the nearest int32 (even on ties; lanes past d give 0): the s8
// elements of a query quantized against its absmax (inv = 127 / max|q|).
inline __m512i quantize_query16(const float* q, std::size_t d, std::size_t j, __m512 inv) {
  return _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes_below(d, j), q + j), inv));
}

// Packs q[0, d) (already × 1/√d) into `out`, zero-padded to the segment grid.
template <KvDtype D>
void pack_query(const float* q, const DotGeometry<D>& geo, DotQuery& out) {
  auto* bytes = reinterpret_cast<std::uint8_t*>(out.groups);
  // memset, not a byte loop: a byte store may alias geo, so GCC reloads the bound each step
  // (perf: 10% of AMX prefill).
  std::memset(bytes, 0, geo.segments * 64);
  if constexpr (D == KvDtype::int8) {
    const float amax = query_absmax(q, geo.d);
    out.scale = amax / 127.0f;
    out.offset = 0;
    if (amax == 0.0f) return;  // all-zero query: every score 0, q8 = 0
    const __m512 inv = _mm512_set1_ps(127.0f / amax);
    __m512i vsum = _mm512_setzero_si512();
    for (std::size_t j = 0; j < geo.d; j += 16) {  // lanes past d load 0 and store 0
      const __m512i q8 = quantize_query16(q, geo.d, j, inv);
      vsum = _mm512_add_epi32(vsum, q8);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(bytes + j), _mm512_cvtsepi32_epi8(q8));
    }
    const int sum = _mm512_reduce_add_epi32(vsum);  // |Σ| ≤ 127 · d: no overflow
    out.offset = 128 * sum;
  } else {
    out.scale = 1.0f;
    out.offset = 0;
    auto* halves = reinterpret_cast<std::uint16_t*>(out.groups);
    for (std::size_t j = 0; j < geo.d; ++j) halves[j] = f32_to_bf16_bits(q[j]);
  }
}

// −inf in lanes [n − first, 16) of a 16-key vector starting at key `first`.
inline __m512 mask_past(__m512 s, std::size_t n, std::size_t first) {
  return _mm512_mask_blend_ps(lanes_below(n, first),
                              _mm512_set1_ps(-std::numeric_limits<float>::infinity()), s);
}

// The unit's accumulator register: int32 lanes for VNNI, f32 for bf16.
template <KvDtype D>
struct DotAcc {
  using type = __m512;
};
template <>
struct DotAcc<KvDtype::int8> {
  using type = __m512i;
};

// A zeroed accumulator of D's unit, and acc + the unit's dot products of the 32-bit groups of
// a and b (int8: a unsigned).
template <KvDtype D>
typename DotAcc<D>::type dot_acc_zero() {
  if constexpr (D == KvDtype::int8) {
    return _mm512_setzero_si512();
  } else {
    return _mm512_setzero_ps();
  }
}
template <KvDtype D>
typename DotAcc<D>::type dot_unit(typename DotAcc<D>::type acc, __m512i a, __m512i b) {
  if constexpr (D == KvDtype::int8) {
    return dot_u8s8(acc, a, b);
  } else {
    return dot_bf16(acc, a, b);
  }
}

}  // namespace kvscope::simd
