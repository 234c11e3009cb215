#pragma once
// Widening int4 cache rows (q4_0 blocks: an f16 scale, then 16 bytes holding elements j and
// j + 16 in the low and high nibble of byte j; format in kernels/ref/kv_row_ref.cpp) into f32
// SIMD registers, with the group scale applied: element = (nibble − 8) · scale.
//
// Include only from ISA-flagged translation units (kernels/arch/): the loads use intrinsics of
// their architecture, and every helper is a template on, or an overload for, one architecture.
#include <immintrin.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <xsimd/xsimd.hpp>

#include "kernels/attention_block.hpp"
#include "kernels/kv_dtype.hpp"

namespace kvscope::simd {

template <class A>
using ibatch = xsimd::batch<std::int32_t, A>;

// W consecutive bytes at p, zero-extended to W int32 lanes.
#if XSIMD_WITH_AVX512BW
inline ibatch<xsimd::avx512bw> load_u8_as_i32(const std::byte* p, xsimd::avx512bw) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
#endif
#if XSIMD_WITH_FMA3_AVX2
inline ibatch<xsimd::fma3<xsimd::avx2>> load_u8_as_i32(const std::byte* p,
                                                       xsimd::fma3<xsimd::avx2>) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
#endif
inline ibatch<xsimd::sse2> load_u8_as_i32(const std::byte* p, xsimd::sse2) {
  std::int32_t four;
  std::memcpy(&four, p, sizeof four);
  const __m128i zero = _mm_setzero_si128();
  return _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(four), zero), zero);
}

// The f16 group scale at the start of a q4_0 block, as f32. Scales are finite (the encoder
// clamps them): shifting exponent and mantissa into f32 position and multiplying by 2^112
// rebiases the exponent and is exact for half subnormals too. Templated on A so that no
// copy compiled with one ISA's flags is shared with another's unit.
template <class A>
inline float int4_group_scale(const std::byte* block) {
  std::uint16_t h;
  std::memcpy(&h, block, sizeof h);
  const std::uint32_t bits =
      ((h & 0x8000u) << 16) | (static_cast<std::uint32_t>(h & 0x7fffu) << 13);
  return std::bit_cast<float>(bits) * 0x1p112f;
}

// Widens rows [0, n) of an int4 cache block (row r at src + r · row bytes) into an f32 tile
// with rows of nv·W lanes: element = (nibble − 8) · scale, rounded once as the scalar
// reference rounds it. One group (one scale) at a time; W divides 16, so each W lanes sit in
// one nibble half of one group. Lanes past head_dim read the zero nibbles of the last
// group's padding (nv·W ≤ 32 · groups), so no partial load is needed. next: rows to prefetch.
template <class A>
void widen_rows_int4(const std::byte* src, std::size_t d, std::size_t n, std::size_t nv,
                     float* tile, const std::byte* next, std::size_t n_next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  const std::size_t row_bytes = kv_row_bytes(KvDtype::int4, d);
  const std::size_t lanes = nv * W;
  PageRunPrefetcher ahead(next, n_next * row_bytes);
  const std::size_t row_lines = lines_per_row(row_bytes);
  for (std::size_t r = 0; r < n; ++r) {
    const std::byte* row = src + r * row_bytes;
    float* out = tile + r * lanes;
    ahead.next(row_lines);
    for (std::size_t e0 = 0; e0 < lanes; e0 += kInt4Group) {
      const std::byte* block = row + e0 / kInt4Group * kInt4GroupBytes;
      const float scale = int4_group_scale<A>(block);
      const B s(scale), bias(-8.0f * scale);
      const std::size_t end = lanes - e0 < kInt4Group ? lanes - e0 : kInt4Group;
#pragma GCC unroll 8
      for (std::size_t j = 0; j < end; j += W) {
        const ibatch<A> bytes = load_u8_as_i32(block + 2 + j % 16, A{});
        const ibatch<A> nibbles = j >= 16 ? (bytes >> 4) : (bytes & ibatch<A>(0x0f));
        xsimd::fma(xsimd::to_float(nibbles), s, bias).store_aligned(out + e0 + j);
      }
    }
  }
}

}  // namespace kvscope::simd
