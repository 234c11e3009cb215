#pragma once
// The int4 VNNI kernels as the decode and prefill drivers run them (attention_decode.hpp's
// KeyRunner contract): one query per kv head through the fused kernels (dot_int4.hpp), 2 or
// more through a block unpacked once for all of them (dot_int4_block.hpp), from 8 their scores
// 16 queries at a time, a query per lane (dot_int4_lanes.hpp). Include only from
// kernels/arch/avx512_dot.cpp.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/attention_decode.hpp"
#include "kernels/attention_prefill.hpp"
#include "kernels/units/dot_int4.hpp"
#include "kernels/units/dot_int4_block.hpp"
#include "kernels/units/dot_int4_lanes.hpp"

namespace kvscope::simd {

// The drivers' KeyRunner for int4 keys and values on VNNI. One per thread: its queries' packed
// forms and interleaved accumulators, one block's scores, weights and their operands, and the
// unpacked block.
template <class A>
class Int4DotKeys : public SlotKeyRunner<Int4DotKeys<A>> {
 public:
  Int4DotKeys(std::size_t head_dim, std::size_t max_queries)
      : max_queries_(max_queries),
        geo_(head_dim),
        vectors_(16 * (max_queries * 3 * geo_.segments + 2 * geo_.segments * 16 +
                       Int4Block::vectors(geo_) +
                       (max_queries + 15) / 16 * Int4QueryLanes::vectors(geo_))),
        floats_(max_queries * geo_.positions + 2 * kDotBlock + geo_.segments * 16 * 16 +
                2 * kDotBlock * 16 + (max_queries + 15) / 16 * 16 * kDotBlock),
        queries_(max_queries),
        lanes_(max_queries / 16 + 1),
        natural_(geo_.positions) {
    for (std::size_t c = 0; c < geo_.positions; ++c) {
      natural_.get()[c] = static_cast<std::uint32_t>(geo_.natural(c));
    }
  }

 private:
  friend class SlotKeyRunner<Int4DotKeys<A>>;
  // Blocks run on across pages (chunked_block_rows), so a paged cache is read 64 rows at once.
  static constexpr std::size_t kPagePartRows = kDotBlock;
  // Queries from which a lane group (dot_int4_lanes.hpp) scores them: it costs the same for 1
  // query as for 16. Decode, warm, against query by query (AMD Zen 5): 8 queries per kv head
  // (GQA-4) 0.90-0.91x the time at 2,000 and 32,768 tokens, 4 (GQA-8) 1.19x.
  static constexpr std::size_t kMinLanes = 8;

  // vectors_: the packed queries, both digits' weights, the unpacked block, the lane groups.
  __m512i* packed() const { return reinterpret_cast<__m512i*>(vectors_.get()); }
  __m512i* weight_vectors() const { return packed() + max_queries_ * 3 * geo_.segments; }
  __m512i* block_vectors() const { return weight_vectors() + 2 * geo_.segments * 16; }
  __m512i* lane_vectors(std::size_t j) const {
    return block_vectors() + Int4Block::vectors(geo_) + j * Int4QueryLanes::vectors(geo_);
  }
  float* acc_of(std::size_t slot) const { return floats_.get() + slot * geo_.positions; }
  // After the accumulators, s, p and wf: the lanes' scores as lanes (64 × 16), then as rows,
  // 64 per slot of the lane groups.
  float* lane_tile() const {
    return acc_of(max_queries_) + 2 * kDotBlock + geo_.segments * 16 * 16;
  }
  float* lane_scores(std::size_t slot) const {
    return lane_tile() + 2 * kDotBlock * 16 + slot * kDotBlock;
  }

  // States st[0, count) into slots [first, first + count): queries packed, accumulators
  // gathered into interleaved order.
  void begin(const QueryState* st, std::size_t count, std::size_t first) {
    const std::uint32_t* natural = natural_.get();
    for (std::size_t i = 0; i < count; ++i) {
      queries_.get()[first + i] =
          pack_int4_query(st[i].q, geo_, packed() + (first + i) * 3 * geo_.segments);
      for (std::size_t c = 0; c < geo_.positions; c += 16) {
        const __m512i idx = _mm512_load_si512(natural + c);
        const __mmask16 real =
            _mm512_cmplt_epu32_mask(idx, _mm512_set1_epi32(static_cast<int>(geo_.d)));
        _mm512_store_ps(acc_of(first + i) + c,
                        _mm512_mask_i32gather_ps(_mm512_setzero_ps(), real, idx, st[i].acc, 4));
      }
    }
    // Slots 16j … 16j + 15 inside the range (fewer at its end), a query per lane, for block()
    // (which takes lane groups only for kMinLanes queries or more).
    if (count < kMinLanes) return;
    for (std::size_t j = (first + 15) / 16; 16 * j < first + count; ++j) {
      const std::size_t cnt = std::min<std::size_t>(16, first + count - 16 * j);
      lanes_.get()[j] = pack_int4_query_lanes(queries_.get() + 16 * j, cnt, geo_, lane_vectors(j));
    }
  }

  // The accumulators of slots [first, first + count) scattered back to st[0, count).
  void end(QueryState* st, std::size_t count, std::size_t first) const {
    const std::uint32_t* natural = natural_.get();
    for (std::size_t i = 0; i < count; ++i) {
      for (std::size_t c = 0; c < geo_.positions; c += 16) {
        const __m512i idx = _mm512_load_si512(natural + c);
        const __mmask16 real =
            _mm512_cmplt_epu32_mask(idx, _mm512_set1_epi32(static_cast<int>(geo_.d)));
        _mm512_mask_i32scatter_ps(st[i].acc, real, idx, _mm512_load_ps(acc_of(first + i) + c), 4);
      }
    }
  }

  // States st[0, count) in slots [first, first + count) over keys [t0, t1) of kv head kvh;
  // after_range: the rows read next, prefetched by the last block.
  void keys(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
            std::size_t count, std::size_t first, const NextBlock& after_range) {
    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.chunked_block_rows(b0, t1, kDotBlock);  // across pages of 16 too
      const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kDotBlock, after_range);
      // The next block's rows a line per line read; across pages in runs over its chunks.
      if (next.spans_pages(kv)) {
        BlockRunPrefetcher k_ahead(kv.k_block(next.kvh, next.pos, next.rows), next.rows);
        BlockRunPrefetcher v_ahead(kv.v_block(next.kvh, next.pos, next.rows), next.rows);
        block(kv, kvh, b0, nb, st, count, first, k_ahead, v_ahead);
      } else {
        PageRunPrefetcher k_ahead(next.k, next.rows * geo_.row_bytes);
        PageRunPrefetcher v_ahead(next.v, next.rows * geo_.row_bytes);
        block(kv, kvh, b0, nb, st, count, first, k_ahead, v_ahead);
      }
    }
  }

  // keys() for the block [b0, b0 + nb).
  template <class KeyPrefetch, class ValuePrefetch>
  void block(const KvView& kv, std::size_t kvh, std::size_t b0, std::size_t nb, QueryState* st,
             std::size_t count, std::size_t first, KeyPrefetch& k_ahead, ValuePrefetch& v_ahead) {
    __m512i* wv = weight_vectors();
    Int4Block blk(block_vectors(), geo_);
    float* s = acc_of(max_queries_);
    float* p = s + kDotBlock;
    auto* wf = reinterpret_cast<__m512*>(p + kDotBlock);
    const Int4Query* queries = queries_.get() + first;
    const BlockRows k = kv.k_block(kvh, b0, nb);
    const BlockRows v = kv.v_block(kvh, b0, nb);
    const auto visible = [&](std::size_t i) {  // rows of the block query i sees
      return st[i].last_key < b0 ? 0 : st[i].last_key - b0 + 1 < nb ? st[i].last_key - b0 + 1 : nb;
    };
    const bool shared = count > 1;
    std::size_t n_max = 0;
    if (shared) {
      for (std::size_t i = 0; i < count; ++i) n_max = visible(i) > n_max ? visible(i) : n_max;
      if (n_max == 0) return;
      int4_unpack_block(k, v, n_max, geo_, blk, k_ahead, v_ahead);
    }
    // Slots first + [0, lanes_end) have their scores from the lane groups (a last group of
    // fewer than kMinLanes queries scores query by query).
    std::size_t lanes_end = 0;
    if (shared && count >= kMinLanes && first % 16 == 0) {
      lanes_end = count % 16 >= kMinLanes ? count : count / 16 * 16;
      for (std::size_t j = 0; j < lanes_end; j += 32) {
        const std::size_t slot = first + j;
        if (j + 16 < lanes_end) {  // two lane groups per pass
          int4_lanes_scores<2>(lanes_.get() + slot / 16, blk, n_max, geo_, lane_tile(),
                               lane_scores(slot));
        } else {
          int4_lanes_scores<1>(lanes_.get() + slot / 16, blk, n_max, geo_, lane_tile(),
                               lane_scores(slot));
        }
      }
    }
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t n = visible(i);
      if (n == 0) continue;  // the whole block lies after this query
      float* a = acc_of(first + i);
      float* si = s;
      if (i < lanes_end) {
        si = lane_scores(first + i);
        for (std::size_t t0 = 0; t0 < kDotBlock; t0 += 16) {
          _mm512_store_ps(si + t0, mask_past(_mm512_load_ps(si + t0), n, t0));
        }
      } else if (shared) {
        int4_block_scores(queries[i], blk, n, geo_, s);
      } else {
        int4_dot_scores(queries[i], k, n, geo_, s, k_ahead);
      }
      __m512 x[4];
      softmax_block(st[i], si, n, a, geo_.positions, x);
      for (int j = 0; j < 4; ++j) _mm512_store_ps(p + 16 * j, x[j]);
      if (shared) {
        const Int4Weights w = int4_block_weights(p, blk, n, geo_, wf, wv);
        if (w.scale > 0.0f) int4_block_pv(w, blk, n, geo_, a);
      } else {
        const Int4Weights w = int4_dot_weights(p, v, n, geo_, wf, wv);
        if (w.scale > 0.0f) int4_dot_pv(w, v, n, geo_, a, v_ahead);
      }
    }
    k_ahead.rest();
    v_ahead.rest();
  }

  std::size_t max_queries_;
  Int4DotGeometry geo_;
  Scratch<A, std::int32_t> vectors_;  // __m512i each 16
  Scratch<A> floats_;
  Scratch<A, Int4Query> queries_;
  Scratch<A, Int4QueryLanes> lanes_;  // [slot / 16]
  Scratch<A, std::uint32_t> natural_;
};

template <class A>
inline constexpr bool kRunsPageByPage<Int4DotKeys<A>> = true;

// Decode (p.n_queries == 1) and prefill over a cache of int4 keys and values on VNNI.
template <class A>
void attend_decode_int4_dot(const AttentionProblem& p, int threads) {
  decode_with<A>(p, threads, true, [](std::size_t head_dim, std::size_t max_queries) {
    return Int4DotKeys<A>(head_dim, max_queries);
  });
}
template <class A>
void attend_prefill_int4_dot(const AttentionProblem& p, int threads) {
  prefill_with<A>(p, threads, true, [](std::size_t head_dim, std::size_t max_queries) {
    return Int4DotKeys<A>(head_dim, max_queries);
  });
}

}  // namespace kvscope::simd
