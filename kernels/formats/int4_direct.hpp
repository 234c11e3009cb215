#pragma once
// Decode attention over an int4 cache (keys and values both int4) that reads the q4_0 blocks
// in place: no f32 tile. Per block of 64 keys and per query vector:
//   scores: for each key row and each group of 32 elements, the nibbles are unpacked in
//     registers (byte & 0x0f, byte >> 4) to f32 nibble − 8 (exact, int4_unpack) and
//     multiplied with the query: t_g = Σ_{j∈g} q_j (nibble_j − 8); the row's score is
//     Σ_g scale_g · t_g, each group's f16 scale applied once (exact up to f32 rounding:
//     (nibble − 8) · scale is exact in f32, only the order of the sums differs from the
//     scalar reference's Σ_j q_j · (nibble_j − 8) · scale_g);
//   softmax: attention_block.hpp's online update;
//   p·V: acc_j += (p_t · scale_g(t)) · (nibble_tj − 8), one broadcast weight per (row, group).
// The group scales of a block are converted from f16 once into tables in storage order
// ([row][group]) shared by the block's queries (AVX-512: word permutes, int4_scale_table). Rows are
// visited front to back (the stream the hardware prefetcher follows) and the next block's rows are
// prefetched a block ahead, as in the other kernels.
//
// Query and accumulator lanes are padded to whole groups (32 · groups lanes); past head_dim
// the cache holds nibble 8 (value 0) and the query 0. Written once over xsimd; instantiated per
// ISA in kernels/arch/int4_*.cpp; declared in kernels/attention_kernels.hpp. Include only from
// ISA-flagged translation units.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/attention_decode.hpp"
#include "kernels/formats/int4_simd.hpp"

namespace kvscope::simd {

// W (= fbatch<A>::size, a divisor of 16) int4 elements of one group as f32, unscaled:
// nibble − 8 for bytes [j, j + W) of the group's 16, the low nibbles (elements j…) or the
// high ones (elements 16 + j…). Converted without cvtdq2ps: the nibble n is put in the
// mantissa of 2^23 (bits 0x4b000000 | n = 2^23 + n, exactly), and 2^23 + 8 subtracted, which is
// exact too; and-or fuses into one vpternlogd on AVX-512.
template <class A>
inline void int4_unpack(const std::byte* nibbles, std::size_t j, fbatch<A>& lo, fbatch<A>& hi) {
  using B = fbatch<A>;
  using I = ibatch<A>;
  const I bytes = load_u8_as_i32(nibbles + j, A{});
  const I magic(0x4b000000);
  const B bias(8388616.0f);  // 2^23 + 8
  lo = xsimd::bitwise_cast<B>((bytes & I(0x0f)) | magic) - bias;
  hi = xsimd::bitwise_cast<B>((bytes >> 4) | magic) - bias;
}

// The f32 bit pattern of a finite f16 scale, by integer operations only, so that building a
// block's scale table uses the integer units and leaves the vector units to the kernels:
// a normal half rebiases its exponent (15 → 127: + 112 << 23) with the mantissa shifted into
// place; zero and subnormal halves (exponent 0, rare) are mant · 2^-24. Templated on A so that
// no copy is shared between ISA units.
template <class A>
inline std::uint32_t int4_scale_bits(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  if ((h & 0x7c00u) == 0) {
    return sign | std::bit_cast<std::uint32_t>(static_cast<float>(h & 0x3ffu) * 0x1p-24f);
  }
  return sign | ((static_cast<std::uint32_t>(h & 0x7fffu) << 13) + (112u << 23));
}

// A block's scale table holds its group scales in storage order, table[r · groups + g]: the
// scale of flat index i = r · groups + g is the f16 word at byte 18 · i of the block (its rows
// are contiguous), so the table is every 9th word of the block's byte stream.

// table[i] ← the f32 scale of flat index i < n · groups. Scalar, by integer operations
// (AVX2, SSE2).
template <class A>
void int4_scale_table(const std::byte* src, std::size_t n, std::size_t groups, float* table, A) {
  for (std::size_t i = 0; i < n * groups; ++i) {
    std::uint16_t half;
    std::memcpy(&half, src + i * kInt4GroupBytes, sizeof half);
    const std::uint32_t bits = int4_scale_bits<A>(half);
    std::memcpy(table + i, &bits, sizeof bits);
  }
}

// w[i] ← p[i / groups] · scale[i] for i < n · groups (the softmax weight of a row times its
// group's value scale). Scalar (AVX2, SSE2). lanes: see int4_weight_lanes (AVX-512 only).
template <class A>
void int4_weights(const float* p, const float* scale, std::size_t n, std::size_t groups,
                  const std::int32_t* /*lanes*/, float* w, A) {
  for (std::size_t i = 0; i < n * groups; ++i) w[i] = p[i / groups] * scale[i];
}

#if XSIMD_WITH_AVX512BW
// The permutation network of the AVX-512 scale table: word 9i (i < 32) of 9 consecutive
// 64-byte windows, taken from window pairs (2m, 2m + 1) by vpermt2w index kIdx[m] where
// kMask[m] has bit i.
struct Int4ScaleNet {
  alignas(64) std::uint16_t idx[5][32] = {};
  std::uint32_t mask[5] = {};
  constexpr Int4ScaleNet() {
    for (int i = 0; i < 32; ++i) {
      const int m = 9 * i / 64;
      idx[m][i] = static_cast<std::uint16_t>(9 * i - 64 * m);
      mask[m] |= 1u << i;
    }
  }
};
inline constexpr Int4ScaleNet kInt4ScaleNet{};

// AVX-512: 32 scales at a time from 9 windows (576 bytes of the block; masked loads past its
// end), 5 two-source word permutes, 2 vcvtph2ps.
inline void int4_scale_table(const std::byte* src, std::size_t n, std::size_t groups, float* table,
                             xsimd::avx512bw) {
  const std::size_t count = n * groups;
  const std::size_t bytes = count * kInt4GroupBytes;
  for (std::size_t c = 0; c < count; c += 32) {
    __m512i z[10];
    for (std::size_t k = 0; k < 9; ++k) {
      const std::size_t off = c * kInt4GroupBytes + 64 * k;
      if (off + 64 <= bytes) {
        z[k] = _mm512_loadu_si512(src + off);
      } else if (off < bytes) {
        z[k] = _mm512_maskz_loadu_epi8((__mmask64{1} << (bytes - off)) - 1, src + off);
      } else {
        z[k] = _mm512_setzero_si512();
      }
    }
    z[9] = _mm512_setzero_si512();
    __m512i out = _mm512_setzero_si512();
    for (int m = 0; m < 5; ++m) {
      const __m512i idx = _mm512_load_si512(kInt4ScaleNet.idx[m]);
      out = _mm512_mask_mov_epi16(out, kInt4ScaleNet.mask[m],
                                  _mm512_permutex2var_epi16(z[2 * m], idx, z[2 * m + 1]));
    }
    const std::size_t left = count - c;
    const auto lanes = [](std::size_t k) {
      return k >= 16 ? __mmask16(0xffff) : __mmask16((1u << k) - 1);
    };
    _mm512_mask_storeu_ps(table + c, lanes(left), _mm512_cvtph_ps(_mm512_castsi512_si256(out)));
    if (left > 16) {
      _mm512_mask_storeu_ps(table + c + 16, lanes(left - 16),
                            _mm512_cvtph_ps(_mm512_extracti64x4_epi64(out, 1)));
    }
  }
}

// AVX-512: 16 weights at a time, the rows' p permuted into place (vpermps: lane j of the chunk
// starting at flat index c takes row (c + j) / groups, (c mod groups + j) / groups rows after
// the chunk's first: lanes[(c mod groups) · 16 + j], precomputed by int4_weight_lanes).
inline void int4_weights(const float* p, const float* scale, std::size_t n, std::size_t groups,
                         const std::int32_t* lanes, float* w, xsimd::avx512bw) {
  const std::size_t count = n * groups;
  std::size_t base = 0, rem = 0;  // c = base · groups + rem
  for (std::size_t c = 0; c < count; c += 16) {
    const __m512i idx = _mm512_load_si512(lanes + rem * 16);
    const std::size_t left = count - c;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const std::size_t rows = n - base < 16 ? n - base : 16;
    const __m512 pr = _mm512_maskz_loadu_ps(__mmask16((1u << rows) - 1), p + base);
    const __m512 pw = _mm512_permutexvar_ps(idx, pr);
    _mm512_mask_storeu_ps(w + c, m, _mm512_mul_ps(pw, _mm512_maskz_loadu_ps(m, scale + c)));
    for (rem += 16; rem >= groups; rem -= groups) ++base;
  }
}
#endif

// lanes[r · 16 + j] ← (r + j) / groups for r < groups, j < 16 (int4_weights' permutations).
template <class A>
void int4_weight_lanes(std::size_t groups, std::int32_t* lanes) {
  for (std::size_t r = 0; r < groups; ++r) {
    for (std::size_t j = 0; j < 16; ++j)
      lanes[r * 16 + j] = static_cast<std::int32_t>((r + j) / groups);
  }
}

// s[0, round_up(n, W)) ← Σ_g k_scale[r · groups + g] · Σ_{j∈g} q_j (nibble_rj − 8) for rows r < n
// of an int4 block (row r at k + r · row_bytes), −inf past n. q: 32 · groups lanes. G: the number
// of groups at compile time (0: groups at run time). k_next: rows [0, n_next) to prefetch.
template <class A, int G>
void int4_scores(const float* q, const std::byte* k, std::size_t row_bytes, std::size_t groups,
                 std::size_t n, const float* k_scale, float* s, const std::byte* k_next,
                 std::size_t n_next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  const std::size_t ng = G > 0 ? static_cast<std::size_t>(G) : groups;
  alignas(64) static constexpr float kLane[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                  8, 9, 10, 11, 12, 13, 14, 15};
  PageRunPrefetcher next(k_next, n_next * row_bytes);
  const std::size_t row_lines = lines_per_row(row_bytes);
  for (std::size_t r0 = 0; r0 < n; r0 += W) {
    const std::size_t rows = n - r0 < W ? n - r0 : W;
    B parts[W];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < W; ++r) {
      B part(0.0f);
      if (r < rows) {
        const std::byte* row = k + (r0 + r) * row_bytes;
        next.next(row_lines);
#pragma GCC unroll 8
        for (std::size_t g = 0; g < ng; ++g) {
          const std::byte* nib = row + g * kInt4GroupBytes + 2;
          const float* qg = q + g * kInt4Group;
          B t(0.0f);
#pragma GCC unroll 4
          for (std::size_t j = 0; j < 16; j += W) {
            B lo, hi;
            int4_unpack<A>(nib, j, lo, hi);
            t = xsimd::fma(B::load_aligned(qg + j), lo, t);
            t = xsimd::fma(B::load_aligned(qg + 16 + j), hi, t);
          }
          part = xsimd::fma(t, B(k_scale[(r0 + r) * ng + g]), part);
        }
      }
      parts[haddp_slot<A>(r)] = part;
    }
    B sc = xsimd::haddp(parts);
    if (rows < W) {
      sc = xsimd::select(B::load_aligned(kLane) < B(static_cast<float>(rows)), sc,
                         B(-std::numeric_limits<float>::infinity()));
    }
    sc.store_aligned(s + r0);
  }
}

// acc[32·g0, 32·(g0 + GB)) += Σ_{t<n} w[t · groups + g] · (nibble_tj − 8) over the groups
// g0…g0+GB−1, their 32·GB / W accumulators in registers; w[t · groups + g] = p_t · scale_g(t).
// next: the rows to prefetch, a row's lines per row read.
template <class A, int GB>
void int4_pv_groups(const float* w, std::size_t groups, const std::byte* v, std::size_t row_bytes,
                    std::size_t n, std::size_t g0, float* acc, PageRunPrefetcher& next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t C = kInt4Group / W;  // accumulators per group
  B a[GB][C];
#pragma GCC unroll 8
  for (int g = 0; g < GB; ++g) {
#pragma GCC unroll 8
    for (std::size_t c = 0; c < C; ++c)
      a[g][c] = B::load_aligned(acc + (g0 + g) * kInt4Group + c * W);
  }
  const std::size_t row_lines = lines_per_row(row_bytes);
  for (std::size_t t = 0; t < n; ++t) {
    const std::byte* row = v + t * row_bytes + g0 * kInt4GroupBytes + 2;
    next.next(row_lines);
#pragma GCC unroll 8
    for (int g = 0; g < GB; ++g) {
      const B wt(w[t * groups + g0 + g]);
#pragma GCC unroll 4
      for (std::size_t j = 0; j < 16; j += W) {
        B lo, hi;
        int4_unpack<A>(row + g * kInt4GroupBytes, j, lo, hi);
        a[g][j / W] = xsimd::fma(wt, lo, a[g][j / W]);
        a[g][(16 + j) / W] = xsimd::fma(wt, hi, a[g][(16 + j) / W]);
      }
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < GB; ++g) {
#pragma GCC unroll 8
    for (std::size_t c = 0; c < C; ++c) a[g][c].store_aligned(acc + (g0 + g) * kInt4Group + c * W);
  }
}

// acc[0, 32 · groups) += Σ_{t<n} w[t · groups + g(j)] · (nibble_tj − 8): groups in register batches
// of up to 8 accumulators (4 groups on AVX-512, 2 on AVX2, 1 on SSE2).
template <class A>
void int4_pv(const float* w, const std::byte* v, std::size_t row_bytes, std::size_t groups,
             std::size_t n, float* acc, const std::byte* v_next, std::size_t n_next) {
  constexpr int GB = static_cast<int>(fbatch<A>::size / 4);
  PageRunPrefetcher next(v_next, n_next * row_bytes);
  std::size_t g = 0;
  for (; g + GB <= groups; g += GB) int4_pv_groups<A, GB>(w, groups, v, row_bytes, n, g, acc, next);
  for (; g < groups; ++g) int4_pv_groups<A, 1>(w, groups, v, row_bytes, n, g, acc, next);
}

// The drivers' KeyRunner (attention_decode.hpp's contract) for int4 keys and values read in
// place. One per thread: it holds that thread's group-padded queries and accumulators for up
// to `max_queries` query vectors, and the block's scale tables. Each query vector unpacks the
// block itself (no sharing between the g heads of a kv head; the dispatcher sends large g to
// the tiled kernels, which widen once for all).
template <class A>
class Int4Keys {
 public:
  Int4Keys(std::size_t head_dim, std::size_t max_queries)
      : groups_(int4_groups(head_dim)),
        lanes_(groups_ * kInt4Group),
        row_bytes_(kv_row_bytes(KvDtype::int4, head_dim)),
        floats_(2 * max_queries * lanes_ + 3 * groups_ * kKeyBlock),
        weight_lanes_(groups_ * 16),
        states_(max_queries) {
    int4_weight_lanes<A>(groups_, weight_lanes_.get());
    q_ = floats_.get();
    acc_ = q_ + max_queries * lanes_;
    k_scale_ = acc_ + max_queries * lanes_;
    v_scale_ = k_scale_ + groups_ * kKeyBlock;
    w_ = v_scale_ + groups_ * kKeyBlock;
    switch (groups_) {
      case 2:
        scores_ = &int4_scores<A, 2>;
        break;
      case 4:
        scores_ = &int4_scores<A, 4>;
        break;
      case 8:
        scores_ = &int4_scores<A, 8>;
        break;
      default:
        scores_ = &int4_scores<A, 0>;
    }
  }

  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t nv, bool /*direct*/, const DecodeScratch<A>& ws) {
    using B = fbatch<A>;
    constexpr std::size_t W = B::size;
    const std::size_t d = kv.head_dim;
    const std::size_t dp = nv * W;
    QueryState* own = states_.get();
    for (std::size_t i = 0; i < count; ++i) {
      own[i] = QueryState{q_ + i * lanes_, acc_ + i * lanes_, st[i].m, st[i].l, st[i].last_key};
      for (std::size_t j = 0; j < lanes_; ++j) own[i].q[j] = j < dp ? st[i].q[j] : 0.0f;
      for (std::size_t j = 0; j < lanes_; ++j) own[i].acc[j] = j < d ? st[i].acc[j] : 0.0f;
    }
    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.block_rows(b0, t1, kKeyBlock);
      const NextBlock next(kv, kvh, b0, nb, t1, kKeyBlock);
      const std::byte* k = kv.k_row(kvh, b0);
      const std::byte* v = kv.v_row(kvh, b0);
      int4_scale_table(k, nb, groups_, k_scale_, A{});
      int4_scale_table(v, nb, groups_, v_scale_, A{});
      for (std::size_t i = 0; i < count; ++i) {
        const KeyBlock<KvDtype::int4> blk{nullptr, nullptr, 0, b0, nb};
        const std::size_t n = visible_rows(own[i], blk);
        if (n == 0) continue;
        const std::size_t n_pre = i == 0 ? next.rows : 0;  // the first query prefetches
        scores_(own[i].q, k, row_bytes_, groups_, n, k_scale_, ws.s, next.k, n_pre);
        softmax_update<A>(own[i], ws.s, n, nullptr, lanes_ / W, ws.p);
        int4_weights(ws.p, v_scale_, n, groups_, weight_lanes_.get(), w_, A{});
        int4_pv<A>(w_, v, row_bytes_, groups_, n, own[i].acc, next.v, n_pre);
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      st[i].m = own[i].m;
      st[i].l = own[i].l;
      for (std::size_t j = 0; j < d; ++j) st[i].acc[j] = own[i].acc[j];
    }
  }

 private:
  using Scores = void (*)(const float*, const std::byte*, std::size_t, std::size_t, std::size_t,
                          const float*, float*, const std::byte*, std::size_t);
  std::size_t groups_, lanes_, row_bytes_;
  Scratch<A> floats_;
  Scratch<A, std::int32_t> weight_lanes_;
  Scratch<A, QueryState> states_;
  float *q_, *acc_, *k_scale_, *v_scale_, *w_;
  Scores scores_ = nullptr;
};

// Decode (p.n_queries == 1) over a cache of int4 keys and values, read in place.
template <class A>
void attend_decode_int4(const AttentionProblem& p, int threads) {
  decode_with<A>(p, threads, true, [](std::size_t head_dim, std::size_t max_queries) {
    return Int4Keys<A>(head_dim, max_queries);
  });
}

}  // namespace kvscope::simd
