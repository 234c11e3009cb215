#pragma once
// P·V of the AMX attention kernels (amx_heads_in_lanes.hpp) and the accumulator rows it
// updates: per softmax block (kBlock keys), the softmax weights wᵀ[key][query] become A
// tiles, one row per query, and O[16 queries × 16 columns] accumulates on the tiles. Include
// only from kernels/arch/avx512_amx.cpp.
//   int8: u8 weights (p · v_scale against the query's largest in the block) × the value rows
//         interleaved 4 to a 32-bit group (interleave_values), tdpbusd, 64 keys a product;
//         each block's int32 sums join the f32 accumulator once:
//         o ← o · e^(m_old − m) + w_scale · (P · V).
//   bf16: the value rows read in place as B tiles, against (w, 0) and (0, w) weight pairs
//         (see weighted_values_in_place); f32 sums straight into o.
//   f16:  as bf16, over each block's value rows split into hi and lo bf16 rows and weights
//         split likewise (amx_f16_split.hpp): three products where bf16 takes one.
//   bf16 and f16 prefill: the value rows (f16: their hi and lo parts) interleaved in pairs
//         once per kv head (amx_value_pairs.hpp), a product per 32 keys where in place takes
//         one per 16.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>

#include "kernels/attention_block.hpp"
#include "kernels/units/amx_f16_split.hpp"
#include "kernels/units/amx_tiles.hpp"
#include "kernels/units/amx_value_pairs.hpp"
#include "kernels/units/dot_unit_attention.hpp"

namespace kvscope::simd {

template <class A, KvDtype D>
class AmxValues {
 public:
  static constexpr std::size_t W = 16;       // queries per tile
  static constexpr std::size_t kChunks = 4;  // query tiles per pass
  static constexpr std::size_t L = kChunks * W;
  // Keys per softmax block. bf16 and f16: 128, so that the accumulator tiles, loaded and
  // stored once a block and column segment, serve 8 products per load, not 4. Measured on the
  // shared (noisy) Intel Xeon VM against 64, alternated: 2,000-token MHA bf16 prefill, 1
  // thread, 11 runs each, best 133 against 139 ms, median 165 against 191; 2 threads, best
  // 69.5 against 80.6; MQA bf16 decode no slower. int8 stays at the dot units' 64: its
  // weights are quantized against each block's largest, and over 128 keys their error passed
  // the tests' bound, for no speed measured.
  static constexpr std::size_t kBlock = D == KvDtype::int8 ? kDotBlock : 128;
  // Keys per P·V product: int8, a 64-byte A row of u8 weights against 64 interleaved value
  // rows; bf16, 16 keys against 16 value rows read in place.
  static constexpr std::size_t kStepKeys = D == KvDtype::int8 ? 64 : 16;
  static constexpr std::size_t kSteps = kBlock / kStepKeys;
  // A tiles per query tile and step: int8 one; bf16 two (the even and the odd columns); f16
  // four (those of the weights' hi and of their lo parts).
  static constexpr std::size_t kParities = D == KvDtype::int8 ? 1 : 2;
  static constexpr bool kSplit = D == KvDtype::f16;
  static constexpr std::size_t kWeightTiles = kSplit ? 2 * kParities : kParities;
  using Geo = DotGeometry<D>;

  // value_pairs: bf16 and f16, for prefill, where every pass reads the same value rows:
  // interleave them once per kv head (prepare_pairs, add_block_pairs).
  AmxValues(std::size_t head_dim, bool value_pairs)
      : geo_(head_dim),
        positions_(geo_.acc_vectors * 16),
        pt_(kChunks * kSteps * kWeightTiles * 16 * 16),
        vt_(D == KvDtype::int8 ? kBlock / Geo::kValueRows * positions_ : 1),
        ot_(L * positions_),
        ct_(4 * 16 * 16),
        v_pad_(16 * 16),
        v_split_(kSplit ? 2 * kBlock * geo_.segments * 16 : 1),
        natural_(positions_) {
    if (D != KvDtype::int8 && value_pairs) pairs_.emplace(head_dim, kChunks, kBlock);
    for (std::size_t c = 0; c < positions_; ++c) {
      // bf16: column tile 2s + p holds the elements 32s + 2n + p of segment s (n < 16).
      natural_.get()[c] =
          static_cast<std::uint32_t>(D == KvDtype::int8 ? geo_.natural(c / 16, c % 16)
                                                        : c / 32 * 32 + c % 16 * 2 + c / 16 % 2);
    }
  }

  // Query i's accumulator row from acc (natural order, head_dim elements; only read), or
  // zeros for nullptr; and back.
  void load(std::size_t i, float* acc) {
    float* o = ot_.get() + i * positions_;
    if (acc == nullptr) {
      std::memset(o, 0, positions_ * sizeof(float));
    } else {
      copy_groups(acc, o, /*to_tiles=*/true);
    }
  }
  void store(std::size_t i, float* acc) const {
    copy_groups(acc, ot_.get() + i * positions_, /*to_tiles=*/false);
  }

  bool pairs() const { return pairs_.has_value(); }
  // With value pairs: rows [0, t1) of kv head kvh interleaved, before a range's blocks.
  void prepare_pairs(const KvView& kv, std::size_t kvh, std::size_t t1) {
    pairs_->prepare(kv, kvh, t1);
  }
  // add_block over the interleaved rows of the block from key b0 (even; prepared).
  template <int QC>
  void add_block_pairs(const float* w, std::size_t b0, std::size_t rows, const float* correction,
                       PhasedPrefetcher& pf) {
    rescale_rows<QC>(correction);
    pairs_->template add<QC>(w, b0, rows, ot_.get(), positions_, pf);
  }

  // One block: the weights wᵀ of its rows [0, rows) (row stride QC·16; int8 as u8 in int32
  // slots) times the block's value rows v (by 16-row chunk: a block may span pages; f16:
  // split into v_split_ first), into the accumulators of QC query tiles.
  // correction and w_scale per query: see weighted_values. next_v: the next block's value
  // rows (next_rows of them), which int8 prefetches while interleaving; pf takes its steps
  // here too.
  template <int QC>
  void add_block(const float* w, const BlockRows& v, std::size_t rows, const float* correction,
                 const float* w_scale, const BlockRows& next_v, std::size_t next_rows,
                 PhasedPrefetcher& pf) {
    const std::size_t steps = (rows + kStepKeys - 1) / kStepKeys;
    // int8 interleaves its values (requesting the next block's as it goes): the transpose
    // then takes P·V's share of the keys too.
    pf.phase(D == KvDtype::int8 ? 0.45 : 0.1, QC * steps * (kStepKeys / 16));
    transpose_weights<QC>(w, rows, steps, pf);
    if constexpr (D == KvDtype::int8) {
      // Rows past the visible ones go in as zeros (their weights are 0).
      // The next block's values, a line per row segment interleaved; across pages only its
      // first chunk so, the others requested at once (as the keys, next_block_prefetcher).
      const std::size_t spread = next_v.consecutive(next_rows) ? next_rows : BlockRows::kChunkRows;
      for (std::size_t r = spread; r < next_rows; r += BlockRows::kChunkRows) {
        const std::size_t n = next_rows - r < 16 ? next_rows - r : 16;
        LinePrefetcher(next_v.chunk[r / 16], n * next_v.row_bytes).rest();
      }
      LinePrefetcher next(next_v.chunk[0],
                          (spread < next_rows ? spread : next_rows) * next_v.row_bytes);
      if (v.consecutive(rows)) {  // as a contiguous cache's: no chunk lookup per row
        const std::byte* v0 = v.chunk[0];
        interleave_rows<D>([&](std::size_t t) { return v0 + t * geo_.row_bytes; }, rows,
                           steps * kStepKeys, geo_, vt_.get(), next);
      } else {
        interleave_rows<D>([&](std::size_t t) { return v.row(t); }, rows, steps * kStepKeys, geo_,
                           vt_.get(), next);
      }
      weighted_values<QC>(steps, correction, w_scale);
    } else {
      if constexpr (kSplit) {
        auto* hi = reinterpret_cast<std::byte*>(v_split_.get());
        split_f16_block(v, rows, steps * kStepKeys, split_stride(), hi,
                        hi + kBlock * split_stride());
      }
      pf.phase(0.35, (QC + 1) / 2 * geo_.segments * steps);
      weighted_values_in_place<QC>(v, rows, steps, correction, pf);
    }
  }

 private:
  // acc (natural order, d elements) to or from one query's accumulator row in tile order.
  // The tile order keeps 4 consecutive elements together (DotGeometry::natural), so groups
  // move 16 bytes at a time; positions past d are padding (0 in the tiles).
  void copy_groups(float* acc, float* tiles, bool to_tiles) const {
    const std::size_t d = geo_.d;
    if constexpr (D != KvDtype::int8) return copy_pairs(acc, tiles, to_tiles);
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

  // bf16 and f16: 32 elements of a segment to or from its two column tiles, even elements
  // first.
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

  // The weights of rows [0, rows) into the A tiles of P·V, a row per query: 16 × 16 blocks
  // of wᵀ transposed. int8: pt[chunk][step][query][64 u8]. bf16: pt[chunk][step][parity]
  // [query][16 pairs], each weight rounded to bf16 (nearest even) and paired with a 0 — first
  // (parity 0: the product picks each value pair's even column) or second (parity 1, odd).
  // f16: pt[chunk][step][part][parity][query][16 pairs], parts hi and lo of each weight.
  // Keys from `rows` to the end of the last step weigh 0.
  template <int QC>
  void transpose_weights(const float* s, std::size_t rows, std::size_t steps,
                         PhasedPrefetcher& pf) {
    constexpr std::size_t LQ = QC * W;                // the row stride of wᵀ
    constexpr std::size_t kPerStep = kStepKeys / 16;  // 16-key blocks per A row
    auto* pt = reinterpret_cast<std::uint8_t*>(pt_.get());
    for (int c = 0; c < QC; ++c) {
      for (std::size_t kb = 0; kb < steps * kPerStep; ++kb) {
        pf.step();
        __m512i r[16];
        for (std::size_t i = 0; i < 16; ++i) {
          const std::size_t t = kb * 16 + i;
          r[i] = t < rows ? _mm512_load_si512(s + t * LQ + c * W) : _mm512_setzero_si512();
        }
        transpose16x16_epi32(r);
        std::uint8_t* tile = pt + (c * kSteps + kb / kPerStep) * kWeightTiles * 1024;
        for (std::size_t i = 0; i < 16; ++i) {
          if constexpr (D == KvDtype::int8) {
            const std::size_t at = kb % kPerStep * 16;  // this block's bytes in a row
            _mm_store_si128(reinterpret_cast<__m128i*>(tile + i * 64 + at),
                            _mm512_cvtepi32_epi8(r[i]));
          } else {
            const __m512 p = _mm512_castsi512_ps(r[i]);
            __m256i parts[2];  // bf16(p); f16 caches: its hi and lo
            if constexpr (kSplit) {
              split_bf16(p, parts[0], parts[1]);
            } else {
              parts[0] = (__m256i)_mm512_cvtneps_pbh(p);
            }
            for (std::size_t part = 0; part < kWeightTiles / kParities; ++part) {
              const __m512i even = _mm512_cvtepu16_epi32(parts[part]);
              _mm512_store_si512(tile + part * 2048 + i * 64, even);
              _mm512_store_si512(tile + part * 2048 + 1024 + i * 64, _mm512_slli_epi32(even, 16));
            }
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
  // 32s + 2n + p of query tile q; it is loaded from o and stored back. f16 reads its split
  // rows (v_split_) instead of v.
  template <int QC>
  void weighted_values_in_place(const BlockRows& v, std::size_t rows, std::size_t steps,
                                const float* correction, PhasedPrefetcher& pf) {
    rescale_rows<QC>(correction);
    const std::size_t row_bytes = geo_.row_bytes;
    for (std::size_t c0 = 0; c0 < QC * W; c0 += 2 * W) {
      const bool two = QC * W - c0 > W;
      for (std::size_t seg = 0; seg < geo_.segments; ++seg) {
        if constexpr (kSplit) {
          two ? value_pairs_split<2>(steps, c0, seg, pf) : value_pairs_split<1>(steps, c0, seg, pf);
        } else if (two) {
          value_pairs<2>(v, rows, steps, row_bytes, c0, seg, pf);
        } else {
          value_pairs<1>(v, rows, steps, row_bytes, c0, seg, pf);
        }
      }
    }
  }

  template <int QT>
  void value_pairs(const BlockRows& v, std::size_t rows, std::size_t steps, std::size_t row_bytes,
                   std::size_t c0, std::size_t seg, PhasedPrefetcher& pf) {
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
      pf.step();
      const std::size_t n = rows - ks * 16 < 16 ? rows - ks * 16 : 16;
      const std::byte* b = v.chunk[ks] + seg * 64;  // 16 keys a step: one chunk
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
        const std::uint8_t* a = pt + ((c0 / W + q) * kSteps + ks) * kWeightTiles * 1024;
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

  // f16: value_pairs over the block's split value rows (v_split_, zero-padded to whole
  // steps): per 16 keys and query tile, w_hi · v_hi, w_hi · v_lo and w_lo · v_hi, each for
  // the even and the odd columns.
  template <int QT>
  void value_pairs_split(std::size_t steps, std::size_t c0, std::size_t seg, PhasedPrefetcher& pf) {
    const auto* pt = reinterpret_cast<const std::uint8_t*>(pt_.get());
    const auto* v_hi = reinterpret_cast<const std::byte*>(v_split_.get());
    const std::byte* v_lo = v_hi + kBlock * split_stride();
    float* ot = ot_.get();
    const std::size_t o_stride = positions_ * 4, stride = split_stride();
    // Tile (q, p) in tmm(2p + q): query tile c0/16 + q, columns of parity p; values hi in 5,
    // lo in 7; weights in 4 and 6.
    const auto acc = [&](int q, int p) {
      return ot + (c0 + q * W) * positions_ + (2 * seg + p) * 16;
    };
    for_tiles<4>([&](auto t) {
      if (t % 2 < QT) tile_load<t>(acc(t % 2, t / 2), o_stride);
    });
    for (std::size_t ks = 0; ks < steps; ++ks) {
      pf.step();
      tile_load<5>(v_hi + ks * 16 * stride + seg * 64, stride);
      tile_load<7>(v_lo + ks * 16 * stride + seg * 64, stride);
      for_tiles<QT>([&](auto q) {
        const std::uint8_t* a = pt + ((c0 / W + q) * kSteps + ks) * kWeightTiles * 1024;
        tile_load<4>(a, 64);  // w_hi, even columns
        tile_dp_bf16<q, 4, 5>();
        tile_dp_bf16<q, 4, 7>();
        tile_load<6>(a + 1024, 64);  // w_hi, odd
        tile_dp_bf16<q + 2, 6, 5>();
        tile_dp_bf16<q + 2, 6, 7>();
        tile_load<4>(a + 2048, 64);  // w_lo, even
        tile_dp_bf16<q, 4, 5>();
        tile_load<6>(a + 3072, 64);  // w_lo, odd
        tile_dp_bf16<q + 2, 6, 5>();
      });
    }
    for_tiles<4>([&](auto t) {
      if (t % 2 < QT) tile_store<t>(acc(t % 2, t / 2), o_stride);
    });
  }

  // Bytes between the split value rows: whole 64-byte steps.
  std::size_t split_stride() const { return geo_.segments * 64; }

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
  std::size_t positions_;  // accumulator positions per query (head_dim padded, tile order)
  Scratch<A, std::int32_t> pt_, vt_;
  Scratch<A> ot_, ct_;
  Scratch<A, std::int32_t> v_pad_;
  Scratch<A, std::int32_t> v_split_;   // f16: a block's value rows, hi then lo parts
  Scratch<A, std::uint32_t> natural_;  // the element of each accumulator position (≥ d: pad)
  std::optional<AmxValuePairs<A, kSplit>> pairs_;
};

}  // namespace kvscope::simd
