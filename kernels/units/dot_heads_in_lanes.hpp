#pragma once
// The dot units with the queries in the lanes (MQA, GQA with 16 or more query heads per kv
// head, prefill tiles): the layout of kernels/attention_heads_in_lanes.hpp on AVX-512 VNNI
// (int8 caches) and AVX512-BF16 (bf16). Include only from kernels/arch/avx512_dot.cpp.
//
// The tile kernel (dot_unit_attention.hpp) transposes every 64-key block and reduces each
// query's softmax with horizontal sums; measured on int8 MQA decode, transposes, per-query
// softmax and packing took 45% of the time. Here, per block:
//   scores  sᵀ[t][lane] = Σ_g dot(k_t[g], qᵀ[g][lane]): a 32-bit group of the key row (4 int8
//           + 128 each, or 2 bf16) is broadcast straight from the cache (no transpose) and
//           feeds one vpdpbusd / vdpbf16ps per 16 queries; int8 from − offset[lane], then ×
//           sq[lane] · k_scale[t];
//   softmax lane-wise, no horizontal sums;
//   P·V     each lane's weights (int8: p · v_scale quantized to u8 against the lane's largest,
//           in one digit or two, weight_digits;
//           bf16: p rounded), packed 4 (2) rows to a lane; a row group of one value column
//           (ValueInterleaver, a segment per step of the score loops) is broadcast into one
//           dot per 16 queries, and each column's sum joins the f32 accumulator once per block.
// The arithmetic is the tile kernel's (same rounding of queries and weights, same products),
// but for the order of the f32 sums and the weights' exp: a degree-3 polynomial
// (kExp2ForWeights, 7.5e-5 relative) where the tile kernel's has degree 6, since the weights
// are then rounded to bf16 or 8 bits (MQA decode 0.97-0.99x the time, AMD Zen 4).
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>

#include "kernels/attention_heads_in_lanes.hpp"
#include "kernels/units/dot_query_quads.hpp"
#include "kernels/units/dot_unit_attention.hpp"

namespace kvscope::simd {

template <class A, KvDtype D>
class DotHeadsInLanes {
  static constexpr std::size_t W = 16;
  // Queries per pass: up to four vectors. Prefill's tasks of 64 queries run as one pass of
  // 4, not two of 2: half the broadcasts (and int8 bias xors) per dot, and the block's keys
  // and values read once (2-4% faster prefill, int8 and bf16 on AMD Zen 4).
  static constexpr std::size_t kLanes = 4 * W;
  // Rows or columns per micro-tile of QV query vectors: 24 accumulators.
  template <int QV>
  static constexpr std::size_t kTile = QV == 4 ? 6 : 12;
  using Geo = DotGeometry<D>;
  using Acc = typename DotAcc<D>::type;
  // Keys per block: the weighted sums of a block's value rows join the f32 accumulators once
  // per block (a convert, load, multiply-add and store per accumulator), and its softmax sets
  // up once; over 64 keys that was a quarter of int8's p·V (16 row groups of 4). In-process
  // A/B on AMD Zen 4, against 64: int8 256 keys 0.86-0.90x the prefill time (MHA, GQA-8) and
  // 0.92x MQA decode at 32,768 tokens; bf16 128 keys 0.93-0.95x and 0.97x (256: no further).
  static constexpr std::size_t kBlock = (D == KvDtype::int8 ? 4 : 2) * kDotBlock;
  // Rows of d_head 128 get scores() with the row length fixed, as HeadsInLanes does (MQA
  // decode, bf16 0.95-0.98x the time, int8 0.99x; AMD Zen 4).
  static constexpr std::size_t kDHead128RowBytes = 128 * kv_element_bytes(D);

 public:
  static bool suits(std::size_t count, std::size_t keys, bool all_see) {
    return lanes_suit(count, W, keys, all_see);
  }

  explicit DotHeadsInLanes(std::size_t head_dim)
      : geo_(head_dim),
        positions_(geo_.acc_vectors * 16),
        q_groups_(W * geo_.segments * 16),
        qt_(geo_.groups * kLanes),
        wt_(kBlock / Geo::kValueRows * kLanes),
        wt_lo_(D == KvDtype::int8 ? kBlock / Geo::kValueRows * kLanes : 1),
        vt_(kBlock / Geo::kValueRows * positions_),
        ot_(positions_ * kLanes),
        s_(kBlock * kLanes),
        pads_(2 * kBlock),
        row_max_(kLanes),
        place_(positions_) {
    for (std::size_t c = 0; c < positions_; ++c) {
      place_.get()[geo_.natural(c / 16, c % 16)] = static_cast<std::uint32_t>(c);
    }
  }

  // after_range: the rows read after the range, requested during its last block.
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, const NextBlock& after_range = {}) {
    lane_passes<W, 4>(count, [&]<int QV>(std::size_t first, std::size_t lanes) {
      run_group<QV>(kv, kvh, t0, t1, st + first, lanes,
                    first + lanes == count ? own_block(kv, after_range) : NextBlock{});
    });
  }

 private:
  static constexpr float kInf = std::numeric_limits<float>::infinity();

  template <int QV>
  void run_group(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
                 std::size_t lanes, const NextBlock& after_range) {
    constexpr std::size_t L = QV * W;
    float* ot = ot_.get();
    alignas(64) float sq[L], m_io[L], l_io[L], visible[L];
    // int8: −128 · Σ q8 per lane, where the score loops' sums start (the keys' bias).
    alignas(64) std::int32_t offset[L];
    // Queries quantized as the tile kernel does (pack_query), 16 lanes' groups side by side,
    // then transposed to [group][lane].
    const std::size_t group_row = geo_.segments * 16;
    DotQuery q;
    FirstBlockPrefetch first(kv, kvh, t0, t1, kBlock);  // while the queries are packed
    for (std::size_t i = 0; i < L; ++i) {
      for (int x = 0; x < 8; ++x) first.next();
      const bool live = i < lanes;
      q.groups = q_groups_.get() + i % W * group_row;
      if (live) {
        pack_query<D>(st[i].q, geo_, q);
      } else {
        std::memset(q.groups, 0, geo_.segments * 64);
        q.scale = 0.0f, q.offset = 0;
      }
      if (i % W == W - 1) groups_to_lanes<QV>(i / W);
      sq[i] = q.scale;
      offset[i] = -q.offset;
      m_io[i] = live ? st[i].m : -kInf;
      l_io[i] = live ? st[i].l : 0.0f;
    }
    first.rest();
    accumulators_to_lanes<QV>(st, lanes);
    __m512 m[QV], l[QV];
    for (int v = 0; v < QV; ++v) {
      m[v] = _mm512_load_ps(m_io + v * W);
      l[v] = _mm512_load_ps(l_io + v * W);
    }

    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.block_rows(b0, t1, kBlock);
      const std::size_t rows = lane_visible_rows(st, lanes, L, b0, nb, visible);
      if (rows == 0) continue;
      const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kBlock, after_range);
      const float *k_scale = nullptr, *v_scale = nullptr;
      if constexpr (D == KvDtype::int8) {
        block_scales<A>(kv, kvh, b0, nb, kBlock, pads_.get(), pads_.get() + kBlock, k_scale,
                        v_scale);
      }
      const auto* k = reinterpret_cast<const std::uint8_t*>(kv.k_row(kvh, b0));
      float* s = s_.get();
      // The block's value rows are interleaved a segment per score-loop step (7.5% of MQA
      // bf16's samples as a phase of its own, AMD Zen 4).
      ValueInterleaver<D> values(kv.v_row(kvh, b0), nb, rows, geo_, vt_.get());
      float* row_max = row_max_.get();
      for (int v = 0; v < QV; ++v) _mm512_store_ps(row_max + v * W, _mm512_set1_ps(-kInf));
      micro_tiles<kTile<QV>>(rows, [&]<std::size_t R>(std::size_t t) {
        if (geo_.row_bytes == kDHead128RowBytes) {
          scores<QV, R, kDHead128RowBytes>(k, t, sq, offset, k_scale, s, row_max, next.k, next.rows,
                                           values);
        } else {
          scores<QV, R>(k, t, sq, offset, k_scale, s, row_max, next.k, next.rows, values);
        }
      });
      values.rest();

      __m512 correction[QV], w_scale[QV];
      const bool two = softmax_pack<QV>(s, rows, visible, v_scale, m, l, correction, w_scale);
      // The next block's value rows, a line per row-group step of p·V: spread over the
      // block's longest phase (prefetched while interleaving, they arrived too late).
      LinePrefetcher pf(next.v, next.rows * geo_.row_bytes);
      const std::size_t n_groups = (rows + Geo::kValueRows - 1) / Geo::kValueRows;
      micro_tiles<kTile<QV>>(positions_, [&]<std::size_t R>(std::size_t c) {
        weighted_values<QV, R>(wt_.get(), c, n_groups, correction, w_scale, ot, pf);
      });
      if (two) {  // int8 weights' low digits, in units of 1/255
        __m512 ones[QV], lo_scale[QV];
        for (int v = 0; v < QV; ++v) {
          ones[v] = _mm512_set1_ps(1.0f);
          lo_scale[v] = _mm512_mul_ps(w_scale[v], _mm512_set1_ps(1.0f / 255.0f));
        }
        micro_tiles<kTile<QV>>(positions_, [&]<std::size_t R>(std::size_t c) {
          weighted_values<QV, R>(wt_lo_.get(), c, n_groups, ones, lo_scale, ot, pf);
        });
      }
      pf.rest();
    }

    for (int v = 0; v < QV; ++v) {
      _mm512_store_ps(m_io + v * W, m[v]);
      _mm512_store_ps(l_io + v * W, l[v]);
    }
    lanes_to_accumulators<QV>(st, lanes);
    for (std::size_t i = 0; i < lanes; ++i) {
      st[i].m = m_io[i];
      st[i].l = l_io[i];
    }
  }

  // The rows after a contiguous range as a block of this kernel's size (the caller's are
  // blocks of kKeyBlock): they stand first in the next range.
  static NextBlock own_block(const KvView& kv, const NextBlock& after_range) {
    if (after_range.rows == 0 || kv.paged()) return after_range;
    const std::size_t left = kv.capacity - after_range.pos;
    return NextBlock::at(kv, after_range.kvh, after_range.pos, left < kBlock ? left : kBlock);
  }

  // qᵀ[g][16v + k] ← group g of lane 16v + k's packed query (row k of q_groups_).
  template <int QV>
  void groups_to_lanes(std::size_t v) {
    const float* rows[16];
    for (std::size_t k = 0; k < 16; ++k) {
      rows[k] = reinterpret_cast<const float*>(q_groups_.get() + k * geo_.segments * 16);
    }
    rows_to_lanes16(rows, geo_.groups, geo_.groups, std::identity{},
                    reinterpret_cast<float*>(qt_.get()) + v * W, QV * W);
  }
  // oᵀ ← the accumulators of lanes [0, lanes) (0 for idle lanes and padding), 16 lanes × 16
  // elements at a time: a transpose puts element j's 16 lanes in one vector, stored as row
  // place_[j] of oᵀ. (A lane at a time, the scalar copies took a quarter of run_group.)
  template <int QV>
  void accumulators_to_lanes(const QueryState* st, std::size_t lanes) {
    for (int v = 0; v < QV; ++v) {
      const float* rows[16];
      for (std::size_t k = 0; k < 16; ++k)
        rows[k] = v * W + k < lanes ? st[v * W + k].acc : nullptr;
      rows_to_lanes16(rows, geo_.d, positions_, place(), ot_.get() + v * W, QV * W);
    }
  }
  // The accumulators of lanes [0, lanes) ← oᵀ, the inverse of accumulators_to_lanes.
  template <int QV>
  void lanes_to_accumulators(QueryState* st, std::size_t lanes) const {
    for (int v = 0; v < QV && v * W < lanes; ++v) {
      float* rows[16];
      for (std::size_t k = 0; k < 16; ++k)
        rows[k] = v * W + k < lanes ? st[v * W + k].acc : nullptr;
      lanes_to_rows16(ot_.get() + v * W, QV * W, geo_.d, positions_, place(), rows);
    }
  }
  auto place() const {
    return [p = place_.get()](std::size_t j) { return static_cast<std::size_t>(p[j]); };
  }

  // sᵀ[t0 + r] for the R key rows of one micro-tile (kRowBytes: the row length when fixed at
  // compile time, else 0), and row_max[lane] ← the largest score of the lane so far; prefetches
  // the next block's same rows.
  template <int QV, std::size_t R, std::size_t kRowBytes = 0>
  void scores(const std::uint8_t* k, std::size_t t0, const float* sq, const std::int32_t* offset,
              const float* k_scale, float* s, float* row_max, const std::byte* k_next,
              std::size_t n_next, ValueInterleaver<D>& shared_values) const {
    ValueInterleaver<D> values = shared_values;  // in registers for the loop (dot_tiles.hpp)
    constexpr std::size_t L = QV * W;
    const std::size_t row_bytes = kRowBytes ? kRowBytes : geo_.row_bytes;
    Acc acc[R][QV];
    // Every loop over acc is unrolled, not only the main one: GCC otherwise kept acc in memory
    // outside it (stored at entry, stored and reloaded at exit: 132 stack moves a tile of 24).
    // MQA decode 0.95x (bf16) and 0.965x (int8) the time, int8 prefill 0.96-0.98x (AMD Zen 5).
    // int8 sums start from −offset, not 0: a subtraction per score less in the epilogue (MQA
    // int8 decode and int8 prefill 0.99x the time, AMD Zen 5).
#pragma GCC unroll 12
    for (std::size_t r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < QV; ++v) {
        if constexpr (D == KvDtype::int8) {
          acc[r][v] = _mm512_load_si512(offset + v * W);
        } else {
          acc[r][v] = dot_acc_zero<D>();
        }
      }
    }
    // A line of the next block's same rows per group step.
    auto pf = LinePrefetcher::rows(k_next, row_bytes, t0, R, n_next);
    const std::uint8_t* rows = k + t0 * row_bytes;
    // int8 keys enter vpdpbusd as the unsigned operand, k + 128.
    const __m512i bias = _mm512_set1_epi32(D == KvDtype::int8 ? static_cast<int>(0x80808080u) : 0);
    // group(r): row r's 32-bit group, broadcast straight from the cache by the load unit.
    // Copied to an array first, the compiler routed it through general registers into
    // vpbroadcastd (a move to the vector unit and a shuffle beside every 2 dots).
    const std::int32_t* qt = qt_.get();  // a local: not reloaded after the interleave's stores
    const auto step = [&](std::size_t g, auto group) {
      pf.next();
      values.next();
      __m512i q[QV];
      for (int v = 0; v < QV; ++v) q[v] = _mm512_load_si512(qt + g * L + v * W);
#pragma GCC unroll 12
      for (std::size_t r = 0; r < R; ++r) {
        __m512i x = group(r);
        if constexpr (D == KvDtype::int8) x = _mm512_xor_si512(x, bias);
        for (int v = 0; v < QV; ++v) acc[r][v] = dot_unit<D>(acc[r][v], x, q[v]);
      }
    };
    const std::size_t whole = row_bytes / 4;  // groups inside the row; a short last one is copied
    for (std::size_t g = 0; g < whole; ++g) {
      const std::uint8_t* at = rows + 4 * g;
      step(g, [&](std::size_t r) {
        float group;  // the bits of the group, taken as a float only to broadcast them
        std::memcpy(&group, at + r * row_bytes, 4);
        return _mm512_castps_si512(_mm512_set1_ps(group));
      });
    }
    if (whole < geo_.groups) {
      std::int32_t group[R] = {};
      for (std::size_t r = 0; r < R; ++r) {
        std::memcpy(&group[r], rows + r * row_bytes + 4 * whole, row_bytes % 4);
      }
      step(whole, [&](std::size_t r) { return _mm512_set1_epi32(group[r]); });
    }
    pf.rest();
    shared_values = values;
    __m512 tile_max[QV];
#pragma GCC unroll 4
    for (int v = 0; v < QV; ++v) tile_max[v] = _mm512_load_ps(row_max + v * W);
#pragma GCC unroll 12
    for (std::size_t r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < QV; ++v) {
        __m512 sc;
        if constexpr (D == KvDtype::int8) {
          const __m512 dot = _mm512_cvtepi32_ps(acc[r][v]);
          sc = _mm512_mul_ps(_mm512_mul_ps(dot, _mm512_load_ps(sq + v * W)),
                             _mm512_set1_ps(k_scale[t0 + r]));
        } else {
          sc = acc[r][v];
        }
        _mm512_store_ps(s + (t0 + r) * L + v * W, sc);
        tile_max[v] = _mm512_max_ps(tile_max[v], sc);
      }
    }
#pragma GCC unroll 4
    for (int v = 0; v < QV; ++v) _mm512_store_ps(row_max + v * W, tile_max[v]);
  }

  // Online softmax per lane over rows [0, rows) of sᵀ (lanes see `visible` rows); then the
  // weights w = e^(s − m) packed into wt, kValueRows rows to a lane: int8 as u8 of w · v_scale
  // against the lane's largest (weight_digits: low digits into wt_lo_), bf16 rounded.
  // correction: e^(m_old − m) per lane; w_scale: the factor back from the unit's sums (int8:
  // w_max / 255, 0 for a lane with no weight; bf16: 1). Returns whether some weights have two
  // digits.
  template <int QV>
  bool softmax_pack(float* s, std::size_t rows, const float* visible, const float* v_scale,
                    __m512* m, __m512* l, __m512* correction, __m512* w_scale) {
    constexpr std::size_t L = QV * W;
    std::int32_t* wt = wt_.get();
    bool any_two = false;
    for (int v = 0; v < QV; ++v) {
      const __m512 vis = _mm512_load_ps(visible + v * W);
      __m512 block_max = _mm512_set1_ps(-kInf);
      // Decode: every lane sees every row; prefill's causal lanes see fewer.
      const __mmask16 all_rows =
          _mm512_cmp_ps_mask(_mm512_set1_ps(static_cast<float>(rows)), vis, _CMP_LE_OQ);
      const auto seen = [&](std::size_t r) {
        return all_rows == 0xffff
                   ? __mmask16(0xffff)
                   : _mm512_cmp_ps_mask(_mm512_set1_ps(static_cast<float>(r)), vis, _CMP_LT_OQ);
      };
      // Where every lane sees every row (decode; prefill's blocks left of the diagonal) the
      // block's maximum was kept by scores(), and no pass over the scores is needed for it
      // (with exp_of_difference, MQA int8 decode and int8 prefill 0.95x the time, AMD Zen 5).
      // Else four running maxima: one chain of dependent max instructions over the block's
      // rows held 20% of this function's samples (MQA bf16 decode, Zen 5).
      if (all_rows == 0xffff) {
        block_max = _mm512_load_ps(row_max_.get() + v * W);
      } else {
        __m512 maxima[4] = {block_max, block_max, block_max, block_max};
        std::size_t r = 0;
        for (; r + 4 <= rows; r += 4) {
#pragma GCC unroll 4
          for (std::size_t i = 0; i < 4; ++i) {
            maxima[i] = _mm512_mask_max_ps(maxima[i], seen(r + i), maxima[i],
                                           _mm512_load_ps(s + (r + i) * L + v * W));
          }
        }
        for (; r < rows; ++r) {
          maxima[0] =
              _mm512_mask_max_ps(maxima[0], seen(r), maxima[0], _mm512_load_ps(s + r * L + v * W));
        }
        block_max =
            _mm512_max_ps(_mm512_max_ps(maxima[0], maxima[1]), _mm512_max_ps(maxima[2], maxima[3]));
      }
      const __m512 m_new = _mm512_max_ps(m[v], block_max);
      // A lane that has seen no key keeps m = −inf: its weights are masked to 0 below.
      const __mmask16 finite = _mm512_cmp_ps_mask(m_new, _mm512_set1_ps(-kInf), _CMP_NEQ_OQ);
      const __m512 base = _mm512_maskz_mov_ps(finite, m_new);
      correction[v] = exp_nonpositive(_mm512_sub_ps(m[v], base), finite);
      m[v] = m_new;
      const __m512 base_log2e = times_log2e(base);
      __m512 sum = _mm512_setzero_ps();
      if constexpr (D == KvDtype::bf16) {
        // Rows in pairs, rounded and packed as they are computed (one convert of both rows
        // and a word permute), not stored as f32 and read back.
        const __m512i pairs = pair_order();
        for (std::size_t r = 0; r < rows; r += 2) {
          const __m512 p0 = exp_of_difference<kExp2ForWeights>(_mm512_load_ps(s + r * L + v * W),
                                                               base_log2e, seen(r) & finite);
          sum = _mm512_add_ps(sum, p0);
          __m512 p1 = _mm512_setzero_ps();
          if (r + 1 < rows) {
            p1 = exp_of_difference<kExp2ForWeights>(_mm512_load_ps(s + (r + 1) * L + v * W),
                                                    base_log2e, seen(r + 1) & finite);
            sum = _mm512_add_ps(sum, p1);
          }
          const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);  // round to nearest even
          _mm512_store_si512(wt + r / 2 * L + v * W, _mm512_permutexvar_epi16(pairs, both));
        }
        w_scale[v] = _mm512_set1_ps(1.0f);
      } else {
        __m512 w_max = _mm512_setzero_ps();
        for (std::size_t r = 0; r < rows; ++r) {
          const __m512 p = exp_of_difference<kExp2ForWeights>(_mm512_load_ps(s + r * L + v * W),
                                                              base_log2e, seen(r) & finite);
          sum = _mm512_add_ps(sum, p);
          const __m512 w = _mm512_mul_ps(p, _mm512_set1_ps(v_scale[r]));
          _mm512_store_ps(s + r * L + v * W, w);
          w_max = _mm512_max_ps(w_max, w);
        }
        const __mmask16 some = _mm512_cmp_ps_mask(w_max, _mm512_setzero_ps(), _CMP_GT_OQ);
        const __m512 inv = _mm512_maskz_div_ps(some, _mm512_set1_ps(255.0f), w_max);
        w_scale[v] = _mm512_mul_ps(w_max, _mm512_set1_ps(1.0f / 255.0f));
        // One digit first, its error summed on the way; two for all 16 lanes when one needs
        // them (the others then gain precision).
        std::int32_t* wt_lo = wt_lo_.get();
        DigitError digit_error;
        const auto pack = [&](bool two) {
          for (std::size_t rg = 0; rg * Geo::kValueRows < rows; ++rg) {
            __m512i hi = _mm512_setzero_si512(), lo = _mm512_setzero_si512();
            for (std::size_t e = 0; e < Geo::kValueRows; ++e) {
              const std::size_t r = rg * Geo::kValueRows + e;
              if (r >= rows) break;
              const __m512 y = _mm512_mul_ps(_mm512_load_ps(s + r * L + v * W), inv);
              if (!two) digit_error.add(y);
              const WeightDigits w = weight_digits(y, two);  // 0…255 each
              hi = _mm512_or_si512(hi, _mm512_slli_epi32(w.hi, static_cast<int>(8 * e)));
              lo = _mm512_or_si512(lo, _mm512_slli_epi32(w.lo, static_cast<int>(8 * e)));
            }
            _mm512_store_si512(wt + rg * L + v * W, hi);
            _mm512_store_si512(wt_lo + rg * L + v * W, lo);  // 0 with one digit
          }
        };
        pack(false);
        if (digit_error.two_digits() != 0) {
          pack(true);
          any_two = true;
        }
      }
      l[v] = _mm512_fmadd_ps(l[v], correction[v], sum);
    }
    return any_two;
  }

  // Word order that turns cvtne2ps_pbh(b, a) (a's 16 words, then b's) into 16 lanes of
  // (a, b) pairs, a in the low half: the layout vdpbf16ps multiplies.
  static __m512i pair_order() {
    alignas(64) static constexpr std::uint16_t kOrder[32] = {
        0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
        8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    return _mm512_load_si512(kOrder);
  }

  // oᵀ[c0 + c] ← oᵀ · correction + w_scale · Σ_rg dot(wt[rg], vt[rg][c0 + c]) for the R value
  // positions of one micro-tile; pf takes a line per row group.
  template <int QV, std::size_t R>
  void weighted_values(const std::int32_t* wt, std::size_t c0, std::size_t n_groups,
                       const __m512* correction, const __m512* w_scale, float* ot,
                       LinePrefetcher& pf) const {
    constexpr std::size_t L = QV * W;
    Acc sum[R][QV];
#pragma GCC unroll 12
    for (std::size_t c = 0; c < R; ++c) {
#pragma GCC unroll 4
      for (int v = 0; v < QV; ++v) sum[c][v] = dot_acc_zero<D>();
    }
    for (std::size_t rg = 0; rg < n_groups; ++rg) {
      pf.next();
      __m512i w[QV];
      for (int v = 0; v < QV; ++v) w[v] = _mm512_load_si512(wt + rg * L + v * W);
      const std::int32_t* col = vt_.get() + rg * positions_ + c0;
#pragma GCC unroll 12
      for (std::size_t c = 0; c < R; ++c) {
        const __m512i x = _mm512_set1_epi32(col[c]);
        for (int v = 0; v < QV; ++v) sum[c][v] = dot_unit<D>(sum[c][v], w[v], x);
      }
    }
#pragma GCC unroll 12
    for (std::size_t c = 0; c < R; ++c) {
#pragma GCC unroll 4
      for (int v = 0; v < QV; ++v) {
        float* o = ot + (c0 + c) * L + v * W;
        __m512 total;
        if constexpr (D == KvDtype::int8) {
          total = _mm512_cvtepi32_ps(sum[c][v]);
        } else {
          total = sum[c][v];
        }
        _mm512_store_ps(
            o, _mm512_fmadd_ps(total, w_scale[v], _mm512_mul_ps(_mm512_load_ps(o), correction[v])));
      }
    }
  }

  Geo geo_;
  std::size_t positions_;  // accumulator positions per query (head_dim padded, tile order)
  Scratch<A, std::int32_t> q_groups_, qt_, wt_, wt_lo_, vt_;  // wt_lo_: int8's low digits
  Scratch<A> ot_, s_, pads_;
  Scratch<A> row_max_;  // per lane, the block's largest score, kept by scores()
  // place_[j]: the accumulator position of element j (the inverse of DotGeometry::natural,
  // a permutation of [0, positions_); elements ≥ d are padding).
  Scratch<A, std::uint32_t> place_;
};

// The dot units' runners: queries in lanes where enough of them share a long key range,
// quads of queries for 4, 8 or 12 that see the whole range (GQA decode), else the tile kernel.
template <class A, KvDtype D>
struct DotUnitRunner : DotUnitKeys<A, D> {
  DotUnitRunner(std::size_t head_dim, std::size_t max_queries)
      : DotUnitKeys<A, D>(head_dim, max_queries) {
    if (DotHeadsInLanes<A, D>::suits(max_queries, kKeyBlock, true)) {
      lanes.emplace(head_dim);
    }
    if (DotQueryQuads<A, D>::suits(max_queries, kv_row_bytes(D, head_dim), true, false)) {
      quads.emplace(head_dim);
    }
  }
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t nv, bool direct, const DecodeScratch<A>& ws) {
    const bool see = all_see(st, count, t1);
    if (lanes && DotHeadsInLanes<A, D>::suits(count, t1 - t0, see)) {
      return lanes->run(kv, kvh, t0, t1, st, count, ws.after_range);
    }
    if (quads && DotQueryQuads<A, D>::suits(count, kv.k_row_bytes(), see, kv.paged())) {
      return quads->run(kv, kvh, t0, t1, st, count, ws.after_range);
    }
    DotUnitKeys<A, D>::run(kv, kvh, t0, t1, st, count, nv, direct, ws);
  }
  std::optional<DotHeadsInLanes<A, D>> lanes;
  std::optional<DotQueryQuads<A, D>> quads;
};
template <class A>
inline constexpr bool kRunsPageByPage<KeyRunner<A, KvDtype::int8, ComputeUnit::vnni_int8>> = true;
template <class A>
inline constexpr bool kRunsPageByPage<KeyRunner<A, KvDtype::bf16, ComputeUnit::avx512_bf16>> = true;
template <class A>
struct KeyRunner<A, KvDtype::int8, ComputeUnit::vnni_int8> : DotUnitRunner<A, KvDtype::int8> {
  using DotUnitRunner<A, KvDtype::int8>::DotUnitRunner;
};
template <class A>
struct KeyRunner<A, KvDtype::bf16, ComputeUnit::avx512_bf16> : DotUnitRunner<A, KvDtype::bf16> {
  using DotUnitRunner<A, KvDtype::bf16>::DotUnitRunner;
};

}  // namespace kvscope::simd
