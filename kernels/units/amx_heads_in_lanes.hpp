#pragma once
// Attention of many query vectors over one kv head's key range on AMX tiles: int8 caches on
// AMX-INT8, bf16 caches on AMX-BF16. The runner of ComputeUnit::amx_int8 and amx_bf16 (MQA,
// GQA decode, prefill tiles). Include only from kernels/arch/avx512_amx.cpp.
//
// Per pass of up to 64 queries (4 chunks of 16, one accumulator tile each) and per block of
// 64 keys:
//   scores  Sᵀ[16 keys × 16 queries] = K_chunk · Qᵀ: the A tile is 16 cache rows loaded in
//           place (row stride = the cache row), the B tile the queries packed once per pass
//           in 32-bit groups, qᵀ[group][query] (int8: q quantized per query against its
//           absmax, as the VNNI kernels do; bf16: q rounded). int8 sums are exact in int32
//           (s8 × s8), then × sq[query] · k_scale[key]. Sᵀ lands with the queries in the
//           lanes, so the online softmax runs lane-wise as in dot_heads_in_lanes.hpp.
//   P·V     O[16 queries × 16 columns] += P · V: the weights are transposed (16 × 16 blocks)
//           into A tiles, P[query][key] (int8: u8 of p · v_scale against the query's largest
//           in the block; bf16: p rounded); the value rows are interleaved 4 (2) to a 32-bit
//           group, the B layout (interleave_values). Each block's sums join the f32
//           accumulator once: o ← o · e^(m_old − m) + w_scale · (P · V).
// The rounding of queries and weights is the VNNI / AVX512-BF16 kernels' (same tolerances in
// the tests); only the order of sums differs. The softmax stays in f32.
//
// Rows must be whole 4-byte groups (suits()): a tile row cannot end inside a group, and the
// tail of a row reads exactly its bytes (its own tile shape), never the next row.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>

#include "kernels/attention_heads_in_lanes.hpp"
#include "kernels/units/amx_tiles.hpp"
#include "kernels/units/dot_heads_in_lanes.hpp"

namespace kvscope::simd {

template <class A, KvDtype D>
class AmxHeadsInLanes {
  static_assert(D == KvDtype::int8 || D == KvDtype::bf16, "AMX serves int8 and bf16 caches");
  static constexpr std::size_t W = 16;       // queries per tile
  static constexpr std::size_t kChunks = 4;  // query tiles per pass: accumulators tmm0..3
  static constexpr std::size_t L = kChunks * W;
  static constexpr std::size_t kBlock = kDotBlock;  // keys per softmax block
  // Keys per P·V product: int8, a 64-byte A row of u8 weights against 64 interleaved value
  // rows; bf16, 16 keys against 16 value rows read in place (see weighted_values_in_place).
  static constexpr std::size_t kStepKeys = D == KvDtype::int8 ? 64 : 16;
  static constexpr std::size_t kSteps = kBlock / kStepKeys;
  // A tiles per query tile and step: int8 one; bf16 two (the even and the odd columns).
  static constexpr std::size_t kParities = D == KvDtype::int8 ? 1 : 2;
  using Geo = DotGeometry<D>;
  // Tiles, all 16 rows × 64 bytes: 0..3 accumulators; A operands in 4 and 6, B in 5 and 7,
  // alternated so that a load never waits for the product still reading that tile (tiles
  // are not renamed: reusing one tile stalled P·V by a fifth, measured on the Intel Xeon).

 public:
  static bool suits(std::size_t head_dim) { return Geo(head_dim).row_bytes % 4 == 0; }

  explicit AmxHeadsInLanes(std::size_t head_dim)
      : geo_(head_dim),
        positions_(geo_.acc_vectors * 16),
        full_steps_(geo_.row_bytes / 64),
        tail_bytes_(geo_.row_bytes % 64),
        q_groups_(geo_.segments * 16),
        qt_(geo_.segments * 16 * L),
        s_(kBlock * L),
        w_(kBlock * L),
        pt_(kChunks * kSteps * kParities * 16 * 16),
        vt_(D == KvDtype::int8 ? kBlock / Geo::kValueRows * positions_ : 1),
        ot_(L * positions_),
        ct_(4 * 16 * 16),
        k_pad_(16 * geo_.row_bytes / 4 + 16),
        k_tail_(16 * 16),
        v_pad_(16 * 16),
        pads_(2 * kBlock),
        natural_(positions_) {
    for (std::size_t c = 0; c < positions_; ++c) {
      // bf16: column tile 2s + p holds the elements 32s + 2n + p of segment s (n < 16).
      natural_.get()[c] =
          static_cast<std::uint32_t>(D == KvDtype::int8 ? geo_.natural(c / 16, c % 16)
                                                        : c / 32 * 32 + c % 16 * 2 + c / 16 % 2);
    }
    for (int t = 0; t < 8; ++t) config_.set(t, 16, 64);
  }

  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count) {
    TileScope tiles(config_);
    for (std::size_t first = 0; first < count; first += L) {
      const std::size_t lanes = count - first < L ? count - first : L;
      switch ((lanes + W - 1) / W) {
        case 1:
          run_pass<1>(kv, kvh, t0, t1, st + first, lanes);
          break;
        case 2:
          run_pass<2>(kv, kvh, t0, t1, st + first, lanes);
          break;
        case 3:
          run_pass<3>(kv, kvh, t0, t1, st + first, lanes);
          break;
        default:
          run_pass<4>(kv, kvh, t0, t1, st + first, lanes);
      }
    }
  }

 private:
  static constexpr float kInf = std::numeric_limits<float>::infinity();

  template <int C, int TA, int TB>
  static void dp_scores() {
    if constexpr (D == KvDtype::int8) {
      tile_dp_s8s8<C, TA, TB>();
    } else {
      tile_dp_bf16<C, TA, TB>();
    }
  }

  template <int QC>
  void run_pass(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
                std::size_t lanes) {
    constexpr std::size_t LQ = QC * W;  // the row stride of qᵀ and sᵀ
    std::int32_t* qt = qt_.get();
    float* ot = ot_.get();
    alignas(64) float sq[L], m_io[L], l_io[L], visible[L];
    DotQuery q;
    q.groups = q_groups_.get();
    FirstBlockPrefetch first(kv, kvh, t0, t1, kBlock);  // while the queries are packed
    for (std::size_t i = 0; i < QC * W; ++i) {
      for (int x = 0; x < 8; ++x) first.next();
      const bool live = i < lanes;
      if (live) {
        pack_query<D>(st[i].q, geo_, q);
      } else {
        std::memset(q.groups, 0, geo_.segments * 64);
        q.scale = 0.0f;
      }
      for (std::size_t g = 0; g < geo_.segments * 16; ++g) qt[g * LQ + i] = q.groups[g];
      sq[i] = q.scale;
      // A state that has seen no key yet (m = −inf: every new work item) holds acc = 0.
      float* o = ot + i * positions_;
      if (live && st[i].m != -kInf) {
        copy_groups(st[i].acc, o, /*to_tiles=*/true);
      } else {
        std::memset(o, 0, positions_ * sizeof(float));
      }
      m_io[i] = live ? st[i].m : -kInf;
      l_io[i] = live ? st[i].l : 0.0f;
    }
    first.rest();
    __m512 m[QC], l[QC];
    for (int v = 0; v < QC; ++v) {
      m[v] = _mm512_load_ps(m_io + v * W);
      l[v] = _mm512_load_ps(l_io + v * W);
    }

    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.block_rows(b0, t1, kBlock);
      const std::size_t rows = lane_visible_rows(st, lanes, QC * W, b0, nb, visible);
      if (rows == 0) continue;
      const NextBlock next(kv, kvh, b0, nb, t1, kBlock);
      const float *k_scale = nullptr, *v_scale = nullptr;
      if constexpr (D == KvDtype::int8) {
        block_scales<A>(kv, kvh, b0, nb, kBlock, pads_.get(), pads_.get() + kBlock, k_scale,
                        v_scale);
      }
      scores<QC>(kv.k_row(kvh, b0), rows);
      alignas(64) float correction[L], w_scale[L];
      // The next block's keys, spread evenly over the softmax's row steps (a burst at the end
      // stalled on the miss buffers: 11% of a warm MQA step).
      // bf16 reads its values in place: their next block is prefetched here too.
      const std::size_t next_bytes = next.rows * geo_.row_bytes;
      LinePrefetcher pf(next.k, next_bytes),
          pf_v(D == KvDtype::bf16 ? next.v : nullptr, next_bytes);
      const std::size_t per_row =
          (pf.lines_left() + pf_v.lines_left() + QC * rows - 1) / (QC * rows);
      softmax<QC>(rows, visible, sq, k_scale, v_scale, m, l, correction, w_scale, pf, pf_v,
                  per_row);
      pf.rest(), pf_v.rest();
      const std::size_t steps = (rows + kStepKeys - 1) / kStepKeys;
      transpose_weights<QC>(rows, steps);
      if constexpr (D == KvDtype::int8) {
        // Rows past the visible ones go in as zeros (their weights are 0).
        interleave_values<D>(kv.v_row(kvh, b0), rows, steps * kStepKeys, geo_, vt_.get(), next.v,
                             next.rows);
        weighted_values<QC>(steps, correction, w_scale);
      } else {
        weighted_values_in_place<QC>(kv.v_row(kvh, b0), rows, steps, correction);
      }
    }

    for (int v = 0; v < QC; ++v) {
      _mm512_store_ps(m_io + v * W, m[v]);
      _mm512_store_ps(l_io + v * W, l[v]);
    }
    for (std::size_t i = 0; i < lanes; ++i) {
      copy_groups(st[i].acc, ot + i * positions_, /*to_tiles=*/false);
      st[i].m = m_io[i];
      st[i].l = l_io[i];
    }
  }

  // acc (natural order, d elements) to or from one query's accumulator row in tile order.
  // The tile order keeps 4 consecutive elements together (DotGeometry::natural), so groups
  // move 16 bytes at a time; positions past d are padding (0 in the tiles).
  void copy_groups(float* acc, float* tiles, bool to_tiles) const {
    const std::size_t d = geo_.d;
    if constexpr (D == KvDtype::bf16) return copy_pairs(acc, tiles, to_tiles);
    for (std::size_t c = 0; c < positions_; c += 4) {
      const std::uint32_t j = natural_.get()[c];
      if (j + 4 <= d) {
        if (to_tiles) {
          _mm_store_ps(tiles + c, _mm_loadu_ps(acc + j));
        } else {
          _mm_storeu_ps(acc + j, _mm_load_ps(tiles + c));
        }
        continue;
      }
      for (std::size_t m = 0; m < 4; ++m) {
        if (to_tiles) {
          tiles[c + m] = j + m < d ? acc[j + m] : 0.0f;
        } else if (j + m < d) {
          acc[j + m] = tiles[c + m];
        }
      }
    }
  }

  // bf16: 32 elements of a segment to or from its two column tiles, even elements first.
  void copy_pairs(float* acc, float* tiles, bool to_tiles) const {
    const std::size_t d = geo_.d;
    alignas(64) static constexpr std::int32_t kSplit[2][16] = {
        {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30},
        {1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}};
    alignas(64) static constexpr std::int32_t kJoin[2][16] = {
        {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23},
        {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}};
    for (std::size_t j = 0; j < positions_; j += 32) {
      const __mmask16 lo = lanes_below(d, j), hi = lanes_below(d, j + 16);
      float* t = tiles + j;
      if (to_tiles) {
        const __m512 a = _mm512_maskz_loadu_ps(lo, acc + j);
        const __m512 b = _mm512_maskz_loadu_ps(hi, acc + j + 16);
        _mm512_store_ps(t, _mm512_permutex2var_ps(a, _mm512_load_si512(kSplit[0]), b));
        _mm512_store_ps(t + 16, _mm512_permutex2var_ps(a, _mm512_load_si512(kSplit[1]), b));
      } else {
        const __m512 even = _mm512_load_ps(t), odd = _mm512_load_ps(t + 16);
        _mm512_mask_storeu_ps(acc + j, lo,
                              _mm512_permutex2var_ps(even, _mm512_load_si512(kJoin[0]), odd));
        _mm512_mask_storeu_ps(acc + j + 16, hi,
                              _mm512_permutex2var_ps(even, _mm512_load_si512(kJoin[1]), odd));
      }
    }
  }

  // sᵀ[t][lane] for key rows t < rows of the block at k (int8: the int32 sums, bit for bit in
  // the float slots; bf16: f32 scores), 16 rows at a time. A row's last bytes short of a
  // 64-byte step are copied into a zero-padded tile (the query groups past it are 0).
  template <int QC>
  void scores(const std::byte* k, std::size_t rows) {
    constexpr std::size_t LQ = QC * W;  // the row stride of qᵀ and sᵀ
    const std::size_t row_bytes = geo_.row_bytes;
    const std::int32_t* qt = qt_.get();
    const auto step = [&]<int TA>(std::size_t ks, const void* a, std::size_t stride) {
      tile_load<TA>(a, stride);
      for_tiles<QC>([&](auto c) {
        constexpr int TB = c % 2 == 0 ? 5 : 7;
        tile_load<TB>(qt + ks * 16 * LQ + c * W, LQ * 4);
        dp_scores<c, TA, TB>();
      });
    };
    for (std::size_t r0 = 0; r0 < rows; r0 += 16) {
      const std::byte* a = k + r0 * row_bytes;
      const std::size_t n = rows - r0 < 16 ? rows - r0 : 16;
      if (n < 16) {  // a short chunk: its rows, then zeros (never rows past the block)
        auto* pad = reinterpret_cast<std::byte*>(k_pad_.get());
        std::memcpy(pad, a, n * row_bytes);
        std::memset(pad + n * row_bytes, 0, (16 - n) * row_bytes);
        a = pad;
      }
      for_tiles<QC>([](auto c) { tile_zero<c>(); });
      std::size_t ks = 0;
      for (; ks + 2 <= full_steps_; ks += 2) {
        step.template operator()<4>(ks, a + ks * 64, row_bytes);
        step.template operator()<6>(ks + 1, a + (ks + 1) * 64, row_bytes);
      }
      if (ks < full_steps_) step.template operator()<4>(ks, a + ks * 64, row_bytes), ++ks;
      if (tail_bytes_) {
        auto* tail = reinterpret_cast<std::uint8_t*>(k_tail_.get());
        const __mmask64 bytes = (__mmask64{1} << tail_bytes_) - 1;
        for (std::size_t r = 0; r < 16; ++r) {
          _mm512_store_si512(tail + r * 64,
                             _mm512_maskz_loadu_epi8(bytes, a + r * row_bytes + ks * 64));
        }
        step.template operator()<6>(ks, tail, 64);
      }
      float* s = s_.get() + r0 * LQ;
      for_tiles<QC>([&](auto c) { tile_store<c>(s + c * W, LQ * 4); });
    }
  }

  // Online softmax per lane over the block's rows [0, rows) of sᵀ (lanes see `visible` rows),
  // into wᵀ (same layout): bf16 e^(s − m); int8 e^(s − m) · v_scale quantized to 0…255
  // against the lane's largest, as int32. correction: e^(m_old − m) per lane; w_scale: the
  // factor back from the unit's sums (int8: w_max / 255, 0 for a lane with no weight; bf16:
  // 1). pf, then pf_v, take per_row lines per row step.
  //
  // One pass where every lane has a running maximum: the weights are taken against it while
  // the block's maximum is found; m moves only when a score passes it by more than kSlack
  // (then the pass is redone against the new maximum). Weights up to e^kSlack are harmless
  // in f32 sums and in either rounding (relative), and the result is the same softmax: m is
  // only the reference both sums share. Two passes (maximum, then weights) on a lane's first
  // block. Measured on AMX prefill: the maximum pass alone was 8% of the time.
  template <int QC>
  void softmax(std::size_t rows, const float* visible, const float* sq, const float* k_scale,
               const float* v_scale, __m512* m, __m512* l, float* correction, float* w_scale,
               LinePrefetcher& pf, LinePrefetcher& pf_v, std::size_t per_row) {
    constexpr std::size_t LQ = QC * W;  // the row stride of qᵀ, sᵀ and wᵀ
    constexpr float kSlack = 8.0f;
    const float* s = s_.get();
    float* wt = w_.get();
    for (int v = 0; v < QC; ++v) {
      const __m512 vis = _mm512_load_ps(visible + v * W);
      const __mmask16 all_rows =
          _mm512_cmp_ps_mask(_mm512_set1_ps(static_cast<float>(rows)), vis, _CMP_LE_OQ);
      const auto seen = [&](std::size_t r) {
        return all_rows == 0xffff
                   ? __mmask16(0xffff)
                   : _mm512_cmp_ps_mask(_mm512_set1_ps(static_cast<float>(r)), vis, _CMP_LT_OQ);
      };
      const auto score = [&](std::size_t r) {
        const float* x = s + r * LQ + v * W;
        if constexpr (D == KvDtype::int8) {
          const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(x));
          return _mm512_mul_ps(_mm512_mul_ps(dot, _mm512_load_ps(sq + v * W)),
                               _mm512_set1_ps(k_scale[r]));
        } else {
          return _mm512_load_ps(x);
        }
      };
      __m512 sum, w_max, block_max;
      // Weights against `base` (lanes in `finite`); the block's maximum on the way.
      const auto weigh = [&](__m512 base, __mmask16 finite) {
        sum = _mm512_setzero_ps(), w_max = _mm512_setzero_ps();
        block_max = _mm512_set1_ps(-kInf);
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t i = 0; i < per_row; ++i) pf.lines_left() ? pf.next() : pf_v.next();
          const __m512 x = score(r);
          const __mmask16 keep = seen(r);
          block_max = _mm512_mask_max_ps(block_max, keep, block_max, x);
          const __m512 p = exp_nonpositive(_mm512_sub_ps(x, base), keep & finite);
          sum = _mm512_add_ps(sum, p);
          float* w = wt + r * LQ + v * W;
          if constexpr (D == KvDtype::int8) {
            const __m512 pv = _mm512_mul_ps(p, _mm512_set1_ps(v_scale[r]));
            _mm512_store_ps(w, pv);
            w_max = _mm512_max_ps(w_max, pv);
          } else {
            _mm512_store_ps(w, p);
          }
        }
      };
      const __m512 neg_inf = _mm512_set1_ps(-kInf);
      __m512 m_new = m[v];
      bool redo = true;
      if (_mm512_cmp_ps_mask(m[v], neg_inf, _CMP_EQ_OQ) == 0) {  // every lane has a maximum
        weigh(m[v], 0xffff);
        redo = _mm512_cmp_ps_mask(block_max, _mm512_add_ps(m[v], _mm512_set1_ps(kSlack)),
                                  _CMP_GT_OQ) != 0;
      } else {
        block_max = neg_inf;
        for (std::size_t r = 0; r < rows; ++r) {
          block_max = _mm512_mask_max_ps(block_max, seen(r), block_max, score(r));
        }
      }
      __m512 corr = _mm512_set1_ps(1.0f);
      if (redo) {
        m_new = _mm512_max_ps(m[v], block_max);
        // A lane that has seen no key keeps m = −inf: its weights are masked to 0.
        const __mmask16 finite = _mm512_cmp_ps_mask(m_new, neg_inf, _CMP_NEQ_OQ);
        const __m512 base = _mm512_maskz_mov_ps(finite, m_new);
        corr = exp_nonpositive(_mm512_sub_ps(m[v], base), finite);
        weigh(base, finite);
      }
      m[v] = m_new;
      l[v] = _mm512_fmadd_ps(l[v], corr, sum);
      _mm512_store_ps(correction + v * W, corr);
      if constexpr (D == KvDtype::int8) {
        const __mmask16 some = _mm512_cmp_ps_mask(w_max, _mm512_setzero_ps(), _CMP_GT_OQ);
        const __m512 inv = _mm512_maskz_div_ps(some, _mm512_set1_ps(255.0f), w_max);
        _mm512_store_ps(w_scale + v * W, _mm512_mul_ps(w_max, _mm512_set1_ps(1.0f / 255.0f)));
        for (std::size_t r = 0; r < rows; ++r) {
          float* w = wt + r * LQ + v * W;
          _mm512_store_si512(w, _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(w), inv)));
        }
      } else {
        _mm512_store_ps(w_scale + v * W, _mm512_set1_ps(1.0f));
      }
    }
  }

  // The weights of rows [0, rows) into the A tiles of P·V, a row per query: 16 × 16 blocks
  // of wᵀ transposed. int8: pt[chunk][step][query][64 u8]. bf16: pt[chunk][step][parity]
  // [query][16 pairs], each weight rounded to bf16 (nearest even) and paired with a 0 — first
  // (parity 0: the product picks each value pair's even column) or second (parity 1, odd).
  // Keys from `rows` to the end of the last step weigh 0.
  template <int QC>
  void transpose_weights(std::size_t rows, std::size_t steps) {
    constexpr std::size_t LQ = QC * W;                // the row stride of wᵀ
    constexpr std::size_t kPerStep = kStepKeys / 16;  // 16-key blocks per A row
    const float* s = w_.get();
    auto* pt = reinterpret_cast<std::uint8_t*>(pt_.get());
    for (int c = 0; c < QC; ++c) {
      for (std::size_t kb = 0; kb < steps * kPerStep; ++kb) {
        __m512i r[16];
        for (std::size_t i = 0; i < 16; ++i) {
          const std::size_t t = kb * 16 + i;
          r[i] = t < rows ? _mm512_load_si512(s + t * LQ + c * W) : _mm512_setzero_si512();
        }
        transpose16x16_epi32(r);
        std::uint8_t* tile = pt + (c * kSteps + kb / kPerStep) * kParities * 1024;
        for (std::size_t i = 0; i < 16; ++i) {
          if constexpr (D == KvDtype::int8) {
            const std::size_t at = kb % kPerStep * 16;  // this block's bytes in a row
            _mm_store_si128(reinterpret_cast<__m128i*>(tile + i * 64 + at),
                            _mm512_cvtepi32_epi8(r[i]));
          } else {
            const __m512i even =
                _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(r[i])));
            _mm512_store_si512(tile + i * 64, even);
            _mm512_store_si512(tile + 1024 + i * 64, _mm512_slli_epi32(even, 16));
          }
        }
      }
    }
  }

  // bf16: o ← o · correction + Σ_t w_t · v_t with the value rows read in place as B tiles
  // (16 rows × 64 bytes: 16 pairs of columns per row). A tdpbf16ps sums each column pair
  // against a pair of A elements; with (w, 0) it takes the pair's even column, with (0, w)
  // its odd one, so two products per 16 keys replace the interleaving of value rows into
  // pairs (measured on the Intel Xeon: the interleave was a fifth of an MQA step, the extra
  // products cost less than half that). Rows past `rows` and bytes past a row's end come
  // from a zero-padded copy (0 · NaN is NaN). Accumulator tile (q, s, p) holds columns
  // 32s + 2n + p of query tile q; it is loaded from o and stored back.
  template <int QC>
  void weighted_values_in_place(const std::byte* v, std::size_t rows, std::size_t steps,
                                const float* correction) {
    rescale_rows<QC>(correction);
    const std::size_t row_bytes = geo_.row_bytes;
    for (std::size_t c0 = 0; c0 < QC * W; c0 += 2 * W) {
      const bool two = QC * W - c0 > W;
      for (std::size_t seg = 0; seg < geo_.segments; ++seg) {
        if (two) {
          value_pairs<2>(v, rows, steps, row_bytes, c0, seg);
        } else {
          value_pairs<1>(v, rows, steps, row_bytes, c0, seg);
        }
      }
    }
  }

  template <int QT>
  void value_pairs(const std::byte* v, std::size_t rows, std::size_t steps, std::size_t row_bytes,
                   std::size_t c0, std::size_t seg) {
    const auto* pt = reinterpret_cast<const std::uint8_t*>(pt_.get());
    float* ot = ot_.get();
    const std::size_t o_stride = positions_ * 4;
    // Tile (q, p) in tmm(2p + q): query tile c0/16 + q, columns of parity p.
    const auto acc = [&](int q, int p) {
      return ot + (c0 + q * W) * positions_ + (2 * seg + p) * 16;
    };
    for_tiles<4>([&](auto t) {
      if (t % 2 < QT) tile_load<t>(acc(t % 2, t / 2), o_stride);
    });
    const std::size_t seg_bytes = row_bytes - seg * 64 < 64 ? row_bytes - seg * 64 : 64;
    const auto step = [&]<int TB>(std::size_t ks) {
      const std::size_t n = rows - ks * 16 < 16 ? rows - ks * 16 : 16;
      const std::byte* b = v + ks * 16 * row_bytes + seg * 64;
      std::size_t stride = row_bytes;
      if (n < 16 || seg_bytes < 64) {
        auto* pad = reinterpret_cast<std::byte*>(v_pad_.get());
        const __mmask64 bytes = seg_bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << seg_bytes) - 1;
        for (std::size_t r = 0; r < 16; ++r) {
          _mm512_store_si512(pad + r * 64, r < n ? _mm512_maskz_loadu_epi8(bytes, b + r * row_bytes)
                                                 : _mm512_setzero_si512());
        }
        b = pad, stride = 64;
      }
      tile_load<TB>(b, stride);
      for_tiles<QT>([&](auto q) {
        const std::uint8_t* a = pt + ((c0 / W + q) * kSteps + ks) * 2 * 1024;
        tile_load<4>(a, 64);
        tile_dp_bf16<q, 4, TB>();
        tile_load<6>(a + 1024, 64);
        tile_dp_bf16<q + 2, 6, TB>();
      });
    };
    std::size_t ks = 0;
    for (; ks + 2 <= steps; ks += 2) {
      step.template operator()<5>(ks);
      step.template operator()<7>(ks + 1);
    }
    if (ks < steps) step.template operator()<5>(ks);
    for_tiles<4>([&](auto t) {
      if (t % 2 < QT) tile_store<t>(acc(t % 2, t / 2), o_stride);
    });
  }

  // o rows × their correction where the row's maximum moved (bf16: sums go straight into o).
  template <int QC>
  void rescale_rows(const float* correction) {
    float* ot = ot_.get();
    for (std::size_t i = 0; i < QC * W; ++i) {
      if (correction[i] == 1.0f) continue;
      const __m512 c = _mm512_set1_ps(correction[i]);
      float* o = ot + i * positions_;
      for (std::size_t j = 0; j < positions_; j += 16) {
        _mm512_store_ps(o + j, _mm512_mul_ps(_mm512_load_ps(o + j), c));
      }
    }
  }

  // int8: o ← o · correction + w_scale · Σ_steps P · V for all QC query tiles, two query
  // tiles × two column tiles (16 accumulator positions each) at a time; each block summed
  // from 0 in int32 and scaled once.
  template <int QC>
  void weighted_values(std::size_t steps, const float* correction, const float* w_scale) {
    for (std::size_t c0 = 0; c0 < QC * W; c0 += 2 * W) {
      for (std::size_t v = 0; v < geo_.acc_vectors; v += 2) {
        if (QC * W - c0 > W) {
          value_tiles<2>(c0, v, steps, correction, w_scale);
        } else {
          value_tiles<1>(c0, v, steps, correction, w_scale);
        }
      }
    }
  }

  // The accumulator tiles of query tiles q < QT from query c0 on × column tiles v, v + 1 (v + 1
  // only where it exists), tile (q, c) in tmm(2c + q).
  template <int QT>
  void value_tiles(std::size_t c0, std::size_t v, std::size_t steps, const float* correction,
                   const float* w_scale) {
    const auto* pt = reinterpret_cast<const std::uint8_t*>(pt_.get());
    const std::size_t vt_stride = geo_.acc_vectors * 64;  // bytes between row groups
    const bool two = v + 1 < geo_.acc_vectors;
    float* ot = ot_.get();
    float* ct = ct_.get();

    const auto acc = [&](int q, int c) { return ot + (c0 + q * W) * positions_ + (v + c) * 16; };
    for_tiles<4>([&](auto t) {
      constexpr int q = t % 2, c = t / 2;
      if (q < QT && (c == 0 || two)) tile_zero<t>();
    });
    const std::size_t c_first = c0 / W;
    for (std::size_t ks = 0; ks < steps; ++ks) {
      const std::int32_t* b = vt_.get() + ks * 16 * geo_.acc_vectors * 16;
      tile_load<5>(b + v * 16, vt_stride);
      if (two) tile_load<7>(b + (v + 1) * 16, vt_stride);
      for_tiles<QT>([&](auto q) {
        constexpr int TA = q == 0 ? 4 : 6;
        tile_load<TA>(pt + ((c_first + q) * kSteps + ks) * 1024, 64);
        tile_dp_u8s8<q, TA, 5>();
        if (two) tile_dp_u8s8<q + 2, TA, 7>();
      });
    }
    for_tiles<4>([&](auto t) {
      constexpr int q = t % 2, c = t / 2;
      if (q >= QT || (c == 1 && !two)) return;
      {
        tile_store<t>(ct + t * 256, 64);
        for (std::size_t r = 0; r < 16; ++r) {
          const std::size_t i = c0 + q * W + r;
          float* o = acc(q, c) + r * positions_;
          const __m512 total = _mm512_cvtepi32_ps(_mm512_load_si512(ct + t * 256 + r * 16));
          _mm512_store_ps(
              o, _mm512_fmadd_ps(total, _mm512_set1_ps(w_scale[i]),
                                 _mm512_mul_ps(_mm512_load_ps(o), _mm512_set1_ps(correction[i]))));
        }
      }
    });
  }

  Geo geo_;
  std::size_t positions_;   // accumulator positions per query (head_dim padded, tile order)
  std::size_t full_steps_;  // whole 64-byte steps of a key row
  std::size_t tail_bytes_;  // the rest of the row (a multiple of 4)
  TileConfig config_;
  Scratch<A, std::int32_t> q_groups_, qt_;
  Scratch<A> s_, w_;  // sᵀ and wᵀ: scores and weights, [key][query]
  Scratch<A, std::int32_t> pt_, vt_;
  Scratch<A> ot_, ct_;
  Scratch<A, std::int32_t> k_pad_, k_tail_, v_pad_;
  Scratch<A> pads_;
  Scratch<A, std::uint32_t> natural_;  // as DotHeadsInLanes::natural_
};

// The AMX units' runner: the tiles where the rows allow, else the dot unit of the same type
// (VNNI for int8, AVX512-BF16 for bf16), which attention_compute_unit() never names for AMX
// shapes it cannot serve: the fallback keeps a direct call correct.
template <class A, KvDtype D>
struct AmxRunner {
  AmxRunner(std::size_t head_dim, std::size_t max_queries) : other(head_dim, max_queries) {
    if (AmxHeadsInLanes<A, D>::suits(head_dim)) tiles.emplace(head_dim);
  }
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t nv, bool direct, const DecodeScratch<A>& ws) {
    if (tiles) return tiles->run(kv, kvh, t0, t1, st, count);
    other.run(kv, kvh, t0, t1, st, count, nv, direct, ws);
  }
  std::optional<AmxHeadsInLanes<A, D>> tiles;
  DotUnitRunner<A, D> other;
};
template <class A>
struct KeyRunner<A, KvDtype::int8, ComputeUnit::amx_int8> : AmxRunner<A, KvDtype::int8> {
  using AmxRunner<A, KvDtype::int8>::AmxRunner;
};
template <class A>
struct KeyRunner<A, KvDtype::bf16, ComputeUnit::amx_bf16> : AmxRunner<A, KvDtype::bf16> {
  using AmxRunner<A, KvDtype::bf16>::AmxRunner;
};

}  // namespace kvscope::simd
