#pragma once
// Decode attention over an int4 cache (keys and values both int4) that reads the q4_0 blocks
// in place: no f32 tile. Per block of 64 keys and per query vector:
//   scores: for each key row and each group of 32 elements, the nibbles are unpacked in
//     registers (byte & 0x0f, byte >> 4, minus 8 in int32, exact), converted to f32 and
//     multiplied with the query: t_g = Σ_{j∈g} q_j (nibble_j − 8); the row's score is
//     Σ_g scale_g · t_g, each group's f16 scale applied once (exact up to f32 rounding:
//     (nibble − 8) · scale is exact in f32, only the order of the sums differs from the
//     scalar reference's Σ_j q_j · (nibble_j − 8) · scale_g);
//   softmax: attention_block.hpp's online update;
//   p·V: acc_j += (p_t · scale_g(t)) · (nibble_tj − 8), one broadcast weight per (row, group).
// The group scales of a block are converted from f16 once into [group][row] tables shared by
// the block's queries. Rows are visited front to back (the stream the hardware prefetcher
// follows) and the next block's rows are prefetched a block ahead, as in the other kernels.
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
// high ones (elements 16 + j…).
template <class A>
inline void int4_unpack(const std::byte* nibbles, std::size_t j, fbatch<A>& lo, fbatch<A>& hi) {
  const ibatch<A> bytes = load_u8_as_i32(nibbles + j, A{});
  const ibatch<A> eight(8);
  lo = xsimd::to_float((bytes & ibatch<A>(0x0f)) - eight);
  hi = xsimd::to_float((bytes >> 4) - eight);
}

// table[g · kKeyBlock + r] ← the f32 scale of group g of row r for rows r < n, 0 for
// r ∈ [n, padded); rows at src + r · row_bytes. One pass over the block's scales, converted
// W at a time (int4_group_scale's arithmetic, vectorized).
template <class A>
void int4_scale_table(const std::byte* src, std::size_t row_bytes, std::size_t groups,
                      std::size_t n, std::size_t padded, std::int32_t* bits, float* table) {
  using B = fbatch<A>;
  using I = ibatch<A>;
  constexpr std::size_t W = B::size;
  for (std::size_t g = 0; g < groups; ++g) {
    std::int32_t* h = bits + g * kKeyBlock;
    for (std::size_t r = 0; r < n; ++r) {
      std::uint16_t half;
      std::memcpy(&half, src + r * row_bytes + g * kInt4GroupBytes, sizeof half);
      h[r] = half;
    }
    for (std::size_t r = n; r < padded; ++r) h[r] = 0;
    for (std::size_t r = 0; r < padded; r += W) {
      const I x = I::load_aligned(h + r);
      const I f32_bits = ((x & I(0x8000)) << 16) | ((x & I(0x7fff)) << 13);
      (xsimd::bitwise_cast<B>(f32_bits) * B(0x1p112f)).store_aligned(table + g * kKeyBlock + r);
    }
  }
}

// s[0, round_up(n, W)) ← Σ_g k_scale[g][r] · Σ_{j∈g} q_j (nibble_rj − 8) for rows r < n of
// an int4 block (row r at k + r · row_bytes), −inf past n. q: 32 · groups lanes. G: the number
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
  for (std::size_t r0 = 0; r0 < n; r0 += W) {
    const std::size_t rows = n - r0 < W ? n - r0 : W;
    B parts[W];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < W; ++r) {
      B part(0.0f);
      if (r < rows) {
        const std::byte* row = k + (r0 + r) * row_bytes;
        if (r0 + r < n_next) prefetch_row(k_next + (r0 + r) * row_bytes, row_bytes);
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
          part = xsimd::fma(t, B(k_scale[g * kKeyBlock + r0 + r]), part);
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

// acc[32·g0, 32·(g0 + GB)) += Σ_{t<n} w[g][t] · (nibble_tj − 8) over the groups g0…g0+GB−1,
// their 32·GB / W accumulators in registers; w[g][t] = p_t · scale_g(t) (table rows of
// kKeyBlock). v_next: rows [0, n_next) to prefetch.
template <class A, int GB>
void int4_pv_groups(const float* w, const std::byte* v, std::size_t row_bytes, std::size_t n,
                    std::size_t g0, float* acc, const std::byte* v_next, std::size_t n_next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t C = kInt4Group / W;  // accumulators per group
  B a[GB][C];
#pragma GCC unroll 8
  for (int g = 0; g < GB; ++g) {
#pragma GCC unroll 8
    for (std::size_t c = 0; c < C; ++c) a[g][c] = B::load_aligned(acc + (g0 + g) * kInt4Group + c * W);
  }
  for (std::size_t t = 0; t < n; ++t) {
    const std::byte* row = v + t * row_bytes + g0 * kInt4GroupBytes + 2;
    if (t < n_next) prefetch_row(v_next + t * row_bytes, row_bytes);
#pragma GCC unroll 8
    for (int g = 0; g < GB; ++g) {
      const B wt(w[(g0 + g) * kKeyBlock + t]);
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

// acc[0, 32 · groups) += Σ_{t<n} w[g(j)][t] · (nibble_tj − 8): groups in register batches of
// up to 8 accumulators (4 groups on AVX-512, 2 on AVX2, 1 on SSE2).
template <class A>
void int4_pv(const float* w, const std::byte* v, std::size_t row_bytes, std::size_t groups,
             std::size_t n, float* acc, const std::byte* v_next, std::size_t n_next) {
  constexpr int GB = static_cast<int>(fbatch<A>::size / 4);
  std::size_t g = 0;
  for (; g + GB <= groups; g += GB, n_next = 0) {
    int4_pv_groups<A, GB>(w, v, row_bytes, n, g, acc, v_next, n_next);
  }
  for (; g < groups; ++g, n_next = 0) int4_pv_groups<A, 1>(w, v, row_bytes, n, g, acc, v_next, n_next);
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
        bits_(groups_ * kKeyBlock),
        states_(max_queries) {
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
    for (std::size_t b0 = t0; b0 < t1; b0 += kKeyBlock) {
      const std::size_t nb = t1 - b0 < kKeyBlock ? t1 - b0 : kKeyBlock;
      const std::size_t n_next = t1 - (b0 + nb) < kKeyBlock ? t1 - (b0 + nb) : kKeyBlock;
      const std::byte* k = kv.k_row(kvh, b0);
      const std::byte* v = kv.v_row(kvh, b0);
      const std::size_t padded = (nb + W - 1) / W * W;
      int4_scale_table<A>(k, row_bytes_, groups_, nb, padded, bits_.get(), k_scale_);
      int4_scale_table<A>(v, row_bytes_, groups_, nb, padded, bits_.get(), v_scale_);
      for (std::size_t i = 0; i < count; ++i) {
        const KeyBlock<KvDtype::int4> blk{nullptr, nullptr, 0, b0, nb};
        const std::size_t n = visible_rows(own[i], blk);
        if (n == 0) continue;
        const std::size_t n_pre = i == 0 ? n_next : 0;  // the first query prefetches
        scores_(own[i].q, k, row_bytes_, groups_, n, k_scale_, ws.s, kv.k_row(kvh, b0 + nb),
                n_pre);
        softmax_update<A>(own[i], ws.s, n, nullptr, lanes_ / W, ws.p);
        const std::size_t np = (n + W - 1) / W * W;  // p is 0 in [n, np)
        for (std::size_t g = 0; g < groups_; ++g) {
          for (std::size_t t = 0; t < np; t += W) {
            (B::load_aligned(ws.p + t) * B::load_aligned(v_scale_ + g * kKeyBlock + t))
                .store_aligned(w_ + g * kKeyBlock + t);
          }
        }
        int4_pv<A>(w_, v, row_bytes_, groups_, n, own[i].acc, kv.v_row(kvh, b0 + nb), n_pre);
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
  Scratch<A, std::int32_t> bits_;
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
