#pragma once
// Attention of a set of query vectors over a range of cached keys on a dot-product unit:
// AVX-512 VNNI for int8 caches (vpdpbusd: 4 u8 × s8 products summed into each int32 lane),
// AVX512-BF16 for bf16 caches (vdpbf16ps: 2 bf16 products summed into each f32 lane).
// The decode and prefill drivers (attention_decode.hpp, attention_prefill.hpp) call it in
// place of the widening path when the compute unit is not fp32-fma. Include only from
// kernels/arch/avx512_dot.cpp.
//
// Per block of 64 keys, shared by all query vectors of the range (g per kv head in decode,
// a query tile × g in prefill):
//   K is transposed into 32-bit groups, kt[group][key] (4 int8 or 2 bf16 elements a group):
//     one vector holds one group of 16 keys, so a broadcast group of the query feeds 16 keys'
//     dot products with no horizontal sums;
//   V is interleaved across 4 rows (int8) or 2 (bf16), vt[row group][lane]: one broadcast
//     group of softmax weights feeds 16 output lanes. (Both tiles: dot_tiles.hpp.)
// Arithmetic (integer scores as in Jacob et al. 2018; online softmax as attention_block.hpp):
//   int8 scores: q (already × 1/√d) is quantized per query to s8 with scale sq = max|q|/127;
//     vpdpbusd needs one unsigned operand, so keys enter as k + 128 and
//     q·k = Σ q8 (k + 128) − 128 Σ q8, exact in int32; score = sq · k_scale[t] · q·k.
//   int8 P·V: the weights p_t · v_scale[t] of one block are quantized to u8 against the
//     block's largest (scale w_max/255; two u8 digits and two passes where one would err too
//     much: weight_digits in dot_query.hpp) and summed with the int8 values in int32 by
//     vpdpbusd over 4 interleaved rows, then added to the f32 accumulator times that scale. (int16
//     weights by vpdpwssd were measured too: error 1.1× the cache's own instead of 1.2×,
//     but 15% slower.)
//   bf16: q and the weights are rounded to bf16 (round to nearest even); products summed in
//     f32 by vdpbf16ps.
// The softmax itself (max, exp, running sums, rescaling) stays in f32.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>

#include "kernels/attention_decode.hpp"
#include "kernels/kv_view.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/softmax_exp.hpp"
#include "kernels/units/dot_key_rows.hpp"
#include "kernels/units/dot_query.hpp"
#include "kernels/units/dot_tiles.hpp"
#include "kernels/units/dot_unit_kernels.hpp"

namespace kvscope::simd {

// s[i][t] for queries i < count (4 at a time; a short tail repeats its last query) over the
// block's 64 transposed keys; −inf for t ≥ n[i]. k_scale: int8 per-key scales (64, padded).
template <KvDtype D>
void dot_scores(const DotQuery* const* qs, const std::size_t* n, std::size_t count,
                const std::int32_t* kt, const DotGeometry<D>& geo, const float* k_scale,
                float* const* s) {
  constexpr std::size_t QR = 4;  // 4 queries × 4 key vectors: 16 accumulators
  using Acc = typename DotAcc<D>::type;
  for (std::size_t q0 = 0; q0 < count; q0 += QR) {
    const DotQuery* q[QR];
    for (std::size_t i = 0; i < QR; ++i) q[i] = qs[q0 + i < count ? q0 + i : count - 1];
    Acc acc[QR][4];
#pragma GCC unroll 4
    for (std::size_t i = 0; i < QR; ++i) {
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 4; ++j) {
        if constexpr (D == KvDtype::int8) {
          acc[i][j] = _mm512_setzero_si512();
        } else {
          acc[i][j] = _mm512_setzero_ps();
        }
      }
    }
    for (std::size_t g = 0; g < geo.groups; ++g) {
      const std::int32_t* row = kt + g * kDotBlock;
      const __m512i k[4] = {_mm512_load_si512(row), _mm512_load_si512(row + 16),
                            _mm512_load_si512(row + 32), _mm512_load_si512(row + 48)};
#pragma GCC unroll 4
      for (std::size_t i = 0; i < QR; ++i) {
        const __m512i b = _mm512_set1_epi32(q[i]->groups[g]);
#pragma GCC unroll 4
        for (std::size_t j = 0; j < 4; ++j) {
          if constexpr (D == KvDtype::int8) {
            acc[i][j] = dot_u8s8(acc[i][j], k[j], b);
          } else {
            acc[i][j] = dot_bf16(acc[i][j], k[j], b);
          }
        }
      }
    }
#pragma GCC unroll 4
    for (std::size_t i = 0; i < QR; ++i) {
      if (q0 + i >= count) break;
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 4; ++j) {
        __m512 sc;
        if constexpr (D == KvDtype::int8) {
          sc = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[i][j], _mm512_set1_epi32(q[i]->offset)));
          sc = _mm512_mul_ps(_mm512_mul_ps(sc, _mm512_set1_ps(q[i]->scale)),
                             _mm512_loadu_ps(k_scale + 16 * j));
        } else {
          sc = acc[i][j];
        }
        _mm512_store_ps(s[q0 + i] + 16 * j, mask_past(sc, n[q0 + i], 16 * j));
      }
    }
  }
}

inline constexpr float kLog2e = 1.44269504088896341f;

// 2^t (lanes outside `keep` give exactly 0) = 2^n · 2^f with f ∈ [−½, ½], 2^f by the
// polynomial, 2^n by vscalefps, which takes any n (2^n under the smallest float gives 0).
template <const auto& kPolynomial>
inline __m512 exp2_by_scalef(__m512 t, __mmask16 keep) {
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(kPolynomial[0]);
  for (std::size_t i = 1; i < std::size(kPolynomial); ++i)
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(kPolynomial[i]));
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

// e^x for x ≤ 0 (lanes outside `keep` give exactly 0): 2^(x · log2 e), 2^f by the Cephes
// exp2f polynomial (relative error ~2e-7). Half the instructions of xsimd::exp, which also
// guards overflow that x ≤ 0 cannot reach.
template <const auto& kPolynomial = kExp2Polynomial>
inline __m512 exp_nonpositive(__m512 x, __mmask16 keep) {
  return exp2_by_scalef<kPolynomial>(
      _mm512_mul_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(kLog2e)), keep);
}

// e^(s − m) for s ≤ m, given m · log2 e (lanes outside `keep` give exactly 0): as
// exp_nonpositive, but t = s · log2 e − m · log2 e is one fused multiply-subtract and there is
// no clamp (far below m the weight is 0; a NaN score stays NaN). Each weight's chain is two
// instructions shorter, and the softmax loops are bound by those chains: 0.75x the time of the
// weights' pass (AMD Zen 5, one core, probe). m · log2 e is rounded once, an error of
// |m| · 2^-23 in t, e.g. 6e-6 relative for a maximum of 100: under the polynomials' own
// (kExp2ForWeights: 7.5e-5).
template <const auto& kPolynomial = kExp2Polynomial>
inline __m512 exp_of_difference(__m512 s, __m512 m_log2e, __mmask16 keep) {
  return exp2_by_scalef<kPolynomial>(_mm512_fmsub_ps(s, _mm512_set1_ps(kLog2e), m_log2e), keep);
}
inline __m512 times_log2e(__m512 m) { return _mm512_mul_ps(m, _mm512_set1_ps(kLog2e)); }

// Online softmax of one query over one block (Milakov & Gimelshein 2018), fused with packing
// its weights for the unit: with s[0, 64) the block's scores (−inf past its n rows),
// m ← max(m, max s), l ← l·e^(m_old − m) + Σ e^(s − m), acc[0, lanes) ← acc·e^(m_old − m)
// when the max grows; the weights w = e^(s − m) (× v_scale for int8) go to `packed` in row
// groups: int8 as u8 against the block's largest weight (one digit, or two with the low ones
// in `packed_lo` and `two` set: weight_digits), bf16 rounded. Returns the factor
// that turns the unit's sums back into Σ w · v (int8: w_max / 255, 0 when every weight is 0;
// bf16: 1).
// The softmax step alone: x[k] ← e^(s[16k, 16k + 16) − m), 0 past n, with m, l and acc
// updated as above.
inline void softmax_block(QueryState& q, const float* s, std::size_t n, float* acc,
                          std::size_t lanes, __m512 x[4]) {
  for (int k = 0; k < 4; ++k) x[k] = _mm512_load_ps(s + 16 * k);
  const float block_max =
      _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3])));
  if (block_max > q.m) {
    const float correction = std::exp(q.m - block_max);  // 0 on the first block
    const __m512 c = _mm512_set1_ps(correction);
    for (std::size_t i = 0; i < lanes; i += 16) {
      _mm512_store_ps(acc + i, _mm512_mul_ps(_mm512_load_ps(acc + i), c));
    }
    q.l *= correction;
    q.m = block_max;
  }
  const __m512 m = _mm512_set1_ps(q.m);
  __m512 sum = _mm512_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    // Vectors wholly past n weigh 0 without an exp (a block of a page of 16 keys has one).
    x[k] = 16 * static_cast<std::size_t>(k) < n
               ? exp_nonpositive(_mm512_sub_ps(x[k], m), lanes_below(n, 16 * k))
               : _mm512_setzero_ps();
    sum = _mm512_add_ps(sum, x[k]);
  }
  q.l += _mm512_reduce_add_ps(sum);
}

template <KvDtype D>
float softmax_pack(QueryState& q, const float* s, std::size_t n, const float* v_scale, float* acc,
                   std::size_t lanes, std::int32_t* packed, std::int32_t* packed_lo, bool& two) {
  two = false;
  __m512 x[4];
  softmax_block(q, s, n, acc, lanes, x);
  auto* halves = reinterpret_cast<__m256i*>(packed);
  if constexpr (D == KvDtype::int8) {
    for (int k = 0; k < 4; ++k) x[k] = _mm512_mul_ps(x[k], _mm512_loadu_ps(v_scale + 16 * k));
    const float w_max =
        _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(x[0], x[1]), _mm512_max_ps(x[2], x[3])));
    if (w_max == 0.0f) return 0.0f;
    const __m512 inv = _mm512_set1_ps(255.0f / w_max);
    DigitError digit_error;
    for (int k = 0; k < 4; ++k) {
      x[k] = _mm512_mul_ps(x[k], inv);
      digit_error.add(x[k]);
    }
    // One query's rows lie across the lanes: their sums decide.
    two = _mm512_reduce_add_ps(digit_error.excess) > 0.0f;
    auto* hi = reinterpret_cast<__m128i*>(packed);
    auto* lo = reinterpret_cast<__m128i*>(packed_lo);
    for (int k = 0; k < 4; ++k) {
      const WeightDigits w = weight_digits(x[k], two);
      _mm_store_si128(hi + k, _mm512_cvtusepi32_epi8(w.hi));
      if (two) _mm_store_si128(lo + k, _mm512_cvtusepi32_epi8(w.lo));
    }
    return w_max / 255.0f;
  } else {
    for (int k = 0; k < 4; ++k) _mm256_store_si256(halves + k, (__m256i)_mm512_cvtneps_pbh(x[k]));
    return 1.0f;
  }
}

// acc_q[c0·16, (c0+NV)·16) += scale_q · Σ_rg w_q[rg · WS] · vt[rg] for Q ∈ {1, 2} queries at
// once (one value load feeds both), over row groups rg < n_groups.
template <KvDtype D, int NV, int Q, std::size_t WS = 1>
void dot_pv(const std::int32_t* const* w, const float* scale, float* const* acc,
            const std::int32_t* vt, std::size_t acc_vectors, std::size_t c0, std::size_t n_groups) {
  // int8 sums the block in int32 from 0 and scales once; bf16 sums straight into acc in f32.
  using Acc = typename DotAcc<D>::type;
  Acc sum[Q][NV];
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if constexpr (D == KvDtype::int8) {
        sum[q][v] = _mm512_setzero_si512();
      } else {
        sum[q][v] = _mm512_load_ps(acc[q] + (c0 + v) * 16);
      }
    }
  }
  for (std::size_t rg = 0; rg < n_groups; ++rg) {
    const std::int32_t* col = vt + (rg * acc_vectors + c0) * 16;
    __m512i wq[Q];
#pragma GCC unroll 8
    for (int q = 0; q < Q; ++q) wq[q] = _mm512_set1_epi32(w[q][rg * WS]);
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const __m512i x = _mm512_load_si512(col + v * 16);
#pragma GCC unroll 8
      for (int q = 0; q < Q; ++q) {
        if constexpr (D == KvDtype::int8) {
          sum[q][v] = dot_u8s8(sum[q][v], wq[q], x);
        } else {
          sum[q][v] = dot_bf16(sum[q][v], x, wq[q]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int q = 0; q < Q; ++q) {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      float* a = acc[q] + (c0 + v) * 16;
      if constexpr (D == KvDtype::int8) {
        _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[q][v]), _mm512_set1_ps(scale[q]),
                                           _mm512_load_ps(a)));
      } else {
        _mm512_store_ps(a, sum[q][v]);
      }
    }
  }
}

// All acc_vectors of Q queries, in register groups of 8, 4, 2, 1 vectors.
template <KvDtype D, int Q, std::size_t WS = 1>
void dot_pv_all(const std::int32_t* const* w, const float* scale, float* const* acc,
                const std::int32_t* vt, std::size_t acc_vectors, std::size_t n_groups) {
  std::size_t c = 0;
  for (; c + 8 <= acc_vectors; c += 8) {
    dot_pv<D, 8, Q, WS>(w, scale, acc, vt, acc_vectors, c, n_groups);
  }
  if (c + 4 <= acc_vectors)
    dot_pv<D, 4, Q, WS>(w, scale, acc, vt, acc_vectors, c, n_groups), c += 4;
  if (c + 2 <= acc_vectors)
    dot_pv<D, 2, Q, WS>(w, scale, acc, vt, acc_vectors, c, n_groups), c += 2;
  if (c < acc_vectors) dot_pv<D, 1, Q, WS>(w, scale, acc, vt, acc_vectors, c, n_groups);
}

// Query states attend to ranges of keys of one kv head on the dot unit of D: the drivers'
// KeyRunner for the unit (same contract as run_key_range in attention_decode.hpp: st[i].q
// pre-scaled and zero-padded, st[i].acc in natural order; keys after st[i].last_key are not
// read for it). One per thread: it holds that thread's tiles for up to `max_queries` queries.
template <class A, KvDtype D>
class DotUnitKeys : public SlotKeyRunner<DotUnitKeys<A, D>> {
  static_assert(D == KvDtype::int8 || D == KvDtype::bf16, "dot units serve int8 and bf16");
  static constexpr std::size_t kRowGroups = DotGeometry<D>::kRowGroups;

 public:
  DotUnitKeys(std::size_t head_dim, std::size_t max_queries)
      : geo_(head_dim),
        lanes_(geo_.acc_vectors * 16),
        max_queries_(max_queries),
        kt_(geo_.segments * 16 * kDotBlock),
        vt_(kRowGroups * lanes_),
        q_groups_(max_queries * geo_.segments * 16),
        weights_(2 * max_queries * kRowGroups),  // int8: high digits, then low
        acc_(max_queries * lanes_),
        s_(max_queries * kDotBlock),
        floats_(2 * kDotBlock + 2 * max_queries),
        queries_(max_queries),
        live_q_(max_queries),
        live_(max_queries),
        n_(max_queries),
        s_rows_(max_queries),
        acc_rows_(2 * max_queries),
        w_rows_(2 * max_queries) {}

 private:
  friend class SlotKeyRunner<DotUnitKeys<A, D>>;
  // Blocks run on across pages (chunked_block_rows), so a paged cache is read 64 rows at once.
  static constexpr std::size_t kPagePartRows = kDotBlock;

  // States st[0, count) into slots [first, first + count): queries into the unit's format,
  // accumulators into tile order.
  void begin(const QueryState* st, std::size_t count, std::size_t first) {
    DotQuery* queries = queries_.get() + first;
    for (std::size_t i = 0; i < count; ++i) {
      queries[i].groups = q_groups_.get() + (first + i) * geo_.segments * 16;
      pack_query<D>(st[i].q, geo_, queries[i]);
      geo_.to_tile_order(st[i].acc, acc_.get() + (first + i) * lanes_);
    }
  }

  // The accumulators of slots [first, first + count) back to natural order in st[0, count).
  void end(QueryState* st, std::size_t count, std::size_t first) const {
    for (std::size_t i = 0; i < count; ++i) {
      geo_.to_natural_order(acc_.get() + (first + i) * lanes_, st[i].acc);
    }
  }

  // The scores of the live queries over rows [b0, b0 + nb) of kv head kvh (into s_rows_), and
  // the block's values interleaved (into vt_); k_next and v_next take a line per line read.
  // Only the n_max rows some query sees are read; key vectors past them hold stale lanes that
  // the scores mask to −inf (a select, so even NaN patterns drop out).
  template <class KeyPrefetch, class ValuePrefetch>
  void read_block(const KvView& kv, std::size_t kvh, std::size_t b0, std::size_t nb,
                  std::size_t n_live, std::size_t n_max, bool in_place, const float* k_scale,
                  KeyPrefetch& k_next, ValuePrefetch& v_next) {
    const BlockRows k = kv.k_block(kvh, b0, nb);
    if (in_place) {
      if constexpr (D == KvDtype::int8) {
        for (std::size_t li = 0; li < n_live; ++li) {
          dot_scores_rows(*live_q_.get()[li], k, n_.get()[li], geo_, k_scale, s_rows_.get()[li],
                          k_next);
        }
      }
    } else {
      transpose_keys<D>(k, n_max, geo_, kt_.get(), k_next);
      dot_scores<D>(live_q_.get(), n_.get(), n_live, kt_.get(), geo_, k_scale, s_rows_.get());
    }
    k_next.rest();
    const BlockRows v = kv.v_block(kvh, b0, nb);
    if (v.consecutive(n_max)) {  // no chunk lookup per row
      const std::byte* v0 = v.chunk[0];
      interleave_rows<D>([&](std::size_t t) { return v0 + t * geo_.row_bytes; }, n_max, n_max, geo_,
                         vt_.get(), v_next);
    } else {
      interleave_rows<D>([&](std::size_t t) { return v.row(t); }, n_max, n_max, geo_, vt_.get(),
                         v_next);
    }
  }

  // States st[0, count) in slots [first, first + count) over keys [t0, t1) of kv head kvh;
  // after_range: the rows read next, prefetched by the last block.
  void keys(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
            std::size_t count, std::size_t first, const NextBlock& after_range) {
    // int8 keys of fewer than kVnniMinSharing queries are read in place, row by row
    // (dot_key_rows.hpp): for so few queries the transpose costs more than it saves.
    const bool in_place = D == KvDtype::int8 && count < kVnniMinSharing;
    DotQuery* queries = queries_.get() + first;
    float* k_scale_pad = floats_.get();
    float* v_scale_pad = k_scale_pad + kDotBlock;
    float* w_scale = v_scale_pad + kDotBlock;

    GroupPrefetcher group(kv, kvh, t0, t1, kDotBlock, after_range);
    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.chunked_block_rows(b0, t1, kDotBlock);  // across pages of 16 too
      std::size_t n_live = 0, n_max = 0;
      for (std::size_t i = 0; i < count; ++i) {
        if (st[i].last_key < b0) continue;  // whole block after this query: masked
        const std::size_t rows = st[i].last_key - b0 + 1 < nb ? st[i].last_key - b0 + 1 : nb;
        live_.get()[n_live] = i;
        n_.get()[n_live] = rows;
        live_q_.get()[n_live] = &queries[i];
        s_rows_.get()[n_live] = s_.get() + n_live * kDotBlock;
        acc_rows_.get()[n_live] = acc_.get() + (first + i) * lanes_;
        ++n_live;
        n_max = rows > n_max ? rows : n_max;
      }
      if (n_live == 0) continue;
      const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kDotBlock, after_range);
      const float* k_scale = nullptr;
      const float* v_scale = nullptr;
      if constexpr (D == KvDtype::int8) {
        block_scales<A>(kv, kvh, b0, nb, kDotBlock, k_scale_pad, v_scale_pad, k_scale, v_scale);
      }
      // The next block's rows a line per line read: its keys over this block's, its values
      // over these values. Across pages in page runs over its chunks (requested at once, they
      // waited on the miss buffers and made MHA over pages of 16 slower than blocks of 16 rows).
      if (next.spans_pages(kv)) {
        for (std::size_t r = 0; r < next.rows; r += BlockRows::kChunkRows) {
          const std::size_t n = std::min(BlockRows::kChunkRows, next.rows - r);
          NextBlock::at(kv, next.kvh, next.pos + r, n).prefetch_scales();
        }
        BlockRunPrefetcher k_next(kv.k_block(next.kvh, next.pos, next.rows), next.rows);
        BlockRunPrefetcher v_next(kv.v_block(next.kvh, next.pos, next.rows), next.rows);
        read_block(kv, kvh, b0, nb, n_live, n_max, in_place, k_scale, k_next, v_next);
      } else if (group.grouped()) {
        group.at_block(b0, nb);
        auto k_next = group.key_share();
        auto v_next = group.value_share();
        read_block(kv, kvh, b0, nb, n_live, n_max, in_place, k_scale, k_next, v_next);
      } else {
        if (kv.paged()) next.prefetch_scales();
        with_shared_block_prefetchers(next.k, next.rows * geo_.row_bytes, next.v,
                                      next.rows * geo_.row_bytes, [&](auto& k_next, auto& v_next) {
                                        read_block(kv, kvh, b0, nb, n_live, n_max, in_place,
                                                   k_scale, k_next, v_next);
                                      });
      }

      // int8 weights of two digits (weight_digits): the low ones in a second pass, for the
      // queries that have them (n_lo), × scale / 255.
      const std::int32_t** w_lo_rows = w_rows_.get() + max_queries_;
      float* w_scale_lo = w_scale + max_queries_;
      float** acc_lo_rows = acc_rows_.get() + max_queries_;
      std::size_t n_lo = 0;
      for (std::size_t li = 0; li < n_live; ++li) {
        std::int32_t* wi = weights_.get() + li * kRowGroups;
        std::int32_t* wi_lo = wi + max_queries_ * kRowGroups;
        bool two = false;
        w_scale[li] = softmax_pack<D>(st[live_.get()[li]], s_rows_.get()[li], n_.get()[li], v_scale,
                                      acc_rows_.get()[li], lanes_, wi, wi_lo, two);
        w_rows_.get()[li] = wi;
        if (two) {
          w_lo_rows[n_lo] = wi_lo;
          w_scale_lo[n_lo] = w_scale[li] / 255.0f;
          acc_lo_rows[n_lo++] = acc_rows_.get()[li];
        }
      }
      const std::size_t n_groups =
          (n_max + DotGeometry<D>::kValueRows - 1) / DotGeometry<D>::kValueRows;
      const auto pv = [&](const std::int32_t* const* w, const float* scale, float* const* acc,
                          std::size_t count) {
        std::size_t li = 0;
        for (; li + 2 <= count; li += 2) {
          dot_pv_all<D, 2>(w + li, scale + li, acc + li, vt_.get(), geo_.acc_vectors, n_groups);
        }
        if (li < count) {
          dot_pv_all<D, 1>(w + li, scale + li, acc + li, vt_.get(), geo_.acc_vectors, n_groups);
        }
      };
      pv(w_rows_.get(), w_scale, acc_rows_.get(), n_live);
      pv(w_lo_rows, w_scale_lo, acc_lo_rows, n_lo);
    }
  }

  DotGeometry<D> geo_;
  std::size_t lanes_;  // accumulator lanes per query (head_dim padded to whole segments)
  std::size_t max_queries_;
  Scratch<A, std::int32_t> kt_, vt_, q_groups_, weights_;
  Scratch<A> acc_, s_, floats_;
  Scratch<A, DotQuery> queries_;
  Scratch<A, const DotQuery*> live_q_;
  Scratch<A, std::size_t> live_, n_;
  Scratch<A, float*> s_rows_, acc_rows_;
  Scratch<A, const std::int32_t*> w_rows_;
};

}  // namespace kvscope::simd
