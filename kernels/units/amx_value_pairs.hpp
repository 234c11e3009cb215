#pragma once
// P·V of bf16 and f16 prefill on AMX-BF16 over value rows interleaved in pairs of keys.
// Include only from kernels/arch/avx512_amx.cpp (through amx_values.hpp).
//
// In prefill every 64-query pass of a kv head reads the same value rows, so they are
// interleaved once per kv head and thread: pair m holds, per 64-byte segment s and column
// parity p, the 16 words (v[2m][32s + 2n + p], v[2m + 1][32s + 2n + p]), n < 16, one B tile
// row. A tdpbf16ps then sums 32 keys into 16 columns, against A rows of 32 weights. Read in
// place (AmxValues::value_pairs, decode's choice: there each block is read once) the same
// sums take twice the products, half of each against zero weights. The accumulator tiles are
// AmxValues' (tile 2s + p holds columns 32s + 2n + p), and so are the roundings (weights to
// bf16, nearest even; f32 sums): only the order of the sums differs.
//
// Split (f16 caches, amx_f16_split.hpp): each row is split into its hi and lo bf16 rows
// first, both interleaved (per segment: hi's two parities, then lo's), and the weights into
// hi and lo A tiles: three products per 32 keys and parity (w_hi · v_hi, w_hi · v_lo,
// w_lo · v_hi), where in place takes three per 16.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_block.hpp"
#include "kernels/kv_view.hpp"
#include "kernels/units/amx_f16_split.hpp"
#include "kernels/units/amx_tiles.hpp"
#include "kernels/units/dot_tiles.hpp"

namespace kvscope::simd {

template <class A, bool Split>
class AmxValuePairs {
 public:
  static constexpr std::size_t W = 16;                  // queries per tile
  static constexpr std::size_t kStepKeys = 32;          // keys per product: 16 pairs
  static constexpr std::size_t kParts = Split ? 2 : 1;  // hi (and lo) of values and weights

  // head_dim: of the rows (bf16, or f16 when Split); up to `chunks` query tiles a pass,
  // blocks of up to `block` keys.
  AmxValuePairs(std::size_t head_dim, std::size_t chunks, std::size_t block)
      : geo_(head_dim),
        pair_bytes_(geo_.segments * 128 * kParts),
        steps_(block / kStepKeys),
        pt_(chunks * steps_ * kParts * 256),
        pad_(kParts * 2 * 256),
        split_(Split ? 4 * geo_.segments * 16 : 1),
        pairs_(1) {}

  // Rows [0, t1) of kv head kvh interleaved, unless they already are. Rows an earlier, longer
  // range of the same head left past t1 stay: add() never reads past its block's rows.
  void prepare(const KvView& kv, std::size_t kvh, std::size_t t1) {
    if (kvh != kvh_ || kv.v != v_ || kv.pages != pages_) {
      built_ = 0, kvh_ = kvh, v_ = kv.v, pages_ = kv.pages;
    }
    if (t1 <= built_) return;
    const std::size_t n_pairs = (t1 + 1) / 2;
    if (n_pairs > capacity_) {  // a new buffer: interleave from the start
      capacity_ = n_pairs;
      pairs_.reserve(capacity_ * pair_bytes_ / 4);
      built_ = 0;
    }
    alignas(64) static constexpr std::uint16_t kPick[2][32] = {
        {0,  32, 2,  34, 4,  36, 6,  38, 8,  40, 10, 42, 12, 44, 14, 46,
         16, 48, 18, 50, 20, 52, 22, 54, 24, 56, 26, 58, 28, 60, 30, 62},
        {1,  33, 3,  35, 5,  37, 7,  39, 9,  41, 11, 43, 13, 45, 15, 47,
         17, 49, 19, 51, 21, 53, 23, 55, 25, 57, 27, 59, 29, 61, 31, 63}};
    const __m512i even = _mm512_load_si512(kPick[0]), odd = _mm512_load_si512(kPick[1]);
    const std::size_t row_bytes = geo_.row_bytes, stride = geo_.segments * 64;
    auto* out = reinterpret_cast<std::byte*>(pairs_.get());
    // Split: the pair's rows as [a hi, a lo, b hi, b lo], `stride` bytes each.
    auto* split = reinterpret_cast<std::byte*>(split_.get());
    // An odd built_ left its last pair's second row 0: that pair is redone.
    for (std::size_t t = built_ / 2 * 2; t < t1; t += 2) {
      const std::byte* a = kv.v_row(kvh, t);
      const std::byte* b = t + 1 < t1 ? kv.v_row(kvh, t + 1) : nullptr;
      if constexpr (Split) {
        split_f16_rows(a, row_bytes, 1, 1, stride, split, split + stride);
        split_f16_rows(b, row_bytes, b ? 1 : 0, 1, stride, split + 2 * stride, split + 3 * stride);
      }
      std::byte* pair = out + t / 2 * pair_bytes_;
      for (std::size_t seg = 0; seg < geo_.segments; ++seg) {
        for (std::size_t part = 0; part < kParts; ++part) {
          __m512i x, y;
          if constexpr (Split) {
            x = _mm512_load_si512(split + part * stride + seg * 64);
            y = _mm512_load_si512(split + (2 + part) * stride + seg * 64);
          } else {
            x = load_segment(a, row_bytes, seg);
            y = b ? load_segment(b, row_bytes, seg) : _mm512_setzero_si512();
          }
          std::byte* to = pair + (seg * kParts + part) * 128;
          _mm512_store_si512(to, _mm512_permutex2var_epi16(x, even, y));
          _mm512_store_si512(to + 64, _mm512_permutex2var_epi16(x, odd, y));
        }
      }
    }
    built_ = t1;
  }

  // o += P · V for QC query tiles over the block of keys [b0, b0 + rows) (b0 even, rows
  // prepared): w is wᵀ[key][query] (row stride QC · 16), ot the accumulator rows in tile
  // order, `positions` floats each. Keys past `rows` to the end of the last product read as
  // zero weights and zero values (0 · NaN is NaN).
  template <int QC>
  void add(const float* w, std::size_t b0, std::size_t rows, float* ot, std::size_t positions,
           PhasedPrefetcher& pf) {
    const std::size_t steps = (rows + kStepKeys - 1) / kStepKeys;
    pf.phase(0.1, QC * steps * 2);
    transpose_weights<QC>(w, rows, steps, pf);
    pf.phase(0.35, (QC + 1) / 2 * geo_.segments * steps);
    const std::byte* block =
        reinterpret_cast<const std::byte*>(pairs_.get()) + b0 / 2 * pair_bytes_;
    for (std::size_t c0 = 0; c0 < QC * W; c0 += 2 * W) {
      for (std::size_t seg = 0; seg < geo_.segments; ++seg) {
        if (QC * W - c0 > W) {
          products<2>(block, rows, steps, c0, seg, ot, positions, pf);
        } else {
          products<1>(block, rows, steps, c0, seg, ot, positions, pf);
        }
      }
    }
  }

 private:
  // The weights wᵀ of rows [0, rows) as A tiles, pt[query tile][step][part][query][32 bf16]:
  // 32 keys in order, so that A's pair m meets B's pair row m; parts hi (and lo: Split). Rows
  // past `rows` weigh 0.
  template <int QC>
  void transpose_weights(const float* s, std::size_t rows, std::size_t steps,
                         PhasedPrefetcher& pf) {
    constexpr std::size_t LQ = QC * W;  // the row stride of wᵀ
    auto* pt = reinterpret_cast<std::uint8_t*>(pt_.get());
    for (int c = 0; c < QC; ++c) {
      for (std::size_t ks = 0; ks < steps; ++ks) {
        std::uint8_t* tile = pt + (c * steps_ + ks) * kParts * 1024;
        for (std::size_t half = 0; half < 2; ++half) {  // keys 0-15, then 16-31 of the step
          pf.step();
          __m512i r[16];
          for (std::size_t i = 0; i < 16; ++i) {
            const std::size_t t = ks * kStepKeys + half * 16 + i;
            r[i] = t < rows ? _mm512_load_si512(s + t * LQ + c * W) : _mm512_setzero_si512();
          }
          transpose16x16_epi32(r);
          for (std::size_t i = 0; i < 16; ++i) {
            auto* at = reinterpret_cast<__m256i*>(tile + i * 64 + half * 32);
            const __m512 p = _mm512_castsi512_ps(r[i]);
            if constexpr (Split) {
              __m256i hi, lo;
              split_bf16(p, hi, lo);
              _mm256_store_si256(at, hi);
              _mm256_store_si256(at + 1024 / 32, lo);
            } else {
              _mm256_store_si256(at, (__m256i)_mm512_cvtneps_pbh(p));
            }
          }
        }
      }
    }
  }

  // Accumulator tiles (q, p) of query tiles c0/16 + q (q < QT) and segment seg's columns of
  // parity p, in tmm(2p + q); weights in 4 and 6, value pairs in 5 (even columns) and 7
  // (odd). Each tile is loaded as soon as the last product reading it has been issued.
  // Split: per parity, values hi in 5 and lo in 7, weights hi in 4 and lo in 6.
  template <int QT>
  void products(const std::byte* block, std::size_t rows, std::size_t steps, std::size_t c0,
                std::size_t seg, float* ot, std::size_t positions, PhasedPrefetcher& pf) {
    const auto* pt = reinterpret_cast<const std::uint8_t*>(pt_.get());
    const std::size_t o_stride = positions * 4;
    const auto acc = [&](int q, int p) {
      return ot + (c0 + q * W) * positions + (2 * seg + p) * 16;
    };
    for_tiles<4>([&](auto t) {
      if (t % 2 < QT) tile_load<t>(acc(t % 2, t / 2), o_stride);
    });
    for (std::size_t ks = 0; ks < steps; ++ks) {
      pf.step();
      const std::byte* b = block + ks * 16 * pair_bytes_ + seg * kParts * 128;
      std::size_t stride = pair_bytes_, odd = 64;  // odd: from a part's even tile to its odd
      const std::size_t left = rows - ks * kStepKeys;
      if (left < kStepKeys) {  // the block's last keys: pairs past `rows` never read
        auto* pad = reinterpret_cast<std::byte*>(pad_.get());
        for (std::size_t m = 0; m < 16; ++m) {
          const __mmask32 keep = 2 * m + 1 < left ? ~__mmask32{0}
                                 : 2 * m < left   ? __mmask32{0x55555555}
                                                  : __mmask32{0};
          for (std::size_t tile = 0; tile < 2 * kParts; ++tile) {  // [part][parity]
            _mm512_store_si512(pad + tile * 1024 + m * 64,
                               _mm512_maskz_loadu_epi16(keep, b + m * pair_bytes_ + tile * 64));
          }
        }
        b = pad, stride = 64, odd = 1024;
      }
      const std::uint8_t* a = pt + (c0 / W * steps_ + ks) * kParts * 1024;
      const std::size_t next_q = steps_ * kParts * 1024;  // a's next query tile
      if constexpr (Split) {
        const std::byte* lo = b + 2 * odd;  // the lo part's even tile
        for_tiles<2>([&](auto p) {
          tile_load<5>(b + p * odd, stride);
          tile_load<7>(lo + p * odd, stride);
          for_tiles<QT>([&](auto q) {
            tile_load<4>(a + q * next_q, 64);
            tile_dp_bf16<2 * p + q, 4, 5>();
            tile_dp_bf16<2 * p + q, 4, 7>();
            tile_load<6>(a + q * next_q + 1024, 64);
            tile_dp_bf16<2 * p + q, 6, 5>();
          });
        });
      } else {
        tile_load<4>(a, 64);
        tile_load<5>(b, stride);
        tile_dp_bf16<0, 4, 5>();
        tile_load<7>(b + odd, stride);
        tile_dp_bf16<2, 4, 7>();
        if constexpr (QT == 2) {
          tile_load<6>(a + next_q, 64);
          tile_dp_bf16<1, 6, 5>();
          tile_dp_bf16<3, 6, 7>();
        }
      }
    }
    for_tiles<4>([&](auto t) {
      if (t % 2 < QT) tile_store<t>(acc(t % 2, t / 2), o_stride);
    });
  }

  DotGeometry<KvDtype::bf16> geo_;
  std::size_t pair_bytes_;  // one pair of rows: segments × parts × 2 parities × 64 bytes
  std::size_t steps_;       // products per block
  Scratch<A, std::int32_t> pt_, pad_, split_, pairs_;
  std::size_t capacity_ = 0, built_ = 0;  // pairs_ room and rows interleaved, in pairs / rows
  std::size_t kvh_ = 0;
  const std::byte* v_ = nullptr;  // whose rows: the cache's values (contiguous) or pages
  const std::byte* const* pages_ = nullptr;
};

}  // namespace kvscope::simd
