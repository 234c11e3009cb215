#pragma once
// The dot units for groups of 4, 8 or 12 query heads per kv head (GQA decode): queries in
// quads, one per 128-bit lane, keys read in place. Include only from
// kernels/arch/avx512_dot.cpp.
//
// Below 16 queries the lanes kernel (dot_heads_in_lanes.hpp) idles most lanes, and the tile
// kernel (dot_unit_attention.hpp) transposes every key block and runs each query's softmax
// with horizontal sums: on GQA-8 int8 decode (Zen 5) transposes, interleaves and per-query
// softmax took 55% of the time. Here, per block of 64 keys and quad of queries:
//   scores  16 bytes of a key row (16 int8 or 8 bf16 elements) are broadcast to the four
//           128-bit lanes, lane L holding query L's same 16 bytes: one vpdpbusd / vdpbf16ps
//           per 16 bytes of a row and quad. Lane L's four 32-bit sums then add up to query
//           L's dot product; unpacks add four keys' sums at once, so that one vector holds
//           [query][key] for 4 × 4 scores (int8: − offset, × sq · k_scale, as in the tile
//           kernel);
//   softmax lane-wise: the quad's maxima and sums reduce within 128-bit lanes;
//   weights the same vector packs into u8 (int8) or bf16 pairs whose 32-bit lanes are exactly
//           row groups of one query (int8: rows 4i … 4i + 3 of query L in lane L), stored as
//           w[row group][query] for the tile kernel's p·V (dot_pv) over the block's values,
//           interleaved once for every quad (dot_tiles.hpp).
// The arithmetic is the tile kernel's: the same rounding of queries and weights (one or two
// u8 digits, weight_digits; bf16 round to nearest even), the same integer dot products; only
// the order of f32 sums and the weights' exp (kExp2ForWeights, as the lanes kernel) differ.
// Against the tile kernel (Zen 5, 2 threads, cold, binaries alternated): GQA-8 int8 0.84x the
// time at 2,000 tokens, 0.79x at 32,768; GQA-4 int8 0.85x / 0.93x, bf16 0.81x / 0.89x. GQA-8
// bf16 stays on fp32-fma (compute_unit.hpp): on quads it measured level with it cold.
// The values' interleave and each block's prefetches run inside the score loops.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/units/dot_unit_attention.hpp"

namespace kvscope::simd {

template <class A, KvDtype D>
class DotQueryQuads {
  using Geo = DotGeometry<D>;
  using Acc = typename DotAcc<D>::type;
  static constexpr std::size_t kQuad = 4;
  static constexpr std::size_t kMaxQuads = 3;             // from 16 queries the lanes kernel runs
  static constexpr std::size_t kVectors = kDotBlock / 4;  // score vectors per quad and block
  static constexpr std::size_t kRowGroups = Geo::kRowGroups;
  // Rows of d_head 128 get the row length fixed, as the lanes kernel's scores() do.
  static constexpr std::size_t kDHead128RowBytes = 128 * kv_element_bytes(D);

 public:
  // Decode: every query sees the whole range, 4, 8 or 12 of them, rows of whole 16-byte
  // pieces (head_dim a multiple of 16 for int8, of 8 for bf16) of a contiguous cache.
  static bool suits(std::size_t count, std::size_t row_bytes, bool all_see, bool paged) {
    return all_see && !paged && count % kQuad == 0 && count / kQuad <= kMaxQuads &&
           row_bytes % 16 == 0;
  }

  explicit DotQueryQuads(std::size_t head_dim)
      : geo_(head_dim),
        lanes_(geo_.acc_vectors * 16),
        pieces_(geo_.row_bytes / 16),
        q_groups_(kQuad * geo_.segments * 16),
        quad_q_(kMaxQuads * pieces_ * 16),
        vt_(kRowGroups * lanes_),
        weights_(2 * kMaxQuads * kRowGroups * kQuad),
        acc_(kMaxQuads * kQuad * lanes_),
        s_(kMaxQuads * kDotBlock * kQuad),
        pads_(2 * kDotBlock) {}

  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, const NextBlock& after_range) {
    const std::size_t quads = count / kQuad;
    for (std::size_t qd = 0; qd < quads; ++qd) begin(st + qd * kQuad, qd);
    __m512 m[kMaxQuads], l[kMaxQuads];
    for (std::size_t qd = 0; qd < quads; ++qd) {
      m[qd] = quad_vector(st + qd * kQuad, [](const QueryState& s) { return s.m; });
      l[qd] = quad_vector(st + qd * kQuad, [](const QueryState& s) { return s.l; });
    }
    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.block_rows(b0, t1, kDotBlock);
      const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kDotBlock, after_range);
      const float *k_scale = nullptr, *v_scale = nullptr;
      if constexpr (D == KvDtype::int8) {
        block_scales<A>(kv, kvh, b0, nb, kDotBlock, pads_.get(), pads_.get() + kDotBlock, k_scale,
                        v_scale);
      }
      const std::byte* k = kv.k_row(kvh, b0);
      const std::byte* v = kv.v_row(kvh, b0);
      // The block's values are interleaved a segment per step of the score loops, whose dot
      // instructions leave room for the loads, shuffles and stores (as a phase of its own,
      // the interleave took 32% of GQA-8 bf16 decode; Zen 5).
      ValueInterleaver<D> values(v, nb, nb, geo_, vt_.get());
      with_shared_block_prefetchers(
          next.k, next.rows * geo_.row_bytes, next.v, next.rows * geo_.row_bytes,
          [&](auto& k_next, auto& v_next) {
            for (std::size_t qd = 0; qd < quads; ++qd) {
              if (geo_.row_bytes == kDHead128RowBytes) {
                scores<kDHead128RowBytes>(k, nb, qd, k_scale, k_next, v_next, qd == 0, values);
              } else {
                scores(k, nb, qd, k_scale, k_next, v_next, qd == 0, values);
              }
            }
            k_next.rest();
            v_next.rest();
          });
      // Memory is idle during the softmax and p·V below: the keys of the block after next
      // into L2.
      if (b0 + nb < t1) next.request_following_keys(kv, t1, kDotBlock);
      values.rest();
      const std::size_t n_groups = (nb + Geo::kValueRows - 1) / Geo::kValueRows;
      for (std::size_t qd = 0; qd < quads; ++qd) {
        float* acc[kQuad];
        for (std::size_t i = 0; i < kQuad; ++i) acc[i] = acc_.get() + (qd * kQuad + i) * lanes_;
        std::int32_t* w = weights_.get() + qd * kRowGroups * kQuad;
        std::int32_t* w_lo = w + kMaxQuads * kRowGroups * kQuad;
        alignas(64) float w_scale[kQuad];
        const bool two = softmax_pack(qd, nb, v_scale, m[qd], l[qd], acc, w, w_lo, w_scale);
        const std::int32_t* w_rows[kQuad] = {w, w + 1, w + 2, w + 3};
        dot_pv_all<D, 2, kQuad>(w_rows, w_scale, acc, vt_.get(), geo_.acc_vectors, n_groups);
        dot_pv_all<D, 2, kQuad>(w_rows + 2, w_scale + 2, acc + 2, vt_.get(), geo_.acc_vectors,
                                n_groups);
        if (two) {  // int8 weights' low digits, in units of 1/255
          const std::int32_t* lo_rows[kQuad] = {w_lo, w_lo + 1, w_lo + 2, w_lo + 3};
          for (float& x : w_scale) x /= 255.0f;
          dot_pv_all<D, 2, kQuad>(lo_rows, w_scale, acc, vt_.get(), geo_.acc_vectors, n_groups);
          dot_pv_all<D, 2, kQuad>(lo_rows + 2, w_scale + 2, acc + 2, vt_.get(), geo_.acc_vectors,
                                  n_groups);
        }
      }
    }
    for (std::size_t qd = 0; qd < quads; ++qd) {
      alignas(64) float ms[16], ls[16];
      _mm512_store_ps(ms, m[qd]);
      _mm512_store_ps(ls, l[qd]);
      for (std::size_t i = 0; i < kQuad; ++i) {
        st[qd * kQuad + i].m = ms[4 * i];
        st[qd * kQuad + i].l = ls[4 * i];
      }
      end(st + qd * kQuad, qd);
    }
  }

 private:
  // Lanes 4i … 4i + 3 ← field(quad's query i).
  template <class Field>
  static __m512 quad_vector(const QueryState* st, Field field) {
    return _mm512_setr_ps(field(st[0]), field(st[0]), field(st[0]), field(st[0]), field(st[1]),
                          field(st[1]), field(st[1]), field(st[1]), field(st[2]), field(st[2]),
                          field(st[2]), field(st[2]), field(st[3]), field(st[3]), field(st[3]),
                          field(st[3]));
  }

  // Quad qd's queries into the unit's format (piece c of query i in 128-bit lane i of
  // quad_q_[qd][c]), their accumulators into tile order.
  void begin(const QueryState* st, std::size_t qd) {
    auto* quad = reinterpret_cast<std::uint8_t*>(quad_q_.get() + qd * pieces_ * 16);
    alignas(64) float sq[16];
    alignas(64) std::int32_t offset[16];
    for (std::size_t i = 0; i < kQuad; ++i) {
      DotQuery q;
      q.groups = q_groups_.get() + i * geo_.segments * 16;
      pack_query<D>(st[i].q, geo_, q);
      const auto* bytes = reinterpret_cast<const std::uint8_t*>(q.groups);
      for (std::size_t c = 0; c < pieces_; ++c)
        std::memcpy(quad + c * 64 + i * 16, bytes + c * 16, 16);
      for (std::size_t j = 0; j < 4; ++j) {
        sq[4 * i + j] = q.scale;
        offset[4 * i + j] = q.offset;
      }
      geo_.to_tile_order(st[i].acc, acc_.get() + (qd * kQuad + i) * lanes_);
    }
    sq_[qd] = _mm512_load_ps(sq);
    offset_[qd] = _mm512_load_si512(offset);
  }

  // Quad qd's accumulators back to natural order.
  void end(QueryState* st, std::size_t qd) const {
    for (std::size_t i = 0; i < kQuad; ++i) {
      geo_.to_natural_order(acc_.get() + (qd * kQuad + i) * lanes_, st[i].acc);
    }
  }

  static __m512i bits(__m512i x) { return x; }
  static __m512i bits(__m512 x) { return _mm512_castps_si512(x); }
  static Acc add(Acc x, Acc y) {
    if constexpr (D == KvDtype::int8) {
      return _mm512_add_epi32(x, y);
    } else {
      return _mm512_add_ps(x, y);
    }
  }
  static Acc from_bits(__m512i x) {
    if constexpr (D == KvDtype::int8) {
      return x;
    } else {
      return _mm512_castsi512_ps(x);
    }
  }
  // Lane 4L + j ← Σ of 128-bit lane L of a[j], for j < 4: two rounds of unpacks and adds.
  static Acc sum4(const Acc a[4]) {
    const auto pair = [](Acc x, Acc y) {
      return add(from_bits(_mm512_unpacklo_epi32(bits(x), bits(y))),
                 from_bits(_mm512_unpackhi_epi32(bits(x), bits(y))));
    };
    const Acc s01 = pair(a[0], a[1]), s23 = pair(a[2], a[3]);
    return add(from_bits(_mm512_unpacklo_epi64(bits(s01), bits(s23))),
               from_bits(_mm512_unpackhi_epi64(bits(s01), bits(s23))));
  }
  // Keys [t, t + 4) of a block of nb: lane 4L + j where t + j < nb (none from t = nb on).
  static __mmask16 keys_below(std::size_t nb, std::size_t t) {
    const unsigned four = nb >= t + 4 ? 0xfu : nb > t ? (1u << (nb - t)) - 1 : 0u;
    return static_cast<__mmask16>(four * 0x1111u);
  }

  // s[qd][i] (vectors i < ⌈nb / 4⌉ of [query][4 keys]) ← the scores of quad qd over the
  // block's nb rows at k; lanes of keys past nb repeat row nb − 1's score (no larger than the
  // block's max, and the softmax masks their weights). With `ahead` (the first quad), k_next and
  // v_next take a line per line read; `values` a segment per 16 bytes read of 8 rows. All three are
  // copied into locals for the loop: through their references every step stored their state.
  template <std::size_t kRowBytes = 0, class Prefetch>
  void scores(const std::byte* k, std::size_t nb, std::size_t qd, const float* k_scale,
              Prefetch& shared_k_next, Prefetch& shared_v_next, bool ahead,
              ValueInterleaver<D>& shared_values) {
    constexpr std::size_t R = 8;  // keys at once: 8 accumulators in flight
    ValueInterleaver<D> values = shared_values;
    Prefetch k_next = shared_k_next, v_next = shared_v_next;
    const std::size_t row_bytes = kRowBytes ? kRowBytes : geo_.row_bytes;
    const std::size_t pieces = kRowBytes ? kRowBytes / 16 : pieces_;
    const std::int32_t* q = quad_q_.get() + qd * pieces_ * 16;
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(D == KvDtype::int8 ? 0x80 : 0));
    float* s = s_.get() + qd * kDotBlock * kQuad;
    // Keys [t, t + R): whole (all R rows in the block) or the block's last, short group, whose
    // missing rows repeat row nb − 1.
    const auto group = [&]<bool kWhole>(std::size_t t) {
      const std::byte* base = k + t * row_bytes;
      const std::size_t last = nb - 1 - t;
      Acc acc[R];
      for (std::size_t r = 0; r < R; ++r) acc[r] = dot_acc_zero<D>();
      const auto piece = [&](std::size_t c) {
        if (ahead) {  // R rows × 16 bytes read
          k_next.next(), k_next.next();
          v_next.next(), v_next.next();
        }
        values.next();
        const __m512i qc = _mm512_load_si512(q + 16 * c);
#pragma GCC unroll 8
        for (std::size_t r = 0; r < R; ++r) {
          const std::size_t row = kWhole || r <= last ? r : last;
          __m512i x = _mm512_broadcast_i32x4(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + row * row_bytes + 16 * c)));
          if constexpr (D == KvDtype::int8) x = _mm512_xor_si512(x, bias);
          acc[r] = dot_unit<D>(acc[r], x, qc);
        }
      };
      if constexpr (kWhole && kRowBytes != 0) {
        // Unrolled whole: rolled, the accumulators changed registers from one step to the
        // next, a move beside every other dot instruction (GQA-4 int8 decode 0.95x the time
        // unrolled, bf16 0.98x; Zen 5).
#pragma GCC unroll 16
        for (std::size_t c = 0; c < kRowBytes / 16; ++c) piece(c);
      } else {
        for (std::size_t c = 0; c < pieces; ++c) piece(c);
      }
      for (std::size_t h = 0; h < R; h += 4) {
        if (!kWhole && t + h >= nb) break;
        const Acc sum = sum4(acc + h);
        __m512 sc;
        if constexpr (D == KvDtype::int8) {
          sc = _mm512_cvtepi32_ps(_mm512_sub_epi32(sum, offset_[qd]));
          sc = _mm512_mul_ps(_mm512_mul_ps(sc, sq_[qd]),
                             _mm512_broadcast_f32x4(_mm_loadu_ps(k_scale + t + h)));
        } else {
          sc = sum;
        }
        _mm512_store_ps(s + (t + h) * kQuad, sc);
      }
    };
    std::size_t t = 0;
    for (; t + R <= nb; t += R) group.template operator()<true>(t);
    if (t < nb) group.template operator()<false>(t);
    shared_values = values;
    shared_k_next = k_next, shared_v_next = v_next;
  }

  // Max (or sum) within each 128-bit lane, in all four of its 32-bit lanes.
  static __m512 lane_max(__m512 x) {
    x = _mm512_max_ps(x, _mm512_permute_ps(x, 0x4e));
    return _mm512_max_ps(x, _mm512_permute_ps(x, 0xb1));
  }
  static __m512 lane_sum(__m512 x) {
    x = _mm512_add_ps(x, _mm512_permute_ps(x, 0x4e));
    return _mm512_add_ps(x, _mm512_permute_ps(x, 0xb1));
  }

  // Online softmax of quad qd over the block's scores (as softmax_pack in
  // dot_unit_attention.hpp, four queries per vector), its accumulators rescaled where the max
  // grew, and the weights packed as w[row group · 4 + query] (int8: high digits, low ones in
  // w_lo when some query of the quad needs two: returns true). w_scale[i]: the factor back from
  // the unit's sums for query i.
  bool softmax_pack(std::size_t qd, std::size_t nb, const float* v_scale, __m512& m, __m512& l,
                    float* const* acc, std::int32_t* w, std::int32_t* w_lo, float* w_scale) {
    const float* s = s_.get() + qd * kDotBlock * kQuad;
    // Every loop over p runs all kVectors, unrolled, lanes of keys past nb masked (their
    // weights 0): with a bound known only at run time GCC kept p in memory, a store and a load
    // per vector per loop (9% of the quads' samples on stack moves, GQA-8 int8 decode). GQA-8
    // int8 decode 0.98-0.99x the time warm, level cold (Zen 5, 2,000 and 32,768 tokens).
    __m512 maxima[4] = {m, m, m, m};
#pragma GCC unroll 16
    for (std::size_t i = 0; i < kVectors; ++i) {
      maxima[i % 4] = _mm512_mask_max_ps(maxima[i % 4], keys_below(nb, 4 * i), maxima[i % 4],
                                         _mm512_load_ps(s + 16 * i));
    }
    const __m512 m_new = lane_max(
        _mm512_max_ps(_mm512_max_ps(maxima[0], maxima[1]), _mm512_max_ps(maxima[2], maxima[3])));
    // Every query has seen a key (nb ≥ 1, all see the block): m_new is finite.
    const __m512 correction = exp_nonpositive(_mm512_sub_ps(m, m_new), 0xffff);
    const __mmask16 grew = _mm512_cmp_ps_mask(m_new, m, _CMP_GT_OQ);
    m = m_new;
    if (grew != 0) {
      alignas(64) float c[16];
      _mm512_store_ps(c, correction);
      for (std::size_t i = 0; i < kQuad; ++i) {
        if (((grew >> (4 * i)) & 1) == 0) continue;
        const __m512 ci = _mm512_set1_ps(c[4 * i]);
        for (std::size_t j = 0; j < lanes_; j += 16) {
          _mm512_store_ps(acc[i] + j, _mm512_mul_ps(_mm512_load_ps(acc[i] + j), ci));
        }
      }
    }
    __m512 p[kVectors];
    __m512 sum = _mm512_setzero_ps();
    const __m512 m_log2e = times_log2e(m_new);
#pragma GCC unroll 16
    for (std::size_t i = 0; i < kVectors; ++i) {
      const __mmask16 keys = keys_below(nb, 4 * i);
      p[i] = exp_of_difference<kExp2ForWeights>(_mm512_maskz_load_ps(keys, s + 16 * i), m_log2e,
                                                keys);
      sum = _mm512_add_ps(sum, p[i]);
    }
    l = _mm512_fmadd_ps(l, correction, lane_sum(sum));
    if constexpr (D == KvDtype::int8) {
      __m512 w_max = _mm512_setzero_ps();
#pragma GCC unroll 16
      for (std::size_t i = 0; i < kVectors; ++i) {  // v_scale: zeros past nb (block_scales)
        p[i] = _mm512_mul_ps(p[i], _mm512_broadcast_f32x4(_mm_loadu_ps(v_scale + 4 * i)));
        w_max = _mm512_max_ps(w_max, p[i]);
      }
      w_max = lane_max(w_max);
      const __mmask16 some = _mm512_cmp_ps_mask(w_max, _mm512_setzero_ps(), _CMP_GT_OQ);
      const __m512 inv = _mm512_maskz_div_ps(some, _mm512_set1_ps(255.0f), w_max);
      alignas(64) float scale[16];
      _mm512_store_ps(scale, _mm512_mul_ps(w_max, _mm512_set1_ps(1.0f / 255.0f)));
      for (std::size_t i = 0; i < kQuad; ++i) w_scale[i] = scale[4 * i];
      DigitError digit_error;
#pragma GCC unroll 16
      for (std::size_t i = 0; i < kVectors; ++i) {
        p[i] = _mm512_mul_ps(p[i], inv);
        digit_error.add(p[i]);
      }
      // A query's rows lie in its 128-bit lane: its sums decide; two for the whole quad.
      const bool two =
          _mm512_cmp_ps_mask(lane_sum(digit_error.excess), _mm512_setzero_ps(), _CMP_GT_OQ) != 0;
      static_assert(kRowGroups == kVectors);
#pragma GCC unroll 16
      for (std::size_t i = 0; i < kRowGroups; ++i) {
        const WeightDigits d = weight_digits(p[i], two);
        _mm_store_si128(reinterpret_cast<__m128i*>(w + 4 * i), _mm512_cvtusepi32_epi8(d.hi));
        if (two) {
          _mm_store_si128(reinterpret_cast<__m128i*>(w_lo + 4 * i), _mm512_cvtusepi32_epi8(d.lo));
        }
      }
      return two;
    } else {
      // Two vectors' bf16 pairs (row groups 2i … 2i + 3, each query's two per vector side by
      // side) reordered to [row group][query].
      const __m512i order = _mm512_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
#pragma GCC unroll 8
      for (std::size_t i = 0; i < kVectors; i += 2) {
        const __m512 p0 = p[i], p1 = p[i + 1];
        const __m512i pairs =
            _mm512_inserti64x4(_mm512_castsi256_si512((__m256i)_mm512_cvtneps_pbh(p0)),
                               (__m256i)_mm512_cvtneps_pbh(p1), 1);
        _mm512_store_si512(w + 4 * 2 * i, _mm512_permutexvar_epi32(order, pairs));
      }
      for (std::size_t i = 0; i < kQuad; ++i) w_scale[i] = 1.0f;
      return false;
    }
  }

  Geo geo_;
  std::size_t lanes_;   // accumulator lanes per query (tile order)
  std::size_t pieces_;  // 16-byte pieces per row
  // quad_q_: 64 bytes per piece and quad (16 int32 of 4 queries' bytes).
  Scratch<A, std::int32_t> q_groups_, quad_q_;
  Scratch<A, std::int32_t> vt_, weights_;
  Scratch<A> acc_, s_, pads_;
  __m512 sq_[kMaxQuads];
  __m512i offset_[kMaxQuads];
};

}  // namespace kvscope::simd
