#pragma once
// Scores of up to 16 queries at once over an unpacked int4 block (dot_int4_block.hpp), a query
// per lane: for blocks that many queries share (MQA, wide GQA, prefill tiles). Query by query
// (int4_block_scores) each row costs 2 vpdpbusd among three loads, a conversion, a
// multiply-add and a sixteenth of a 16-key reduction, per query: half of MQA int4 decode's
// samples (AMD Zen 5). Here a 32-bit piece of a key row's nibbles (4 elements) is broadcast
// from the unpacked block into one vpdpbusd for 16 queries, and each group's sum, exact in
// int32 from its bias on, is converted and scaled once per row and group. Include only from
// kernels/arch/avx512_dot.cpp.
//
// Arithmetic: the query quantization, the nibbles and the group scales are the query-by-query
// kernel's; the group sums Σ q8 (nibble − 8) are exact in both. That kernel converts and scales
// each group as four int32 pieces and adds them in a different order, so the two agree to f32
// rounding, not bit for bit.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/transpose16x16.hpp"
#include "kernels/units/dot_int4.hpp"
#include "kernels/units/dot_int4_block.hpp"

namespace kvscope::simd {

// Up to 16 packed queries (pack_int4_query) turned a query per lane.
struct Int4QueryLanes {
  // [(seg · 2 + h) · 16 + k]: lane ℓ holds 32-bit piece k of query ℓ's lo (h = 0) or hi
  // (h = 1) elements of segment seg, the piece that meets piece k of a key row's nibbles.
  const __m512i* q = nullptr;
  // [seg · 4 + L]: lane ℓ holds query ℓ's bias over group 4 seg + L (−8 Σ of its q8).
  const __m512i* bias = nullptr;
  const float* scale = nullptr;  // [16]: sq per lane; 0 in lanes without a query

  // Vectors of scratch it takes.
  static std::size_t vectors(const Int4DotGeometry& geo) { return geo.segments * 36 + 1; }
};

// queries[0, count) (count ≤ 16) into `out`; lanes past count hold a zero query.
inline Int4QueryLanes pack_int4_query_lanes(const Int4Query* queries, std::size_t count,
                                            const Int4DotGeometry& geo, __m512i* out) {
  __m512i* q = out;
  __m512i* bias = out + 32 * geo.segments;
  auto* scales = reinterpret_cast<float*>(bias + 4 * geo.segments);
  for (std::size_t i = 0; i < 16; ++i) scales[i] = i < count ? queries[i].scale : 0.0f;
  for (std::size_t s = 0; s < geo.segments; ++s) {
    for (int h = 0; h < 3; ++h) {  // lo, hi, then the lane biases
      __m512i r[16];
      for (std::size_t i = 0; i < 16; ++i) {
        r[i] = _mm512_setzero_si512();
        if (i >= count) continue;  // queries[count …] do not exist
        const Int4Query& q = queries[i];
        r[i] = (h == 0 ? q.lo : h == 1 ? q.hi : q.bias)[s];
      }
      transpose16x16_epi32(r);  // r[k]: piece (or bias lane) k of every query
      if (h < 2) {
        for (int k = 0; k < 16; ++k) q[(s * 2 + h) * 16 + k] = r[k];
      } else {
        for (int L = 0; L < 4; ++L) {
          bias[s * 4 + L] = _mm512_add_epi32(_mm512_add_epi32(r[4 * L], r[4 * L + 1]),
                                             _mm512_add_epi32(r[4 * L + 2], r[4 * L + 3]));
        }
      }
    }
  }
  return Int4QueryLanes{q, bias, scales};
}

// sᵀ[v][t][ℓ] ← lane ℓ of lane group v's score over row t = t0 + r, r < R (rows of the block
// that exist: r < rows), for QV lane groups: one broadcast of a key piece feeds QV of them.
template <std::size_t R, std::size_t QV>
[[gnu::always_inline]] inline void int4_lanes_rows(const Int4QueryLanes* ql, const Int4Block& blk,
                                                   std::size_t t0, std::size_t rows,
                                                   const Int4DotGeometry& geo, float* st) {
  const std::size_t S = geo.segments;
  __m512 score[R][QV];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t v = 0; v < QV; ++v) score[r][v] = _mm512_setzero_ps();
  }
  for (std::size_t s = 0; s < S; ++s) {
    for (std::size_t L = 0; L < 4; ++L) {
      __m512i sum[R][QV];
#pragma GCC unroll 16
      for (std::size_t r = 0; r < R; ++r) {
        for (std::size_t v = 0; v < QV; ++v) sum[r][v] = ql[v].bias[s * 4 + L];
      }
      for (std::size_t h = 0; h < 2; ++h) {
#pragma GCC unroll 4
        for (std::size_t i = 0; i < 4; ++i) {
          __m512i q[QV];
          for (std::size_t v = 0; v < QV; ++v) q[v] = ql[v].q[(s * 2 + h) * 16 + 4 * L + i];
#pragma GCC unroll 16
          for (std::size_t r = 0; r < R; ++r) {
            if (r >= rows) continue;
            const auto* nibbles =
                reinterpret_cast<const std::int32_t*>(blk.k_nibbles + ((t0 + r) * S + s) * 2 + h);
            const __m512i x = _mm512_set1_epi32(nibbles[4 * L + i]);
            for (std::size_t v = 0; v < QV; ++v) sum[r][v] = dot_u8s8(sum[r][v], x, q[v]);
          }
        }
      }
#pragma GCC unroll 16
      for (std::size_t r = 0; r < R; ++r) {
        if (r >= rows) continue;
        const auto* scales = reinterpret_cast<const float*>(blk.k_scales + (t0 + r) * S + s);
        const __m512 scale = _mm512_set1_ps(scales[4 * L]);
        for (std::size_t v = 0; v < QV; ++v) {
          score[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r][v]), scale, score[r][v]);
        }
      }
    }
  }
  for (std::size_t v = 0; v < QV; ++v) {
    const __m512 sq = _mm512_load_ps(ql[v].scale);
#pragma GCC unroll 16
    for (std::size_t r = 0; r < R; ++r) {
      if (r >= rows) continue;  // rows past the block's 64 would be the next group's
      _mm512_store_ps(st + (v * kDotBlock + t0 + r) * 16, _mm512_mul_ps(score[r][v], sq));
    }
  }
}

// s[ℓ · 64 + t] ← query ℓ's score over block row t, t < n (n ≤ the rows unpacked), for the
// queries of QV lane groups (query ℓ of group v at s + v · 16 · 64); rows from n on are left
// as they were (the caller masks them per query). st: scratch of QV × 64 × 16 floats.
template <std::size_t QV>
void int4_lanes_scores(const Int4QueryLanes* ql, const Int4Block& blk, std::size_t n,
                       const Int4DotGeometry& geo, float* st, float* s) {
  // R rows × QV groups of int32 sums and of scores: 16 (QV 1) or 24 (QV 2) of the 32 registers.
  constexpr std::size_t R = QV == 1 ? 8 : 6;
  for (std::size_t t0 = 0; t0 < n; t0 += R) {
    if (n - t0 >= R) {
      int4_lanes_rows<R, QV>(ql, blk, t0, R, geo, st);
    } else {
      int4_lanes_rows<R, QV>(ql, blk, t0, n - t0, geo, st);
    }
  }
  for (std::size_t v = 0; v < QV; ++v) {
    for (std::size_t t0 = 0; t0 < n; t0 += 16) {  // a row per lane back to a row per query
      __m512i r[16];
      for (std::size_t t = 0; t < 16; ++t) {
        r[t] = _mm512_load_si512(st + (v * kDotBlock + t0 + t) * 16);
      }
      transpose16x16_epi32(r);
      for (std::size_t l = 0; l < 16; ++l) {
        _mm512_store_si512(s + (v * 16 + l) * kDotBlock + t0, r[l]);
      }
    }
  }
}

}  // namespace kvscope::simd
