#pragma once
// f16 caches on AMX-BF16 tiles without bf16's rounding. An f16 value (11 significant bits) is
// exactly the sum of two bf16 (8 each): hi = bf16(x), lo = x − hi, which bf16 holds exactly.
// Queries and softmax weights (f32) split the same way keep 16 of their 24 bits. Each product
// then takes three tile products, hi·hi + lo·hi + hi·lo; lo·lo (about 2^-18 of it) is
// dropped. The fast path's error stays far below the f16 format's own (2^-11 per element),
// where rounding to bf16 alone would add 2^-8. Include only from kernels/arch/avx512_amx.cpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kv_view.hpp"

namespace kvscope::simd {

// hi and lo of 16 f32 as 16 bf16 each (x − hi is exact in f32; lo is x − hi rounded).
inline void split_bf16(__m512 x, __m256i& hi, __m256i& lo) {
  const __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
  const __m512 back = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  hi = h;
  lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, back));
}

// Rows [0, rows) of f16 elements (row r at src + r · row_bytes) as hi and lo bf16 rows of
// `stride` bytes (a multiple of 64, ≥ row_bytes; zero past row_bytes), and rows [rows,
// rows_padded) all zero: the tiles then read whole 64-byte steps and 16-row chunks, never
// past the block (0 · NaN would be NaN). For an f16 value hi may truncate: its f32 has 11
// significant bits, so hi = its top 8 (the f32's upper half) and lo = x − hi (3 bits, exact
// in f32 and in bf16) are both exact, and no rounding instruction is needed (a third fewer
// instructions than split_bf16, which ran at a third of an MQA step).
inline void split_f16_rows(const std::byte* src, std::size_t row_bytes, std::size_t rows,
                           std::size_t rows_padded, std::size_t stride, std::byte* hi,
                           std::byte* lo) {
  // The upper 16 bits of 32 lanes, a's 16 then b's 16.
  alignas(64) static constexpr std::uint16_t kUpper[32] = {
      1,  3,  5,  7,  9,  11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31,
      33, 35, 37, 39, 41, 43, 45, 47, 49, 51, 53, 55, 57, 59, 61, 63};
  const __m512i upper = _mm512_load_si512(kUpper);
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (std::size_t r = 0; r < rows_padded; ++r) {
    for (std::size_t at = 0; at < stride; at += 64) {  // 32 elements: 64 bytes in, 64 out
      __m512i h = _mm512_setzero_si512(), l = _mm512_setzero_si512();
      if (r < rows && at < row_bytes) {
        const std::size_t left = (row_bytes - at) / 2;  // elements
        const __mmask32 lanes = left >= 32 ? ~__mmask32{0} : (__mmask32{1} << left) - 1;
        const __m512i f16 = _mm512_maskz_loadu_epi16(lanes, src + r * row_bytes + at);
        const __m512 a = _mm512_cvtph_ps(_mm512_castsi512_si256(f16));
        const __m512 b = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(f16, 1));
        const __m512 a_lo =
            _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), top)));
        const __m512 b_lo =
            _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(b), top)));
        h = _mm512_permutex2var_epi16(_mm512_castps_si512(a), upper, _mm512_castps_si512(b));
        l = _mm512_permutex2var_epi16(_mm512_castps_si512(a_lo), upper, _mm512_castps_si512(b_lo));
      }
      _mm512_store_si512(hi + r * stride + at, h);
      _mm512_store_si512(lo + r * stride + at, l);
    }
  }
}

// split_f16_rows over a block's rows a 16-row chunk at a time (a block across pages has a
// base per chunk); rows_padded a multiple of 16.
inline void split_f16_block(const BlockRows& src, std::size_t rows, std::size_t rows_padded,
                            std::size_t stride, std::byte* hi, std::byte* lo) {
  for (std::size_t r0 = 0; r0 < rows_padded; r0 += BlockRows::kChunkRows) {
    const std::size_t n = r0 >= rows ? 0 : rows - r0 < 16 ? rows - r0 : 16;
    split_f16_rows(n ? src.chunk[r0 / 16] : nullptr, src.row_bytes, n, 16, stride, hi + r0 * stride,
                   lo + r0 * stride);
  }
}

// q[0, d) as hi and lo bf16, zero-padded to `padded` elements (a multiple of 16).
inline void split_query(const float* q, std::size_t d, std::size_t padded, std::uint16_t* hi,
                        std::uint16_t* lo) {
  for (std::size_t j = 0; j < padded; j += 16) {
    const std::size_t left = j < d ? d - j : 0;
    const __mmask16 lanes = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    __m256i h, l;
    split_bf16(_mm512_maskz_loadu_ps(lanes, q + j), h, l);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + j), h);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + j), l);
  }
}

}  // namespace kvscope::simd
