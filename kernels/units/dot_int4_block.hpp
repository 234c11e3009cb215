#pragma once
// One block of int4 rows unpacked once for the 2 or more queries that read it (GQA, MQA,
// prefill tiles; VNNI). The fused kernels of dot_int4.hpp unpack each row for each query: for
// 4 queries, 4 times the loads, masks, shifts, scale conversions and interleaves. Here the
// block's key rows are split into their low and high nibble vectors with their lane scales,
// and its value rows interleaved 4 at a time with their scales, once; each query then runs
// only its dot products, softmax and weights. Same arithmetic as the fused kernels, bit for
// bit. Include only from kernels/arch/avx512_dot.cpp.
#include <immintrin.h>

#include <cstddef>
#include <limits>

#include "kernels/units/dot_int4.hpp"

namespace kvscope::simd {

// A block's rows [0, n) unpacked (S = segments; rows past n read as 0, scale 0).
struct Int4Block {
  __m512i* k_nibbles = nullptr;  // [(t · S + s) · 2 + h]: key row t's low (h = 0) or high nibbles
  __m512* k_scales = nullptr;    // [t · S + s]: lane 4L + m, group 4s + L's scale
  __m512i* v_nibbles = nullptr;  // [(rg · S + s) · 8 + k]: rows 4rg … 4rg + 3 interleaved,
                                 // k < 4 low nibbles, k ≥ 4 high (int4_dot_pv's order)
  __m512* v_scales = nullptr;    // [rg · S + s]: int4_row_group_scales of rows 4rg …

  // Vectors of scratch a block of kDotBlock rows needs.
  static std::size_t vectors(const Int4DotGeometry& geo) {
    return geo.segments * (3 * kDotBlock + 9 * (kDotBlock / 4));
  }
  Int4Block(__m512i* scratch, const Int4DotGeometry& geo)
      : k_nibbles(scratch),
        k_scales(reinterpret_cast<__m512*>(scratch + 2 * kDotBlock * geo.segments)),
        v_nibbles(scratch + 3 * kDotBlock * geo.segments),
        v_scales(reinterpret_cast<__m512*>(v_nibbles + 8 * (kDotBlock / 4) * geo.segments)) {}
};

// Unpacks key and value rows [0, n) (k.row(t), v.row(t)) into blk; pk and pv take a line per
// row segment (the next block's rows).
template <class KeyPrefetch, class ValuePrefetch>
void int4_unpack_block(const BlockRows& k, const BlockRows& v, std::size_t n,
                       const Int4DotGeometry& geo, Int4Block& blk, KeyPrefetch& pk,
                       ValuePrefetch& pv) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const std::size_t S = geo.segments;
  for (std::size_t s = 0; s < S; ++s) {
    const bool full = 4 * s + 4 <= geo.groups;
    for (std::size_t t = 0; t < n; ++t) {
      pk.next();
      const std::byte* row = k.row(t);
      const __m512i nibbles =
          full ? load_int4_nibbles<true>(row, geo, s) : load_int4_nibbles<false>(row, geo, s);
      const __m512i head =
          full ? load_int4_head<true>(row, geo, s) : load_int4_head<false>(row, geo, s);
      blk.k_nibbles[(t * S + s) * 2] = _mm512_and_si512(nibbles, low);
      blk.k_nibbles[(t * S + s) * 2 + 1] = _mm512_and_si512(_mm512_srli_epi16(nibbles, 4), low);
      blk.k_scales[t * S + s] = int4_lane_scales(head);
    }
    for (std::size_t rg = 0; 4 * rg < n; ++rg) {
      __m512i nib[4], x[4];
      const std::byte* rows = v.row(4 * rg);  // the group's 4 rows lie in one chunk
      for (std::size_t i = 0; i < 4; ++i) {
        nib[i] = _mm512_setzero_si512();
        if (4 * rg + i < n) {
          pv.next();
          const std::byte* row = rows + i * geo.row_bytes;
          nib[i] =
              full ? load_int4_nibbles<true>(row, geo, s) : load_int4_nibbles<false>(row, geo, s);
        }
      }
      interleave4_epi8(nib, x);
      __m512i* out = blk.v_nibbles + (rg * S + s) * 8;
      for (int j = 0; j < 4; ++j) {
        out[j] = _mm512_and_si512(x[j], low);
        out[4 + j] = _mm512_and_si512(_mm512_srli_epi16(x[j], 4), low);
      }
      blk.v_scales[rg * S + s] = int4_row_group_scales(rows, n - 4 * rg, geo, s);
    }
  }
}

// s[0, 64) ← one query's scores over the block's first n rows (n ≤ the rows unpacked), −inf
// from n on:
// int4_dot_scores on the unpacked rows.
inline void int4_block_scores(const Int4Query& q, const Int4Block& blk, std::size_t n,
                              const Int4DotGeometry& geo, float* s) {
  const std::size_t S = geo.segments;
  int4_scores_by_16(
      q, n, S, s, [&](std::size_t t0, std::size_t rows, std::size_t seg, __m512* part) {
        const __m512i q_lo = q.lo[seg], q_hi = q.hi[seg], bias = q.bias[seg];
        const auto key = [&](std::size_t i) {
          const std::size_t at = (t0 + i) * S + seg;
          const __m512i dots = dot_u8s8(dot_u8s8(bias, blk.k_nibbles[2 * at], q_lo),
                                        blk.k_nibbles[2 * at + 1], q_hi);
          part[reduce16_slot(i)] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), blk.k_scales[at], part[reduce16_slot(i)]);
        };
        if (rows == 16) {
#pragma GCC unroll 16
          for (std::size_t i = 0; i < 16; ++i) key(i);
        } else {  // unrolled too: part[] stays in registers (int4_segment_scores)
#pragma GCC unroll 16
          for (std::size_t i = 0; i < 16; ++i) {
            if (i < rows) key(i);
          }
        }
      });
}

// int4_weights with the block's unpacked scales, over its first n rows.
inline Int4Weights int4_block_weights(const float* p, const Int4Block& blk, std::size_t n,
                                      const Int4DotGeometry& geo, __m512* wf, __m512i* wv) {
  const std::size_t S = geo.segments;
  return int4_weights(
      p, n, S, [&](std::size_t rg, std::size_t s) { return blk.v_scales[rg * S + s]; }, wf, wv);
}

// acc += Σ_t w_tg (nibble_tj − 8) over the block's first n rows: int4_dot_pv on the
// interleaved rows (rows from n on carry weight 0).
template <bool TwoDigits>
void int4_block_pv_digits(const Int4Weights& w, const Int4Block& blk, std::size_t n,
                          const Int4DotGeometry& geo, float* acc) {
  const std::size_t row_groups = (n + 3) / 4, S = geo.segments;
  for (std::size_t s = 0; s < S; ++s) {
    Int4Sums hi, lo;
    for (std::size_t rg = 0; rg < row_groups; ++rg) {
      const __m512i* x = blk.v_nibbles + (rg * S + s) * 8;
      hi.add_split(w.hi[s * 16 + rg], x);
      if constexpr (TwoDigits) lo.add_split(w.lo[s * 16 + rg], x);
    }
    hi.add_to(w.scale, acc + s * 128);
    if constexpr (TwoDigits) lo.add_to(w.scale / 255.0f, acc + s * 128);
  }
}
inline void int4_block_pv(const Int4Weights& w, const Int4Block& blk, std::size_t n,
                          const Int4DotGeometry& geo, float* acc) {
  if (w.lo) {
    int4_block_pv_digits<true>(w, blk, n, geo, acc);
  } else {
    int4_block_pv_digits<false>(w, blk, n, geo, acc);
  }
}

}  // namespace kvscope::simd
