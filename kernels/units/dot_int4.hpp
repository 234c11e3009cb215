#pragma once
// Attention over an int4 cache (q4_0 blocks: an f16 scale, then 16 bytes holding elements j
// and j + 16 of the group in the low and high nibble of byte j) on AVX-512 VNNI, rows read in
// place: the fused kernels of one query (MHA decode). Include only from
// kernels/arch/avx512_dot.cpp.
//
// A row is read in segments of 4 groups (128 elements, 72 bytes): the 4 groups' 16 nibble
// bytes are loaded side by side in a vector, so 128-bit lane L holds group L, and
// the nibbles enter vpdpbusd as they are (0…15: unsigned for the scores, and valid signed
// bytes for P·V); the − 8 of the format is one bias per lane. Per block of 64 keys and query:
//   scores: q (× 1/√d) quantized to s8 per query as the int8 kernels do (scale sq), its
//     elements placed as the nibbles lie (q_lo, q_hi). Per key, the int32 lane sums
//     Σ q8 · nibble − 8 Σ q8 of each group are exact; × the group's f16 scale (one word
//     permute and vcvtph2ps) into f32 per key; 16 keys summed at once (reduce16) and × sq.
//   softmax: f32, online (softmax_block).
//   P·V: w_tg = p_t · scale_tg, quantized to u8 against the block's largest (the int8 VNNI
//     kernels' weights, one per row and group here, in two digits under an attention sink);
//     4 rows' nibbles interleaved per 32-bit lane feed one vpdpbusd per accumulator vector
//     with their 4 weights of that lane's group; − 8 Σ_t w_tg comes from one more vpdpbusd
//     with bytes of 1. Each block's int32 sums join the f32 accumulators once, × w_max / 255
//     (the low digits' × w_max / 255²).
// Accumulators are kept in the interleaved order (Int4DotGeometry::natural) during a run.
// The runner: dot_int4_keys.hpp; a block unpacked once for several queries: dot_int4_block.hpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention_decode.hpp"
#include "kernels/units/dot_key_rows.hpp"
#include "kernels/units/dot_unit_attention.hpp"

namespace kvscope::simd {

// Bytes of a segment: 4 groups.
inline constexpr std::size_t kInt4SegmentBytes = 4 * kInt4GroupBytes;

// Row geometry of an int4 cache in segments of 4 groups.
struct Int4DotGeometry {
  std::size_t d, groups, row_bytes, segments, positions;
  explicit Int4DotGeometry(std::size_t head_dim)
      : d(head_dim),
        groups(int4_groups(head_dim)),
        row_bytes(kv_row_bytes(KvDtype::int4, head_dim)),
        segments((groups + 3) / 4),
        positions(segments * 128) {}
  // The element at accumulator position c = (segment s · 8 + vector v) · 16 + lane: the
  // interleave of int4_dot_pv puts byte 4(v mod 4) + m of group 4s + L in lane 4L + m, low
  // nibbles in vectors 0–3, high ones in 4–7. ≥ d for padding.
  std::size_t natural(std::size_t c) const {
    const std::size_t s = c / 128, v = c / 16 % 8, lane = c % 16;
    return 32 * (4 * s + lane / 4) + (v >= 4 ? 16 : 0) + 4 * (v % 4) + lane % 4;
  }
};

// Word 9L of a segment (group L's scale) into words 4L … 4L + 3 (vpermw).
struct Int4ScaleWords {
  alignas(64) std::uint16_t idx[32] = {};
  constexpr Int4ScaleWords() {
    for (int w = 0; w < 16; ++w) idx[w] = static_cast<std::uint16_t>(9 * (w / 4));
  }
};
inline constexpr Int4ScaleWords kInt4ScaleWords{};

// The first 64 bytes of segment s of an int4 row (its scales at words 9L), 0 past the row.
// Full: the segment has its 4 groups (checked once per segment, not per row).
template <bool Full>
[[gnu::always_inline]] inline __m512i load_int4_head(const std::byte* row,
                                                     const Int4DotGeometry& geo, std::size_t s) {
  const std::byte* at = row + s * kInt4SegmentBytes;
  if constexpr (Full) return _mm512_loadu_si512(at);
  const std::size_t left = geo.row_bytes - s * kInt4SegmentBytes;
  return left >= 64 ? _mm512_loadu_si512(at)
                    : _mm512_maskz_loadu_epi8((__mmask64{1} << left) - 1, at);
}

// The nibble bytes of segment s of an int4 row side by side: byte 16L + j is byte j of group
// 4s + L's 16, one 16-byte load per group broadcast into its 128-bit lane (merge-masked
// broadcasts: load ports and p05, not the shuffle port). Groups past the row read 0.
template <bool Full>
[[gnu::always_inline]] inline __m512i load_int4_nibbles(const std::byte* row,
                                                        const Int4DotGeometry& geo, std::size_t s) {
  const std::byte* at = row + s * kInt4SegmentBytes + 2;
  const std::size_t groups = Full || geo.groups - 4 * s >= 4 ? 4 : geo.groups - 4 * s;
  const auto group = [&](std::size_t L) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at + L * kInt4GroupBytes));
  };
  if (groups == 4) {
    __m512i x = _mm512_broadcast_i32x4(group(0));
    x = _mm512_mask_broadcast_i32x4(x, 0x00f0, group(1));
    x = _mm512_mask_broadcast_i32x4(x, 0x0f00, group(2));
    return _mm512_mask_broadcast_i32x4(x, 0xf000, group(3));
  }
  __m512i x = _mm512_setzero_si512();
  for (std::size_t L = 0; L < groups; ++L) {
    x = _mm512_mask_broadcast_i32x4(x, static_cast<__mmask16>(0xfu << (4 * L)), group(L));
  }
  return x;
}

// The 16 group scales of a segment's lanes (lane 4L + m: group L's), as f32.
inline __m512 int4_lane_scales(__m512i raw) {
  const __m512i words = _mm512_permutexvar_epi16(_mm512_load_si512(kInt4ScaleWords.idx), raw);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(words));
}

// A query for int4 keys: per segment, the s8 elements as the low and high nibbles lie, and
// each lane's bias −8 · Σ of its 4 q8 of both (a key's int32 lane sum starts from it).
struct Int4Query {
  const __m512i* lo = nullptr;  // [segments]
  const __m512i* hi = nullptr;
  const __m512i* bias = nullptr;
  float scale = 0.0f;  // sq
};

// Packs q[0, d) (already × 1/√d) into `out` (3 · segments vectors): quantized as pack_query
// quantizes for int8 keys (round to nearest even against max|q| / 127).
inline Int4Query pack_int4_query(const float* q, const Int4DotGeometry& geo, __m512i* out) {
  // 16 elements at a time, vectors instead of a rounding call per element (perf: MQA at 2,000
  // tokens packs 32 queries per work item of 256 keys). Group g's first 16 elements land at
  // bytes 16g of `lo`, its last 16 at bytes 16g of `hi`.
  auto* lo = reinterpret_cast<std::uint8_t*>(out);
  auto* hi = lo + 64 * geo.segments;
  std::memset(out, 0, 3 * 64 * geo.segments);
  const float amax = query_absmax(q, geo.d);
  Int4Query packed{out, out + geo.segments, out + 2 * geo.segments, amax / 127.0f};
  if (amax == 0.0f) return packed;  // every score 0
  const __m512 inv = _mm512_set1_ps(127.0f / amax);
  for (std::size_t j = 0; j < geo.d; j += 16) {  // lanes past d load 0 and store 0
    const __m128i q8 = _mm512_cvtsepi32_epi8(quantize_query16(q, geo.d, j, inv));
    const std::size_t g = j / kInt4Group;
    _mm_storeu_si128(reinterpret_cast<__m128i*>((j % kInt4Group < 16 ? lo : hi) + 16 * g), q8);
  }
  const __m512i ones = _mm512_set1_epi8(1);
  for (std::size_t s = 0; s < geo.segments; ++s) {
    const __m512i sum =
        dot_u8s8(dot_u8s8(_mm512_setzero_si512(), ones, packed.lo[s]), ones, packed.hi[s]);
    out[2 * geo.segments + s] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sum, 3));
  }
  return packed;
}

// part[slot(i)] += Σ_lanes-wise scale · (q8 · nibbles − bias) of segment seg of key rows
// t0 + i, i < rows (16 unrolled).
template <bool Full, class Prefetch>
[[gnu::always_inline]] inline void int4_segment_scores(const Int4Query& q, const std::byte* k,
                                                       std::size_t rows, const Int4DotGeometry& geo,
                                                       std::size_t seg, __m512* part,
                                                       Prefetch& pf) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i q_lo = q.lo[seg], q_hi = q.hi[seg], bias = q.bias[seg];
  const auto key = [&](std::size_t i) {
    pf.next();
    const std::byte* row = k + i * geo.row_bytes;
    const __m512i nibbles = load_int4_nibbles<Full>(row, geo, seg);
    const __m512i lo = _mm512_and_si512(nibbles, low);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(nibbles, 4), low);
    const __m512i dots = dot_u8s8(dot_u8s8(bias, lo, q_lo), hi, q_hi);
    const __m512 scales = int4_lane_scales(load_int4_head<Full>(row, geo, seg));
    part[reduce16_slot(i)] =
        _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), scales, part[reduce16_slot(i)]);
  };
  if (rows == 16) {
#pragma GCC unroll 16
    for (std::size_t i = 0; i < 16; ++i) key(i);
  } else {
    // Unrolled as well: a part index known only at run time would keep all 16 partial sums
    // in memory, a store and reload around every row of both cases.
#pragma GCC unroll 16
    for (std::size_t i = 0; i < 16; ++i) {
      if (i < rows) key(i);
    }
  }
}

// s[0, 64) ← q.scale · the block's scores for rows t < n, −inf from n on: 16 rows at a time,
// segment_scores(t0, rows, seg, part) adding each row's lane sums × scales into part[slot]
// and reduce16 summing them.
template <class SegmentScores>
void int4_scores_by_16(const Int4Query& q, std::size_t n, std::size_t segments, float* s,
                       SegmentScores&& segment_scores) {
  for (std::size_t t0 = 0; t0 < kDotBlock; t0 += 16) {
    if (t0 >= n) {
      _mm512_store_ps(s + t0, _mm512_set1_ps(-std::numeric_limits<float>::infinity()));
      continue;
    }
    const std::size_t rows = n - t0 < 16 ? n - t0 : 16;
    __m512 part[16];
#pragma GCC unroll 16
    for (std::size_t i = 0; i < 16; ++i) part[i] = _mm512_setzero_ps();
    for (std::size_t seg = 0; seg < segments; ++seg) segment_scores(t0, rows, seg, part);
    const __m512 sc = _mm512_mul_ps(reduce16(part), _mm512_set1_ps(q.scale));
    _mm512_store_ps(s + t0, mask_past(sc, n, t0));
  }
}

// s[0, 64) ← sq · Σ_g scale_tg Σ_{j∈g} q8_j (nibble_tj − 8) for key rows t < n (row t at
// k.row(t)), −inf from n on. pf takes a line per row segment.
template <class Prefetch>
void int4_dot_scores(const Int4Query& q, const BlockRows& k, std::size_t n,
                     const Int4DotGeometry& geo, float* s, Prefetch& pf) {
  int4_scores_by_16(q, n, geo.segments, s,
                    [&](std::size_t t0, std::size_t rows, std::size_t seg, __m512* part) {
                      const std::byte* rows_at = k.chunk[t0 / BlockRows::kChunkRows];
                      if (4 * seg + 4 <= geo.groups) {
                        int4_segment_scores<true>(q, rows_at, rows, geo, seg, part, pf);
                      } else {
                        int4_segment_scores<false>(q, rows_at, rows, geo, seg, part, pf);
                      }
                    });
}

// The value scales of rows 4rg … 4rg + 3 (rows at `rows`, the first `live` of them read; the
// others scale 0) for segment s's groups: lane 4L + i holds row i's scale of group 4s + L.
inline __m512 int4_row_group_scales(const std::byte* rows, std::size_t live,
                                    const Int4DotGeometry& geo, std::size_t s) {
  const __m512i scale_words = _mm512_load_si512(kInt4ScaleWords.idx);
  __m512i words = _mm512_setzero_si512();
  if (live >= 4 && 4 * s + 4 <= geo.groups) {
#pragma GCC unroll 4
    for (std::size_t i = 0; i < 4; ++i) {
      const __m512i head = load_int4_head<true>(rows + i * geo.row_bytes, geo, s);
      words = _mm512_mask_permutexvar_epi16(words, __mmask32{0x1111u} << i, scale_words, head);
    }
  } else {
    for (std::size_t i = 0; i < 4 && i < live; ++i) {
      const __m512i head = load_int4_head<false>(rows + i * geo.row_bytes, geo, s);
      words = _mm512_mask_permutexvar_epi16(words, __mmask32{0x1111u} << i, scale_words, head);
    }
  }
  return _mm512_cvtph_ps(_mm512_castsi512_si256(words));
}

// One query's P·V weights over a block as vpdpbusd's operand (int4_weights): hi[s · 16 + rg],
// lane 4L + i holding row 4rg + i's u8 weight for group 4s + L, so dword L gathers the 4 rows'
// weights; lo: the low digits in the same order where the block takes two (weight_digits),
// else null. The output's sums × scale (w_max / 255; 0 when every weight is 0).
struct Int4Weights {
  const __m512i* hi = nullptr;
  const __m512i* lo = nullptr;
  float scale = 0.0f;
};

// The u8 values of 16 int32 lanes (byte 4L + i) broadcast to every 128-bit lane's dword L.
inline __m512i int4_weight_bytes(__m512i w8) {
  const __m512i per_lane = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return _mm512_permutexvar_epi32(per_lane, _mm512_castsi128_si512(_mm512_cvtusepi32_epi8(w8)));
}

// The P·V weights of one query over rows t < n: w_tg = p_t · scale_tg (p: 64 floats, 0 from n
// on; scales_of(rg, s): the scales of rows 4rg … 4rg + 3 in segment s, as
// int4_row_group_scales lays them out), y = w · 255 / w_max, in one u8 digit, or two where a
// lane's rounding would move the output by more than kOneDigitError of max|v| (DigitError, per
// lane: each group's sum over its rows is bounded where each lane's is; the attention sink of
// the int8 kernels, here per group). wf: segments · 16 vectors of scratch; wv: 2 · segments ·
// 16, the digits.
template <class ScalesOf>
Int4Weights int4_weights(const float* p, std::size_t n, std::size_t segments, ScalesOf&& scales_of,
                         __m512* wf, __m512i* wv) {
  const std::size_t row_groups = (n + 3) / 4;
  __m512 vmax = _mm512_setzero_ps();
  for (std::size_t s = 0; s < segments; ++s) {
    for (std::size_t rg = 0; rg < row_groups; ++rg) {
      const __m512 w =
          _mm512_mul_ps(_mm512_broadcast_f32x4(_mm_load_ps(p + 4 * rg)), scales_of(rg, s));
      wf[s * 16 + rg] = w;
      vmax = _mm512_max_ps(vmax, w);
    }
  }
  const float w_max = _mm512_reduce_max_ps(vmax);
  if (w_max == 0.0f) return {};
  const __m512 inv = _mm512_set1_ps(255.0f / w_max);
  DigitError digit_error;
  for (std::size_t s = 0; s < segments; ++s) {
    for (std::size_t rg = 0; rg < row_groups; ++rg) {
      const __m512 y = _mm512_mul_ps(wf[s * 16 + rg], inv);
      digit_error.add(y);
      wv[s * 16 + rg] = int4_weight_bytes(_mm512_cvtps_epi32(y));
    }
  }
  if (digit_error.two_digits() == 0) return {wv, nullptr, w_max / 255.0f};
  __m512i* lo = wv + segments * 16;
  for (std::size_t s = 0; s < segments; ++s) {
    for (std::size_t rg = 0; rg < row_groups; ++rg) {
      const WeightDigits w = weight_digits(_mm512_mul_ps(wf[s * 16 + rg], inv), true);
      wv[s * 16 + rg] = int4_weight_bytes(w.hi);
      lo[s * 16 + rg] = int4_weight_bytes(w.lo);
    }
  }
  return {wv, lo, w_max / 255.0f};
}

// int4_weights with the scales read from value rows t < n (v.row(t); a row group's 4 rows lie
// in one chunk).
inline Int4Weights int4_dot_weights(const float* p, const BlockRows& v, std::size_t n,
                                    const Int4DotGeometry& geo, __m512* wf, __m512i* wv) {
  return int4_weights(
      p, n, geo.segments,
      [&](std::size_t rg, std::size_t s) {
        return int4_row_group_scales(v.row(4 * rg), n - 4 * rg, geo, s);
      },
      wf, wv);
}

// x[0..3] ← 4 rows' 64 bytes interleaved per 32-bit lane: lane 4L + m of x[k] holds byte
// 16L + 4k + m of r[0], r[1], r[2], r[3].
inline void interleave4_epi8(const __m512i r[4], __m512i x[4]) {
  const __m512i lo01 = _mm512_unpacklo_epi8(r[0], r[1]), lo23 = _mm512_unpacklo_epi8(r[2], r[3]);
  const __m512i hi01 = _mm512_unpackhi_epi8(r[0], r[1]), hi23 = _mm512_unpackhi_epi8(r[2], r[3]);
  x[0] = _mm512_unpacklo_epi16(lo01, lo23);
  x[1] = _mm512_unpackhi_epi16(lo01, lo23);
  x[2] = _mm512_unpacklo_epi16(hi01, hi23);
  x[3] = _mm512_unpackhi_epi16(hi01, hi23);
}

// The block's int32 sums of one segment and one digit of the weights: sum[k] of the
// interleaved rows' low (k < 4) and high nibbles, w_sum of the weights (for the − 8).
struct Int4Sums {
  __m512i sum[8];
  __m512i w_sum;
  Int4Sums() {
    for (__m512i& x : sum) x = _mm512_setzero_si512();
    w_sum = _mm512_setzero_si512();
  }
  // + w × the 4 interleaved vectors x of one row group (nibbles still packed).
  [[gnu::always_inline]] void add_packed(__m512i w, const __m512i x[4]) {
    const __m512i low = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      sum[k] = dot_u8s8(sum[k], w, _mm512_and_si512(x[k], low));
      sum[4 + k] = dot_u8s8(sum[4 + k], w, _mm512_and_si512(_mm512_srli_epi16(x[k], 4), low));
    }
    w_sum = dot_u8s8(w_sum, w, _mm512_set1_epi8(1));
  }
  // + w × the 8 split vectors x of one row group (Int4Block's v_nibbles).
  [[gnu::always_inline]] void add_split(__m512i w, const __m512i* x) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) sum[k] = dot_u8s8(sum[k], w, x[k]);
    w_sum = dot_u8s8(w_sum, w, _mm512_set1_epi8(1));
  }
  // acc[0, 128) (one segment, interleaved order) += w_scale · (sum[k] − 8 · w_sum): the
  // int32 sums of weights × nibbles, less the nibbles' offset 8 times each lane's weight sum.
  void add_to(float w_scale, float* acc) const {
    const __m512i bias = _mm512_slli_epi32(w_sum, 3);
    const __m512 scale = _mm512_set1_ps(w_scale);
    for (int k = 0; k < 8; ++k) {
      float* a = acc + k * 16;
      _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(sum[k], bias)), scale,
                                         _mm512_load_ps(a)));
    }
  }
};

// acc[positions] (interleaved order) += Σ_{t<n} w_tg (nibble_tj − 8), the weights from
// int4_dot_weights (a second pass for the low digits where it gave them). pf takes a line per
// row segment.
template <bool TwoDigits, class Prefetch>
void int4_dot_pv_digits(const Int4Weights& w, const BlockRows& v, std::size_t n,
                        const Int4DotGeometry& geo, float* acc, Prefetch& pf) {
  const std::size_t row_groups = (n + 3) / 4;
  for (std::size_t s = 0; s < geo.segments; ++s) {
    const bool full = 4 * s + 4 <= geo.groups;
    Int4Sums hi, lo;
    for (std::size_t rg = 0; rg < row_groups; ++rg) {
      __m512i nib[4], x[4];
      const std::byte* rows = v.row(4 * rg);  // the group's 4 rows lie in one chunk
      if (full && 4 * rg + 4 <= n) {
#pragma GCC unroll 4
        for (std::size_t i = 0; i < 4; ++i) {
          pf.next();
          nib[i] = load_int4_nibbles<true>(rows + i * geo.row_bytes, geo, s);
        }
      } else {  // rows past n (weight 0) are not read
        for (std::size_t i = 0; i < 4; ++i) {
          nib[i] = 4 * rg + i < n ? load_int4_nibbles<false>(rows + i * geo.row_bytes, geo, s)
                                  : _mm512_setzero_si512();
        }
      }
      // Interleaved as bytes, then split: the low and the high nibbles come out interleaved
      // alike, for half the shuffles.
      interleave4_epi8(nib, x);
      hi.add_packed(w.hi[s * 16 + rg], x);
      if constexpr (TwoDigits) lo.add_packed(w.lo[s * 16 + rg], x);
    }
    hi.add_to(w.scale, acc + s * 128);
    if constexpr (TwoDigits) lo.add_to(w.scale / 255.0f, acc + s * 128);
  }
}
template <class Prefetch>
void int4_dot_pv(const Int4Weights& w, const BlockRows& v, std::size_t n,
                 const Int4DotGeometry& geo, float* acc, Prefetch& pf) {
  if (w.lo) {
    int4_dot_pv_digits<true>(w, v, n, geo, acc, pf);
  } else {
    int4_dot_pv_digits<false>(w, v, n, geo, acc, pf);
  }
}

}  // namespace kvscope::simd
