#pragma once
// encode_row_arch (kernels/kv_encode.hpp): f16, bf16 and int8 rows written once for every
// architecture in xsimd, with the narrowing stores xsimd 8.1 lacks as per-architecture
// overloads. The arithmetic is the reference's, lane by lane (the same multiply, the same
// round to nearest even, the same integer rounding of f16 and bf16), so the bytes are equal;
// the reference's own handling of NaN, infinities and tiny int8 rows (1 / scale overflowing)
// is kept by handing those rows to it.
//
// Include only from ISA-flagged translation units (kernels/arch/).
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#include "kernels/kv_encode.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope::simd {

// ---- Narrowing stores: the low 16 (8) bits of each 32-bit lane, W of them to dst ----------
// Each architecture's pair is compiled only in its own units (no copy built with wider flags
// can be shared with a narrower unit).
#if XSIMD_WITH_AVX512BW
inline void store_low_u16(xsimd::batch<std::uint32_t, xsimd::avx512bw> x, std::uint16_t* dst) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_cvtepi32_epi16(x));
}
inline void store_i8(xsimd::batch<std::int32_t, xsimd::avx512bw> x, std::int8_t* dst) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(x));
}
inline void store_u8(xsimd::batch<std::int32_t, xsimd::avx512bw> x, std::uint8_t* dst) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(x));
}
#endif

#if XSIMD_WITH_FMA3_AVX2 && !XSIMD_WITH_AVX512F
// Lanes hold 0…65535 (packus saturates nothing); each 128-bit half packs its own four.
inline void store_low_u16(xsimd::batch<std::uint32_t, xsimd::fma3<xsimd::avx2>> x,
                          std::uint16_t* dst) {
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(x, x), 0x08);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(packed));
}
// Lanes hold −127…127 (the signed packs saturate nothing).
inline void store_i8(xsimd::batch<std::int32_t, xsimd::fma3<xsimd::avx2>> x, std::int8_t* dst) {
  const __m256i words = _mm256_packs_epi32(x, x);
  const __m256i bytes = _mm256_packs_epi16(words, words);  // 4 bytes at the start of each half
  const __m256i both =
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(both));
}
// Lanes hold 0…255 (the unsigned packs saturate nothing).
inline void store_u8(xsimd::batch<std::int32_t, xsimd::fma3<xsimd::avx2>> x, std::uint8_t* dst) {
  const __m256i words = _mm256_packus_epi32(x, x);
  const __m256i bytes = _mm256_packus_epi16(words, words);
  const __m256i both =
      _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm256_castsi256_si128(both));
}
#endif

#if !XSIMD_WITH_AVX
// SSE2 has no unsigned pack: lanes shifted into int16's range, packed, shifted back.
inline void store_low_u16(xsimd::batch<std::uint32_t, xsimd::sse2> x, std::uint16_t* dst) {
  const __m128i centred = _mm_sub_epi32(x, _mm_set1_epi32(0x8000));
  const __m128i packed = _mm_xor_si128(_mm_packs_epi32(centred, centred), _mm_set1_epi16(-0x8000));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), packed);
}
inline void store_i8(xsimd::batch<std::int32_t, xsimd::sse2> x, std::int8_t* dst) {
  const __m128i words = _mm_packs_epi32(x, x);
  const std::int32_t four = _mm_cvtsi128_si32(_mm_packs_epi16(words, words));
  std::memcpy(dst, &four, sizeof four);
}
inline void store_u8(xsimd::batch<std::int32_t, xsimd::sse2> x, std::uint8_t* dst) {
  const __m128i words = _mm_packs_epi32(x, x);  // 0…255 fits int16
  const std::int32_t four = _mm_cvtsi128_si32(_mm_packus_epi16(words, words));
  std::memcpy(dst, &four, sizeof four);
}
#endif

// f32_to_bf16_bits of finite lanes: round the dropped 16 bits to nearest, ties to even.
template <class A>
xsimd::batch<std::uint32_t, A> bf16_bits(xsimd::batch<float, A> x) {
  using U = xsimd::batch<std::uint32_t, A>;
  const U u = xsimd::bitwise_cast<U>(x);
  return (u + U(0x7fffu) + ((u >> 16) & U(1u))) >> 16;
}

// f32_to_f16_bits of finite lanes: infinity from 65520 up, subnormal halves below 2^-14
// (rounded by the FPU's add, as the reference does), else the exponent rebased and the 13
// dropped bits rounded to nearest, ties to even.
template <class A>
xsimd::batch<std::uint32_t, A> f16_bits(xsimd::batch<float, A> x) {
  using U = xsimd::batch<std::uint32_t, A>;
  using B = xsimd::batch<float, A>;
  const U u = xsimd::bitwise_cast<U>(x);
  const U sign = (u >> 16) & U(0x8000u);
  const U abs = u & U(0x7fffffffu);
  const U subnormal =
      xsimd::bitwise_cast<U>(xsimd::bitwise_cast<B>(abs) + B(0.5f)) - U(0x3f000000u);
  const U rebased = abs - U((127u - 15u) << 23);
  const U normal = (rebased + U(0xfffu) + ((rebased >> 13) & U(1u))) >> 13;
  const U magnitude = xsimd::select(abs >= U(0x477ff000u), U(0x7c00u),
                                    xsimd::select(abs < U(0x38800000u), subnormal, normal));
  return sign | magnitude;
}

// encode_int4_ref's blocks for a row of whole groups of 32 finite values: per group the f16
// scale of absmax / 7, then byte j = the nibbles of elements j and j + 16 (q + 8, q rounded to
// nearest even and clamped to ±7).
template <class A>
void encode_int4_groups(const float* src, std::size_t n, std::byte* dst) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<std::int32_t, A>;
  constexpr std::size_t W = B::size, V = kInt4Group / W;  // vectors per group
  for (std::size_t g = 0; g < n / kInt4Group; ++g) {
    const float* x = src + g * kInt4Group;
    B top(0.0f);
    for (std::size_t c = 0; c < V; ++c)
      top = xsimd::max(top, xsimd::abs(B::load_unaligned(x + c * W)));
    alignas(64) float lanes[W];
    top.store_aligned(lanes);
    const float absmax = *std::max_element(lanes, lanes + W);
    const std::uint16_t bits = f32_to_f16_bits(std::min(absmax / 7.0f, 65504.0f));
    const float scale = f16_bits_to_f32(bits);
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;  // zero guard: all-zero group
    std::byte* block = dst + g * kInt4GroupBytes;
    std::memcpy(block, &bits, 2);
    // Clamped as floats, as the reference does: with the scale capped at 65504, x / scale can
    // leave int32's range.
    const auto nibble = [&](std::size_t c) {
      const B q = xsimd::nearbyint(B::load_unaligned(x + c * W) * B(inverse));
      return xsimd::nearbyint_as_int(xsimd::min(xsimd::max(q, B(-7.0f)), B(7.0f))) + I(8);
    };
    for (std::size_t c = 0; c < V / 2; ++c) {
      store_u8(nibble(c) | (nibble(c + V / 2) << 4),
               reinterpret_cast<std::uint8_t*>(block + 2) + c * W);
    }
  }
}

template <class A>
float encode_row_arch(KvDtype dtype, const float* src, std::size_t n, std::byte* dst) {
  using B = xsimd::batch<float, A>;
  using I = xsimd::batch<std::int32_t, A>;
  constexpr std::size_t W = B::size;
  if (dtype == KvDtype::f32) {
    std::memcpy(dst, src, n * sizeof(float));
    return 1.0f;
  }
  // int4 rows with a last group shorter than 32 (head_dim 40, 72, 80) stay on the reference.
  if (dtype == KvDtype::int4 && n % kInt4Group != 0) return encode_row_ref(dtype, src, n, dst);

  // The row's largest magnitude; a NaN or an infinity fails `≤ FLT_MAX`.
  B top(0.0f);
  auto finite = top == top;
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const B a = xsimd::abs(B::load_unaligned(src + i));
    finite = finite && (a <= B(FLT_MAX));
    top = xsimd::max(top, a);
  }
  alignas(64) float lanes[W];
  top.store_aligned(lanes);
  float absmax = *std::max_element(lanes, lanes + W);
  bool all_finite = xsimd::all(finite);
  for (std::size_t t = i; t < n; ++t) {
    const float a = std::fabs(src[t]);
    all_finite = all_finite && a <= FLT_MAX;
    absmax = std::max(absmax, a);
  }
  if (!all_finite) return encode_row_ref(dtype, src, n, dst);

  if (dtype == KvDtype::int4) {
    encode_int4_groups<A>(src, n, dst);
    return 1.0f;
  }
  if (dtype == KvDtype::int8) {
    const float scale = absmax / 127.0f;
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;  // zero guard: all-zero row
    // A row so small that 1 / scale overflows: the reference's own rounding of 0 · ∞.
    if (!(inverse <= FLT_MAX)) return encode_row_ref(dtype, src, n, dst);
    auto* out = reinterpret_cast<std::int8_t*>(dst);
    for (i = 0; i + W <= n; i += W) {
      const I q = xsimd::nearbyint_as_int(B::load_unaligned(src + i) * B(inverse));
      store_i8(xsimd::min(xsimd::max(q, I(-127)), I(127)), out + i);
    }
    for (; i < n; ++i) {
      out[i] =
          static_cast<std::int8_t>(std::clamp(std::nearbyint(src[i] * inverse), -127.0f, 127.0f));
    }
    return scale;
  }
  auto* out = reinterpret_cast<std::uint16_t*>(dst);
  const bool bf16 = dtype == KvDtype::bf16;
  for (i = 0; i + W <= n; i += W) {
    const B x = B::load_unaligned(src + i);
    store_low_u16(bf16 ? bf16_bits(x) : f16_bits(x), out + i);
  }
  for (; i < n; ++i) out[i] = bf16 ? f32_to_bf16_bits(src[i]) : f32_to_f16_bits(src[i]);
  return 1.0f;
}

}  // namespace kvscope::simd
