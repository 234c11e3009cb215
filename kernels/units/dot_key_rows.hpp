#pragma once
// Scores of one query against cache rows read in place on AVX-512 VNNI: for MHA and narrow
// GQA (fewer than kVnniMinSharing queries per kv head), where transposing each key block
// (dot_tiles.hpp) costs more than one query's dot products gain from it. Include only from
// kernels/arch/avx512_dot.cpp.
//
// Per group of 16 keys, each key row's 64-byte segments go through vpdpbusd into one int32
// accumulator per key (16 accumulators); reduce16 then sums each accumulator's lanes,
// 16 keys at once, in 47 instructions (against 2 per segment for the products). All sums
// are exact in int32.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/units/dot_query.hpp"
#include "kernels/units/dot_tiles.hpp"

namespace kvscope::simd {

// The slot of key `key` (< 16) among reduce16's inputs: the tree puts the sum of slot
// m + {0, 8, 4, 12}[L] in lane 4L + m, so key groups 4–7 and 8–11 trade places.
constexpr std::size_t reduce16_slot(std::size_t key) {
  constexpr std::size_t kOffset[4] = {0, 8, 4, 12};
  return kOffset[key / 4] + key % 4;
}

// Lane ℓ ← Σ of the 16 lanes of v[reduce16_slot(ℓ)]: halves folded (256-bit, then 128-bit
// lanes), then 64-bit and 32-bit pairs, each step adding two shuffles of two inputs. Float:
// the lanes are f32 (their bits in v), else int32.
template <bool Float>
inline __m512i reduce16_bits(const __m512i v[16]) {
  const auto add = [](__m512i x, __m512i y) {
    if constexpr (Float) {
      return _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(y)));
    } else {
      return _mm512_add_epi32(x, y);
    }
  };
  __m512i a[8], b[4], c[2];
  for (int i = 0; i < 8; ++i) {  // a[i]: 128-bit lanes [v_i, v_i, v_{i+8}, v_{i+8}] half-sums
    a[i] =
        add(_mm512_shuffle_i64x2(v[i], v[i + 8], 0x44), _mm512_shuffle_i64x2(v[i], v[i + 8], 0xee));
  }
  for (int i = 0; i < 4; ++i) {  // b[i]: lanes [v_i, v_{i+8}, v_{i+4}, v_{i+12}], 4 parts each
    b[i] =
        add(_mm512_shuffle_i64x2(a[i], a[i + 4], 0x88), _mm512_shuffle_i64x2(a[i], a[i + 4], 0xdd));
  }
  for (int i = 0; i < 2; ++i) {  // c[i], lane L: 2 parts of b_i's key, then 2 of b_{i+2}'s
    c[i] = add(_mm512_unpacklo_epi64(b[i], b[i + 2]), _mm512_unpackhi_epi64(b[i], b[i + 2]));
  }
  const __m512i lo = _mm512_unpacklo_epi32(c[0], c[1]);  // c0.0 c1.0 c0.1 c1.1
  const __m512i hi = _mm512_unpackhi_epi32(c[0], c[1]);  // c0.2 c1.2 c0.3 c1.3
  return add(_mm512_unpacklo_epi64(lo, hi), _mm512_unpackhi_epi64(lo, hi));
}
inline __m512i reduce16(const __m512i v[16]) { return reduce16_bits<false>(v); }
inline __m512 reduce16(const __m512 v[16]) {
  __m512i bits[16];
  for (int i = 0; i < 16; ++i) bits[i] = _mm512_castps_si512(v[i]);
  return _mm512_castsi512_ps(reduce16_bits<true>(bits));
}

// s[0, 64) ← sq · k_scale[t] · (q8 · k_t) for int8 key rows t < n (row t at k.row(t), read
// in place; −inf past n), the query packed by pack_query. Keys enter vpdpbusd as k + 128
// (xor 0x80, the unsigned operand), so q8 · k = Σ q8 (k + 128) − offset. pf takes a line per
// row segment loaded (the next block's rows).
template <class Prefetch>
void dot_scores_rows(const DotQuery& q, const BlockRows& k, std::size_t n,
                     const DotGeometry<KvDtype::int8>& geo, const float* k_scale, float* s,
                     Prefetch& pf) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i offset = _mm512_set1_epi32(q.offset);
  const __m512 sq = _mm512_set1_ps(q.scale);
  for (std::size_t t0 = 0; t0 < kDotBlock; t0 += 16) {
    if (t0 >= n) {  // the softmax reads the whole block
      _mm512_store_ps(s + t0, _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
      continue;
    }
    __m512i acc[16];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < 16; ++i) acc[i] = _mm512_setzero_si512();
    const std::size_t rows = n - t0 < 16 ? n - t0 : 16;
    const std::byte* chunk = k.chunk[t0 / BlockRows::kChunkRows];  // rows t0 … t0 + 15
    for (std::size_t seg = 0; seg < geo.segments; ++seg) {
      const __m512i qs = _mm512_load_si512(q.groups + seg * 16);
      if (rows == 16 && (seg + 1) * 64 <= geo.row_bytes) {
#pragma GCC unroll 16
        for (std::size_t i = 0; i < 16; ++i) {
          pf.next();
          const __m512i key = _mm512_loadu_si512(chunk + i * geo.row_bytes + seg * 64);
          acc[reduce16_slot(i)] = dot_u8s8(acc[reduce16_slot(i)], _mm512_xor_si512(key, flip), qs);
        }
      } else {  // a short group of rows or a row's last partial segment (its tail reads 0 × q8)
                // Unrolled as the full case: an acc index known only at run time would keep all 16
                // accumulators in memory, a store and reload around every vpdpbusd of both cases.
#pragma GCC unroll 16
        for (std::size_t i = 0; i < 16; ++i) {
          if (i >= rows) continue;
          pf.next();
          const __m512i key = load_segment(chunk + i * geo.row_bytes, geo.row_bytes, seg);
          acc[reduce16_slot(i)] = dot_u8s8(acc[reduce16_slot(i)], _mm512_xor_si512(key, flip), qs);
        }
      }
    }
    const __m512 dots = _mm512_cvtepi32_ps(_mm512_sub_epi32(reduce16(acc), offset));
    const __m512 sc = _mm512_mul_ps(_mm512_mul_ps(dots, sq), _mm512_loadu_ps(k_scale + t0));
    _mm512_store_ps(s + t0, mask_past(sc, n, t0));
  }
}

}  // namespace kvscope::simd
