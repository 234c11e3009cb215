#pragma once
// A 16 × 16 transpose of 32-bit elements in AVX-512 registers, and the moves built on it that
// take queries and accumulators between a row per query and a lane per query. Marked for
// AVX-512F so that headers shared by every ISA's translation unit may hold calls to them
// inside their AVX-512 branches.
#include <immintrin.h>

#include <cstddef>

namespace kvscope::simd {

// In-place transpose of a 16 × 16 matrix of 32-bit elements, r[row] → r[column]. Always
// inlined: called, it takes and returns the 16 rows through memory (with a vzeroupper);
// inlined into the dot units' key transpose, GQA-8 int8 decode took 0.92x the time (warm,
// 2,000 tokens, AMD Zen 4).
__attribute__((target("avx512f"), always_inline)) inline void transpose16x16_epi32(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: columns (0,1) and (2,3) of a row pair
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int a = 0; a < 16; a += 4) {  // r[a + c], lane L: rows a..a+3 of column 4L + c
    r[a + 0] = _mm512_unpacklo_epi64(t[a], t[a + 2]);
    r[a + 1] = _mm512_unpackhi_epi64(t[a], t[a + 2]);
    r[a + 2] = _mm512_unpacklo_epi64(t[a + 1], t[a + 3]);
    r[a + 3] = _mm512_unpackhi_epi64(t[a + 1], t[a + 3]);
  }
  for (int c = 0; c < 4; ++c) {  // gather lane L of r[c], r[4+c], r[8+c], r[12+c]: column 4L+c
    const __m512i x0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88);
    const __m512i x1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xdd);
    const __m512i y0 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88);
    const __m512i y1 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xdd);
    r[c] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    r[8 + c] = _mm512_shuffle_i32x4(x0, y0, 0xdd);
    r[4 + c] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(x1, y1, 0xdd);
  }
}

// Elements [j0, j0 + 16) of a row of `len` that exist.
inline __mmask16 row_mask16(std::size_t len, std::size_t j0) {
  const std::size_t n = len > j0 ? len - j0 : 0;
  return n >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

// Sixteen rows (one per query) into one vector of lanes: for j < n, the 16 floats at
// lanes + place(j) · stride ← element j of rows[0..15] (0 past `len`, or for a null row).
// Bits are moved, not values: 32-bit integers pass through unchanged.
template <class Place>
__attribute__((target("avx512f"))) void rows_to_lanes16(const float* const rows[16],
                                                        std::size_t len, std::size_t n, Place place,
                                                        float* lanes, std::size_t stride) {
  for (std::size_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 in_row = row_mask16(len, j0);
    __m512i r[16];
    for (std::size_t k = 0; k < 16; ++k) {
      r[k] = rows[k] ? _mm512_castps_si512(_mm512_maskz_loadu_ps(in_row, rows[k] + j0))
                     : _mm512_setzero_si512();
    }
    transpose16x16_epi32(r);
    for (std::size_t e = 0; e < 16 && j0 + e < n; ++e) {
      _mm512_storeu_si512(lanes + place(j0 + e) * stride, r[e]);
    }
  }
}

// The inverse of rows_to_lanes16: element j < len of each non-null row ← its lane of the 16
// floats at lanes + place(j) · stride, for j < n.
template <class Place>
__attribute__((target("avx512f"))) void lanes_to_rows16(const float* lanes, std::size_t stride,
                                                        std::size_t len, std::size_t n, Place place,
                                                        float* const rows[16]) {
  for (std::size_t j0 = 0; j0 < n; j0 += 16) {
    const __mmask16 in_row = row_mask16(len, j0);
    __m512i r[16];
    for (std::size_t e = 0; e < 16; ++e) {
      r[e] =
          j0 + e < n ? _mm512_loadu_si512(lanes + place(j0 + e) * stride) : _mm512_setzero_si512();
    }
    transpose16x16_epi32(r);
    for (std::size_t k = 0; k < 16; ++k) {
      if (rows[k]) _mm512_mask_storeu_ps(rows[k] + j0, in_row, _mm512_castsi512_ps(r[k]));
    }
  }
}

}  // namespace kvscope::simd
