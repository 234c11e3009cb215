#pragma once
// A 16 × 16 transpose of 32-bit elements in AVX-512 registers, for the kernels that move
// queries and accumulators between a row per query and a lane per query. Marked for
// AVX-512F so that headers shared by every ISA's translation unit may hold calls to it
// inside their AVX-512 branches.
#include <immintrin.h>

namespace kvscope::simd {

// In-place transpose of a 16 × 16 matrix of 32-bit elements, r[row] → r[column].
__attribute__((target("avx512f"))) inline void transpose16x16_epi32(__m512i r[16]) {
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

}  // namespace kvscope::simd
