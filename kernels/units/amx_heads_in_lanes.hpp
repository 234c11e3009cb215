#pragma once
// Attention of many query vectors over one kv head's key range on AMX tiles: int8 caches on
// AMX-INT8, bf16 caches on AMX-BF16, f16 caches on AMX-BF16 as hi and lo bf16 parts
// (amx_f16_split.hpp). The runner of ComputeUnit::amx_int8 and amx_bf16 (MQA, GQA decode,
// prefill tiles). Include only from kernels/arch/avx512_amx.cpp.
//
// Per pass of up to 64 queries (4 chunks of 16, one accumulator tile each) and per softmax
// block (64 keys for int8, 128 for bf16 and f16, AmxValues::kBlock):
//   scores  Sᵀ[16 keys × 16 queries] = K_chunk · Qᵀ: the A tile is 16 cache rows loaded in
//           place (row stride = the cache row), the B tile the queries packed once per pass
//           in 32-bit groups, qᵀ[group][query] (int8: q quantized per query against its
//           absmax, as the VNNI kernels do; bf16: q rounded; f16: the block's rows and q
//           split into hi and lo, three products a step). int8 sums are exact in int32
//           (s8 × s8), then × sq[query] · k_scale[key]. Sᵀ lands with the queries in the
//           lanes, so the online softmax runs lane-wise as in dot_heads_in_lanes.hpp.
//   P·V     O[16 queries × 16 columns] += P · V on the tiles (amx_values.hpp): the weights
//           transposed into A tiles, a row per query (int8: u8 of p · v_scale against the
//           query's largest in the block; bf16: p rounded).
// The rounding of queries and weights is the VNNI / AVX512-BF16 kernels' (same tolerances in
// the tests); only the order of sums differs. The softmax stays in f32.
//
// Rows must be whole 4-byte groups (suits()): a tile row cannot end inside a group. A row's
// last bytes short of a 64-byte step, and a block's last rows short of 16, are read through
// zero-padded copies, never past the row or the block.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>

#include "kernels/attention_heads_in_lanes.hpp"
#include "kernels/units/amx_tiles.hpp"
#include "kernels/units/amx_values.hpp"
#include "kernels/units/dot_heads_in_lanes.hpp"

namespace kvscope::simd {

template <class A, KvDtype D>
class AmxHeadsInLanes {
  static_assert(D == KvDtype::int8 || D == KvDtype::bf16 || D == KvDtype::f16,
                "AMX serves int8, bf16 and f16 caches");
  using Values = AmxValues<A, D>;
  static constexpr bool kSplit = D == KvDtype::f16;
  // Queries per tile, query tiles per pass (accumulators tmm0..3), queries per pass, keys per
  // softmax block: P·V's, so that both halves agree.
  static constexpr std::size_t W = Values::W, kChunks = Values::kChunks, L = Values::L,
                               kBlock = Values::kBlock;
  using Geo = DotGeometry<D>;
  // Tiles, all 16 rows × 64 bytes: 0..3 accumulators; A operands in 4 and 6, B in 5 and 7,
  // alternated so that a load never waits for the product still reading that tile (tiles
  // are not renamed: reusing one tile stalled P·V by a fifth, measured on the Intel Xeon).

 public:
  // f16 rows are split into zero-padded copies, so any head_dim suits them.
  static bool suits(std::size_t head_dim) { return kSplit || Geo(head_dim).row_bytes % 4 == 0; }

  // prefill: bf16 and f16 interleave each kv head's value rows once (AmxValues::pairs).
  AmxHeadsInLanes(std::size_t head_dim, bool prefill)
      : geo_(head_dim),
        values_(head_dim, prefill),
        full_steps_(geo_.row_bytes / 64),
        tail_bytes_(geo_.row_bytes % 64),
        q_groups_(geo_.segments * 16),
        qt_(geo_.segments * 16 * L),
        q_lo_groups_(kSplit ? geo_.segments * 16 : 1),
        qt_lo_(kSplit ? geo_.segments * 16 * L : 1),
        k_split_(kSplit ? 2 * kBlock * geo_.segments * 16 : 1),
        s_(kBlock * L),
        w_(kBlock * L),
        k_pad_(16 * geo_.row_bytes / 4 + 16),
        k_tail_(16 * 16),
        pads_(2 * kBlock) {
    for (int t = 0; t < 8; ++t) config_.set(t, 16, 64);
  }

  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count) {
    TileScope tiles(config_);
    if (values_.pairs()) values_.prepare_pairs(kv, kvh, t1);
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
    std::int32_t* qt_lo = qt_lo_.get();
    alignas(64) float sq[L], m_io[L], l_io[L], visible[L];
    DotQuery q;
    q.groups = q_groups_.get();
    std::int32_t* q_lo = q_lo_groups_.get();
    FirstBlockPrefetch first(kv, kvh, t0, t1, kBlock);  // while the queries are packed
    for (std::size_t i = 0; i < QC * W; ++i) {
      for (int x = 0; x < 8; ++x) first.next();
      const bool live = i < lanes;
      if (live && kSplit) {
        split_query(st[i].q, geo_.d, geo_.segments * 32, reinterpret_cast<std::uint16_t*>(q.groups),
                    reinterpret_cast<std::uint16_t*>(q_lo));
        q.scale = 1.0f;
      } else if (live) {
        pack_query<D>(st[i].q, geo_, q);
      } else {
        std::memset(q.groups, 0, geo_.segments * 64);
        if (kSplit) std::memset(q_lo, 0, geo_.segments * 64);
        q.scale = 0.0f;
      }
      for (std::size_t g = 0; g < geo_.segments * 16; ++g) qt[g * LQ + i] = q.groups[g];
      if (kSplit) {
        for (std::size_t g = 0; g < geo_.segments * 16; ++g) qt_lo[g * LQ + i] = q_lo[g];
      }
      sq[i] = q.scale;
      // A state that has seen no key yet (m = −inf: every new work item) holds acc = 0.
      values_.load(i, live && st[i].m != -kInf ? st[i].acc : nullptr);
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
      nb = kv.chunked_block_rows(b0, t1, kBlock);  // across pages of 16 too
      const std::size_t rows = lane_visible_rows(st, lanes, QC * W, b0, nb, visible);
      if (rows == 0) continue;
      const std::size_t next_rows = kv.chunked_block_rows(b0 + nb, t1, kBlock);
      const float *k_scale = nullptr, *v_scale = nullptr;
      if constexpr (D == KvDtype::int8) {
        block_scales<A>(kv, kvh, b0, nb, kBlock, pads_.get(), pads_.get() + kBlock, k_scale,
                        v_scale);
      }
      // The next block's keys (and bf16's and f16's values where read in place, not as
      // prepared pairs; int8 interleaves its values and requests them then) over the scores,
      // the softmax and P·V, about as their times.
      const bool pairs = values_.pairs() && b0 % 2 == 0;
      PhasedPrefetcher pf = next_block_prefetcher(kv, kvh, b0 + nb, next_rows, !pairs);
      const BlockRows k = kv.k_block(kvh, b0, nb);
      if constexpr (kSplit) {
        pf.phase(0.2, (rows + 15) / 16 * geo_.segments);
        scores_split<QC>(k, rows, pf);
      } else {
        pf.phase(0.2, (rows + 15) / 16 * (full_steps_ + (tail_bytes_ ? 1 : 0)));
        scores<QC>(k, rows, pf);
      }
      alignas(64) float correction[L], w_scale[L];
      pf.phase(0.35, QC * rows);
      softmax<QC>(rows, visible, sq, k_scale, v_scale, m, l, correction, w_scale, pf);
      // int8 requests the next block's values as it interleaves this block's.
      const BlockRows next_v =
          D == KvDtype::int8 ? kv.v_block(kvh, b0 + nb, next_rows) : BlockRows{};
      if (pairs) {
        values_.template add_block_pairs<QC>(w_.get(), b0, rows, correction, pf);
      } else {
        values_.template add_block<QC>(w_.get(), kv.v_block(kvh, b0, nb), rows, correction, w_scale,
                                       next_v, next_rows, pf);
      }
      pf.rest();
    }

    for (int v = 0; v < QC; ++v) {
      _mm512_store_ps(m_io + v * W, m[v]);
      _mm512_store_ps(l_io + v * W, l[v]);
    }
    for (std::size_t i = 0; i < lanes; ++i) {
      values_.store(i, st[i].acc);
      st[i].m = m_io[i];
      st[i].l = l_io[i];
    }
  }

  // The next block's keys (and, with read_values, its values) to request over this block's
  // work. A block across pages: its first chunk's rows so, the others' requested now, at once
  // (a list of ranges in PhasedPrefetcher made every contiguous step slower).
  static PhasedPrefetcher next_block_prefetcher(const KvView& kv, std::size_t kvh, std::size_t pos,
                                                std::size_t rows, bool read_values) {
    // int8 requests its values as it interleaves them; value pairs are interleaved already.
    const bool values = D != KvDtype::int8 && read_values;
    std::size_t spread = rows;
    if (kv.spans_pages(pos, rows)) {
      spread = BlockRows::kChunkRows;  // chunked_block_rows: pos starts a chunk of its page
      for (std::size_t r = spread; r < rows; r += BlockRows::kChunkRows) {
        const std::size_t n = rows - r < 16 ? rows - r : 16;
        LinePrefetcher(kv.k_row(kvh, pos + r), n * kv.k_row_bytes()).rest();
        if (values) LinePrefetcher(kv.v_row(kvh, pos + r), n * kv.v_row_bytes()).rest();
      }
    }
    return PhasedPrefetcher(rows ? kv.k_row(kvh, pos) : nullptr,
                            rows && values ? kv.v_row(kvh, pos) : nullptr,
                            (spread < rows ? spread : rows) * kv.k_row_bytes());
  }

  // sᵀ[t][lane] for key rows t < rows of the block k (int8: the int32 sums, bit for bit in
  // the float slots; bf16: f32 scores), 16 rows at a time. A row's last bytes short of a
  // 64-byte step are copied into a zero-padded tile (the query groups past it are 0).
  template <int QC>
  void scores(const BlockRows& k, std::size_t rows, PhasedPrefetcher& pf) {
    constexpr std::size_t LQ = QC * W;  // the row stride of qᵀ and sᵀ
    const std::size_t row_bytes = geo_.row_bytes;
    const std::int32_t* qt = qt_.get();
    const auto step = [&]<int TA>(std::size_t ks, const void* a, std::size_t stride) {
      pf.step();
      tile_load<TA>(a, stride);
      for_tiles<QC>([&](auto c) {
        constexpr int TB = c % 2 == 0 ? 5 : 7;
        tile_load<TB>(qt + ks * 16 * LQ + c * W, LQ * 4);
        dp_scores<c, TA, TB>();
      });
    };
    for (std::size_t r0 = 0; r0 < rows; r0 += 16) {
      const std::byte* a = k.chunk[r0 / 16];
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

  // f16: the block's key rows [0, rows) split into hi and lo bf16 rows (zero to the next 16),
  // then sᵀ as scores() computes it, from three products per step: K_hi · q_hi, K_lo · q_hi,
  // K_hi · q_lo. Tiles: K_hi in 4, K_lo in 6, q_hi in 5, q_lo in 7.
  template <int QC>
  void scores_split(const BlockRows& k, std::size_t rows, PhasedPrefetcher& pf) {
    constexpr std::size_t LQ = QC * W;  // the row stride of qᵀ and sᵀ
    const std::size_t stride = geo_.segments * 64;
    const std::size_t padded = (rows + 15) / 16 * 16;
    auto* k_hi = reinterpret_cast<std::byte*>(k_split_.get());
    std::byte* k_lo = k_hi + kBlock * stride;
    split_f16_block(k, rows, padded, stride, k_hi, k_lo);
    const std::int32_t* qt = qt_.get();
    const std::int32_t* qt_lo = qt_lo_.get();
    for (std::size_t r0 = 0; r0 < rows; r0 += 16) {
      for_tiles<QC>([](auto c) { tile_zero<c>(); });
      for (std::size_t ks = 0; ks < geo_.segments; ++ks) {
        pf.step();
        tile_load<4>(k_hi + r0 * stride + ks * 64, stride);
        tile_load<6>(k_lo + r0 * stride + ks * 64, stride);
        for_tiles<QC>([&](auto c) {
          tile_load<5>(qt + ks * 16 * LQ + c * W, LQ * 4);
          tile_load<7>(qt_lo + ks * 16 * LQ + c * W, LQ * 4);
          tile_dp_bf16<c, 4, 5>();
          tile_dp_bf16<c, 6, 5>();
          tile_dp_bf16<c, 4, 7>();
        });
      }
      float* s = s_.get() + r0 * LQ;
      for_tiles<QC>([&](auto c) { tile_store<c>(s + c * W, LQ * 4); });
    }
  }

  // Online softmax per lane over the block's rows [0, rows) of sᵀ (lanes see `visible` rows),
  // into wᵀ (same layout): bf16 e^(s − m); int8 e^(s − m) · v_scale quantized to 0…255
  // against the lane's largest, as int32. correction: e^(m_old − m) per lane; w_scale: the
  // factor back from the unit's sums (int8: w_max / 255, 0 for a lane with no weight; bf16:
  // 1). pf steps once per row.
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
               PhasedPrefetcher& pf) {
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
          pf.step();
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

  Geo geo_;
  Values values_;
  std::size_t full_steps_;  // whole 64-byte steps of a key row
  std::size_t tail_bytes_;  // the rest of the row (a multiple of 4)
  TileConfig config_;
  Scratch<A, std::int32_t> q_groups_, qt_;
  Scratch<A, std::int32_t> q_lo_groups_, qt_lo_, k_split_;  // f16: q's lo parts, K hi then lo
  Scratch<A> s_, w_;  // sᵀ and wᵀ: scores and weights, [key][query]
  Scratch<A, std::int32_t> k_pad_, k_tail_;
  Scratch<A> pads_;
};

// The AMX units' runner: the tiles where the rows allow, else the dot unit of the same type
// (VNNI for int8, AVX512-BF16 for bf16), which attention_compute_unit() never names for AMX
// shapes it cannot serve: the fallback keeps a direct call correct. f16 tiles take any rows.
template <class A, KvDtype D>
struct AmxRunner {
  static constexpr bool kOther = D != KvDtype::f16;
  using Other = std::conditional_t<kOther, DotUnitRunner<A, D>, std::monostate>;
  // One of the two, made per thread per call: the other's buffers would only be allocated.
  AmxRunner(std::size_t head_dim, std::size_t max_queries) { make(head_dim, max_queries, false); }
  AmxRunner(std::size_t head_dim, std::size_t max_queries, ForPrefill) {
    make(head_dim, max_queries, true);
  }
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t nv, bool direct, const DecodeScratch<A>& ws) {
    if (tiles) return tiles->run(kv, kvh, t0, t1, st, count);
    if constexpr (kOther) other->run(kv, kvh, t0, t1, st, count, nv, direct, ws);
  }
  std::optional<AmxHeadsInLanes<A, D>> tiles;
  std::optional<Other> other;

 private:
  void make(std::size_t head_dim, std::size_t max_queries, bool prefill) {
    if (AmxHeadsInLanes<A, D>::suits(head_dim)) {
      tiles.emplace(head_dim, prefill);
    } else if constexpr (kOther) {
      other.emplace(head_dim, max_queries);
    }
  }
};
template <class A>
struct KeyRunner<A, KvDtype::int8, ComputeUnit::amx_int8> : AmxRunner<A, KvDtype::int8> {
  using AmxRunner<A, KvDtype::int8>::AmxRunner;
};
template <class A>
struct KeyRunner<A, KvDtype::bf16, ComputeUnit::amx_bf16> : AmxRunner<A, KvDtype::bf16> {
  using AmxRunner<A, KvDtype::bf16>::AmxRunner;
};
template <class A>
struct KeyRunner<A, KvDtype::f16, ComputeUnit::amx_bf16> : AmxRunner<A, KvDtype::f16> {
  using AmxRunner<A, KvDtype::f16>::AmxRunner;
};
// Work items of at least 1,024 keys: each packs its queries and loads and stores their
// accumulator tiles. Measured on the Intel Xeon at 2,000 tokens (2 threads, alternated
// twice), against 256: MQA bf16 105-108 against 122-130 µs warm, 135 against 152-156 cold;
// int8 83 against 112-115 warm, 86-95 against 120-128 cold; GQA-4 bf16 197-210 against
// 229-245 µs warm.
template <class A>
inline constexpr std::size_t kMinChunkKeys<KeyRunner<A, KvDtype::int8, ComputeUnit::amx_int8>> =
    1024;
template <class A>
inline constexpr std::size_t kMinChunkKeys<KeyRunner<A, KvDtype::bf16, ComputeUnit::amx_bf16>> =
    1024;
template <class A>
inline constexpr std::size_t kMinChunkKeys<KeyRunner<A, KvDtype::f16, ComputeUnit::amx_bf16>> =
    1024;

}  // namespace kvscope::simd
