#pragma once
// The tiles the dot-unit kernels (dot_unit_attention.hpp) build once per block of 64 cached
// keys and share among all the queries that read it: keys transposed into 32-bit groups
// (kt[group][key]), values interleaved across rows (vt[row group][lane]). Include only from
// kernels/arch/avx512_dot.cpp.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/attention_block.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/transpose16x16.hpp"

namespace kvscope::simd {

inline constexpr std::size_t kDotBlock = 64;  // keys per block: 4 vectors of 16 lanes

// Row geometry of one kv head's cache for dot unit D, in 64-byte segments of a row.
template <KvDtype D>
struct DotGeometry {
  static constexpr std::size_t kKeyGroup = D == KvDtype::int8 ? 4 : 2;  // elements per group
  // V rows interleaved into one 32-bit lane: 4 int8 (u8 weights × s8 values by vpdpbusd) or
  // 2 bf16 (vdpbf16ps); one row group per broadcast weight group.
  static constexpr std::size_t kValueRows = kKeyGroup;
  static constexpr std::size_t kRowGroups = kDotBlock / kValueRows;
  // Accumulator vectors per segment: the unpack outputs of one segment of kValueRows rows.
  static constexpr std::size_t kVectorsPerSegment = kValueRows;
  std::size_t d, row_bytes, groups, segments, acc_vectors;

  explicit DotGeometry(std::size_t head_dim)
      : d(head_dim),
        row_bytes(head_dim * kv_element_bytes(D)),
        groups((head_dim + kKeyGroup - 1) / kKeyGroup),
        segments((row_bytes + 63) / 64),
        acc_vectors(segments * kVectorsPerSegment) {}

  // Element index of lane `lane` of accumulator vector `v` in interleaved (tile) order; ≥ d
  // for padding. Follows interleave_values: segment s = v / E, unpack output w = v % E, and
  // 128-bit lane L of an unpack holds 4 elements.
  std::size_t natural(std::size_t v, std::size_t lane) const {
    const std::size_t s = v / kValueRows, w = v % kValueRows, L = lane / 4, m = lane % 4;
    return D == KvDtype::int8 ? 64 * s + 16 * L + 4 * w + m : 32 * s + 8 * L + 4 * w + m;
  }

  // An accumulator of acc_vectors · 16 lanes in tile order ← one of d elements in natural
  // order (0 in the padding), and back.
  void to_tile_order(const float* natural_acc, float* tile_acc) const {
    for (std::size_t v = 0; v < acc_vectors; ++v) {
      for (std::size_t lane = 0; lane < 16; ++lane) {
        const std::size_t j = natural(v, lane);
        tile_acc[v * 16 + lane] = j < d ? natural_acc[j] : 0.0f;
      }
    }
  }
  void to_natural_order(const float* tile_acc, float* natural_acc) const {
    for (std::size_t v = 0; v < acc_vectors; ++v) {
      for (std::size_t lane = 0; lane < 16; ++lane) {
        const std::size_t j = natural(v, lane);
        if (j < d) natural_acc[j] = tile_acc[v * 16 + lane];
      }
    }
  }
};

// The 64-byte segment `seg` of a row of `row_bytes`, zero past the row's end.
inline __m512i load_segment(const std::byte* row, std::size_t row_bytes, std::size_t seg) {
  const std::size_t left = row_bytes - seg * 64;
  if (left >= 64) return _mm512_loadu_si512(row + seg * 64);
  return _mm512_maskz_loadu_epi8((__mmask64{1} << left) - 1, row + seg * 64);
}

// kt[g · 64 + t] ← 32-bit group g of key row t (k.row(t)) for t < nb (0 beyond),
// g < segments · 16. int8: bytes offset by 128 (xor 0x80), the unsigned operand of vpdpbusd.
// pf (a LinePrefetcher, or anything with its next(), over the next block's rows) takes a line
// per row segment loaded.
template <KvDtype D, class Prefetch>
void transpose_keys(const BlockRows& k, std::size_t nb, const DotGeometry<D>& geo, std::int32_t* kt,
                    Prefetch& pf) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (std::size_t t0 = 0; t0 < nb; t0 += 16) {
    const std::byte* chunk = k.chunk[t0 / BlockRows::kChunkRows];  // rows t0 … t0 + 15
    for (std::size_t seg = 0; seg < geo.segments; ++seg) {
      // Unrolled so that the rows stay in registers (rolled, they went through the stack:
      // GQA-8 int8 decode 0.91x the time unrolled, warm, 2,000 tokens, AMD Zen 4).
      __m512i rows[16];
#pragma GCC unroll 16
      for (std::size_t i = 0; i < 16; ++i) {
        pf.next();
        rows[i] = t0 + i < nb ? load_segment(chunk + i * geo.row_bytes, geo.row_bytes, seg)
                              : _mm512_setzero_si512();
      }
      transpose16x16_epi32(rows);
#pragma GCC unroll 16
      for (std::size_t c = 0; c < 16; ++c) {
        const __m512i x = D == KvDtype::int8 ? _mm512_xor_si512(rows[c], offset) : rows[c];
        _mm512_store_si512(kt + (seg * 16 + c) * kDotBlock + t0, x);
      }
    }
  }
}

// o[0, E) ← one 64-byte segment of E rows interleaved per 32-bit lane (E = kValueRows).
template <KvDtype D>
inline void interleave_segment(const __m512i* r, __m512i* o) {
  if constexpr (D == KvDtype::int8) {
    const __m512i lo01 = _mm512_unpacklo_epi8(r[0], r[1]), lo23 = _mm512_unpacklo_epi8(r[2], r[3]);
    const __m512i hi01 = _mm512_unpackhi_epi8(r[0], r[1]), hi23 = _mm512_unpackhi_epi8(r[2], r[3]);
    _mm512_store_si512(o + 0, _mm512_unpacklo_epi16(lo01, lo23));
    _mm512_store_si512(o + 1, _mm512_unpackhi_epi16(lo01, lo23));
    _mm512_store_si512(o + 2, _mm512_unpacklo_epi16(hi01, hi23));
    _mm512_store_si512(o + 3, _mm512_unpackhi_epi16(hi01, hi23));
  } else {
    _mm512_store_si512(o + 0, _mm512_unpacklo_epi16(r[0], r[1]));
    _mm512_store_si512(o + 1, _mm512_unpackhi_epi16(r[0], r[1]));
  }
}

// vt[(rg · acc_vectors + v) · 16 + lane] ← rows E·rg … E·rg + E − 1 (E = kValueRows)
// interleaved per 32-bit lane, for row groups rg < ceil(n_rows / E); rows ≥ nb read as 0.
// Element order within a vector: DotGeometry::natural. row_at(t) is row t's bytes; pf (a
// LinePrefetcher, or anything with its next() and rest(), over the next block's rows) takes a line
// per row segment loaded, the rest at the end.
template <KvDtype D, class RowAt, class Prefetch>
void interleave_rows(RowAt&& row_at, std::size_t nb, std::size_t n_rows, const DotGeometry<D>& geo,
                     std::int32_t* vt, Prefetch& pf) {
  constexpr std::size_t E = DotGeometry<D>::kValueRows;
  // Row groups whose rows all exist, over the row's whole segments, take plain loads: with a
  // bounds check per row and segment, the loop ran at a third of the speed of its loads and
  // stores (MQA bf16 decode, 7.5% of the time, AMD Zen 4). The loops over a group's rows are
  // unrolled so that the rows stay in registers (rolled, each went through the stack: MHA int8
  // decode over pages of 16 took 0.81-0.83x the time unrolled, 2,000 tokens warm, Zen 4).
  const std::size_t whole_groups = (nb < n_rows ? nb : n_rows) / E;
  const std::size_t whole_segments = geo.row_bytes / 64;
  __m512i r[E];
  for (std::size_t rg = 0; rg < whole_groups; ++rg) {
    const std::byte* rows[E];
#pragma GCC unroll 4
    for (std::size_t e = 0; e < E; ++e) rows[e] = row_at(E * rg + e);
    auto* out = reinterpret_cast<__m512i*>(vt + rg * geo.acc_vectors * 16);
    for (std::size_t seg = 0; seg < whole_segments; ++seg) {
#pragma GCC unroll 4
      for (std::size_t e = 0; e < E; ++e) {
        pf.next();
        r[e] = _mm512_loadu_si512(rows[e] + seg * 64);
      }
      interleave_segment<D>(r, out + seg * E);
    }
    if (whole_segments < geo.segments) {
      for (std::size_t e = 0; e < E; ++e) {
        pf.next();
        r[e] = load_segment(rows[e], geo.row_bytes, whole_segments);
      }
      interleave_segment<D>(r, out + whole_segments * E);
    }
  }
  for (std::size_t rg = whole_groups; rg * E < n_rows; ++rg) {
    auto* out = reinterpret_cast<__m512i*>(vt + rg * geo.acc_vectors * 16);
    for (std::size_t seg = 0; seg < geo.segments; ++seg) {
      for (std::size_t e = 0; e < E; ++e) {
        pf.next();
        const std::size_t t = E * rg + e;
        r[e] = t < nb ? load_segment(row_at(t), geo.row_bytes, seg) : _mm512_setzero_si512();
      }
      interleave_segment<D>(r, out + seg * E);
    }
  }
  pf.rest();
}

// interleave_rows over consecutive rows from v, prefetching n_next rows from v_next.
template <KvDtype D>
void interleave_values(const std::byte* v, std::size_t nb, std::size_t n_rows,
                       const DotGeometry<D>& geo, std::int32_t* vt, const std::byte* v_next,
                       std::size_t n_next) {
  LinePrefetcher pf(v_next, n_next * geo.row_bytes);
  interleave_rows<D>([&](std::size_t t) { return v + t * geo.row_bytes; }, nb, n_rows, geo, vt, pf);
}

// interleave_values a segment at a time, one per next() call, from inside the score loops,
// whose dot instructions leave the load, store and shuffle work room to run beside them;
// rest() does what is left (and all of it for rows that are not whole 64-byte segments).
// Its state is pointers and counts held by value, so that a copy local to a loop lives in
// registers: kept in the object (and geo read through its reference), every field was
// reloaded after each vector store, which may alias anything (perf, MQA bf16 decode on Zen 5:
// a reload behind the stores took 4% of the score loop's samples).
template <KvDtype D>
class ValueInterleaver {
  static constexpr std::size_t E = DotGeometry<D>::kValueRows;

 public:
  ValueInterleaver(const std::byte* v, std::size_t nb, std::size_t n_rows,
                   const DotGeometry<D>& geo, std::int32_t* vt)
      : geo_(&geo),
        v_(v),
        vt_(vt),
        nb_(nb),
        n_rows_(n_rows),
        groups_(geo.row_bytes % 64 == 0 ? (nb < n_rows ? nb : n_rows) / E : 0),
        left_(groups_),
        row_bytes_(geo.row_bytes),
        segments_(geo.segments),
        from_(v),
        to_(reinterpret_cast<__m512i*>(vt)),
        from_skip_(E * geo.row_bytes - geo.segments * 64),
        to_skip_(geo.acc_vectors - geo.segments * E) {}

  [[gnu::always_inline]] void next() {
    if (left_ == 0) return;
    __m512i r[E];
    for (std::size_t e = 0; e < E; ++e) r[e] = _mm512_loadu_si512(from_ + e * row_bytes_);
    interleave_segment<D>(r, to_);
    from_ += 64, to_ += E;
    if (++seg_ == segments_) {  // the next row group
      seg_ = 0, --left_;
      from_ += from_skip_, to_ += to_skip_;
    }
  }
  void rest() {
    while (left_ > 0) next();
    const std::size_t r0 = groups_ * E;
    if (r0 < n_rows_) {
      interleave_values<D>(v_ + r0 * row_bytes_, nb_ - r0, n_rows_ - r0, *geo_,
                           vt_ + groups_ * geo_->acc_vectors * 16, nullptr, 0);
    }
  }

 private:
  const DotGeometry<D>* geo_;
  const std::byte* v_;
  std::int32_t* vt_;
  std::size_t nb_, n_rows_;
  std::size_t groups_;  // whole row groups, taken a segment per next()
  std::size_t left_;    // of them
  std::size_t row_bytes_, segments_;
  const std::byte* from_;  // the next segment of the current group's first row
  __m512i* to_;            // where it goes
  std::size_t from_skip_, to_skip_, seg_ = 0;
};

}  // namespace kvscope::simd
