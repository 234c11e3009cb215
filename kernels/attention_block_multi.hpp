#pragma once
// Several query vectors attending to one key block together (GQA/MQA decode, prefill), with
// register blocking so that each loaded key/value chunk serves several queries:
//   scores: QM queries × KM keys per micro-tile (QM·KM = W partial-sum vectors, lanes along
//           head_dim; QM 4, then 2 and 1 for the rest), reduced by a single haddp into the W
//           scores of the tile;
//   p·V:    4 (or 2) queries × NV value chunks of accumulators, one value load feeding 4
//           FMAs.
// Softmax is attention_block.hpp's online update, per query.
//
// Include only from ISA-flagged translation units (kernels/arch/).
#include <cstddef>
#include <limits>

#include "kernels/attention_block.hpp"

namespace kvscope::simd {

template <class A>
struct MultiTile {
  static constexpr std::size_t W = fbatch<A>::size;
  // Queries per score micro-tile at most (then 2, then 1 for the rest): each loaded key chunk
  // feeds QM FMAs. 4 on every ISA: on AVX2 (AMD Zen 3, 1 thread, GQA-8 decode, warm) tiles of
  // 4 queries × 2 keys ran 1.4-1.5× faster than 2 × 4, which read every key block twice.
  static constexpr std::size_t QM = 4;
  static constexpr int PV_NV = W >= 16 ? 8 : 4;  // value chunks per p·V pass (registers)
};

// One score micro-tile: queries [q0, q0 + QM) (all active) × the keys [k0, k0 + W / QM) of
// the block, W partial-sum vectors (lanes along head_dim) reduced by
// a single haddp into the tile's W scores, written to s.
template <class A, KvDtype D, std::size_t QM>
void score_tile(QueryState* const* st, const std::size_t* n, std::size_t q0, const KeyBlock<D>& blk,
                std::size_t nv, float* s, std::size_t s_stride) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size, KM = W / QM;
  const float* qp[QM];
  std::size_t n_max = 0;
  for (std::size_t qi = 0; qi < QM; ++qi) {
    qp[qi] = st[q0 + qi]->q;
    n_max = n[q0 + qi] > n_max ? n[q0 + qi] : n_max;
  }
  // The first query tile prefetches the next block, a micro-tile's rows' worth of lines per
  // micro-tile spread over its chunks, in 4 KiB runs side by side (PageRunPrefetcher).
  const std::size_t row_bytes = blk.stride * sizeof(elem_t<D>);
  with_shared_block_prefetcher(
      q0 == 0 ? blk.k_next : nullptr, blk.n_next * row_bytes, [&](auto& shared_pf) {
        auto pf = shared_pf;  // a local copy lives in registers
        const std::size_t lines_per_chunk = (KM * lines_per_row(row_bytes) + nv - 1) / nv;
        for (std::size_t k0 = 0; k0 < n_max; k0 += KM) {
          const elem_t<D>* kp[KM];
          for (std::size_t ki = 0; ki < KM; ++ki) {
            kp[ki] = blk.k + (k0 + ki < n_max ? k0 + ki : 0) * blk.stride;
          }
          B parts[W];
          for (std::size_t j = 0; j < W; ++j) parts[j] = B(0.0f);
          for (std::size_t c = 0; c < nv; ++c) {
            pf.next(lines_per_chunk);
            B qc[QM], kc[KM];
            for (std::size_t qi = 0; qi < QM; ++qi) qc[qi] = B::load_aligned(qp[qi] + c * W);
            for (std::size_t ki = 0; ki < KM; ++ki) kc[ki] = load_elems<D, A>(kp[ki] + c * W);
#pragma GCC unroll 16
            for (std::size_t j = 0; j < W; ++j) {
              B& part = parts[haddp_slot<A>(j)];
              part = xsimd::fma(qc[j / KM], kc[j % KM], part);
            }
          }
          alignas(64) float lanes[W];
          xsimd::haddp(parts).store_aligned(lanes);
          for (std::size_t qi = 0; qi < QM; ++qi) {
            float* row = s + (q0 + qi) * s_stride + k0;
            for (std::size_t ki = 0; ki < KM; ++ki) row[ki] = lanes[qi * KM + ki];
          }
        }
        pf.rest();
      });
}

// s[i · s_stride + r] ← q_i · k_r for the active queries i < count and rows r < n[i] (then
// × k_scale, and −inf from n[i] up to round_up(n[i], W)). Rows past the block are never read:
// a micro-tile's missing rows reuse row 0 and are masked. Queries go 4 to a tile, then a
// tile of 2 and one of 1 for the rest, so no tile computes a repeated query's products.
template <class A, KvDtype D>
void multi_scores(QueryState* const* st, const std::size_t* n, std::size_t count,
                  const KeyBlock<D>& blk, std::size_t nv, float* s, std::size_t s_stride) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  alignas(64) static constexpr float kLane[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                  8, 9, 10, 11, 12, 13, 14, 15};
  std::size_t q0 = 0;
  for (; q0 + 4 <= count; q0 += 4) score_tile<A, D, 4>(st, n, q0, blk, nv, s, s_stride);
  if (q0 + 2 <= count) score_tile<A, D, 2>(st, n, q0, blk, nv, s, s_stride), q0 += 2;
  if (q0 < count) score_tile<A, D, 1>(st, n, q0, blk, nv, s, s_stride);
  for (std::size_t i = 0; i < count; ++i) {
    float* row = s + i * s_stride;
    for (std::size_t r = 0; r < n[i]; r += W) {
      B sc = B::load_aligned(row + r);
      if (blk.k_scale != nullptr) sc *= B::load_unaligned(blk.k_scale + r);
      sc = xsimd::select(B::load_aligned(kLane) < B(static_cast<float>(n[i] - r)), sc,
                         B(-std::numeric_limits<float>::infinity()));
      sc.store_aligned(row + r);
    }
  }
}

// acc_q [c0·W, (c0+NV)·W) += Σ_{t<n} p_q[t] · v_t for Q queries at once, so that one value
// load feeds Q FMAs (p is 0 past a query's visible rows, so one n serves all). Chunk j of each
// row requests a line of the next block where bit j of `requests` is set.
template <class A, KvDtype D, int NV, int Q, class Prefetcher>
void multi_pv_group(const float* const* p, const elem_t<D>* v, std::size_t stride, std::size_t n,
                    std::size_t c0, float* const* acc, Prefetcher& shared_pf, unsigned requests) {
  using B = fbatch<A>;
  // A local copy lives in registers: through the reference, every request stored its state
  // (GQA-8 decode 0.92-0.97x the time with the copy, cold, 2,000 tokens; Zen 5).
  Prefetcher pf = shared_pf;
  constexpr std::size_t W = B::size;
  B a[Q][NV];
#pragma GCC unroll 4
  for (int q = 0; q < Q; ++q) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) a[q][j] = B::load_aligned(acc[q] + (c0 + j) * W);
  }
  const elem_t<D>* col = v + c0 * W;
  for (std::size_t t = 0; t < n; ++t) {
    B w[Q];
#pragma GCC unroll 4
    for (int q = 0; q < Q; ++q) w[q] = B(p[q][t]);
    const elem_t<D>* row = col + t * stride;
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      if (((requests >> j) & 1u) != 0) pf.next();
      const B x = load_elems<D, A>(row + j * W);
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) a[q][j] = xsimd::fma(w[q], x, a[q][j]);
    }
  }
  shared_pf = pf;
#pragma GCC unroll 4
  for (int q = 0; q < Q; ++q) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) a[q][j].store_aligned(acc[q] + (c0 + j) * W);
  }
}

// Q queries' p·V over all nv value chunks, in register groups of NV = PV_NV · 2 / Q, …, 1
// vectors (Q · NV accumulators). v_next: rows [0, n_next) to prefetch, as many lines per row
// as a group reads of it, spread over the group's chunk loads (PageRunPrefetcher). A line per
// chunk loaded asked 16-bit rows (two chunks a line) for all of the next block during the first
// of GQA-8's two groups, twice as densely as they were read, and nothing during the second:
// GQA-8 decode (AMD Zen 5, 2 threads, cold, steps of both in turn in one process) took
// 0.93-0.94x the time paced at 2,000 tokens and 0.90-0.92x at 32,768 (bf16, f16) with memory
// in its fast state, 0.95-0.98x in its slow one; f32 rows (a line a chunk) keep their pace.
template <class A, KvDtype D, int Q>
void multi_pv(const float* const* p, const elem_t<D>* v, std::size_t stride, std::size_t n,
              std::size_t nv, float* const* acc, const elem_t<D>* v_next, std::size_t n_next) {
  constexpr int NV = MultiTile<A>::PV_NV * 2 / Q;
  const std::size_t row_lines = lines_per_row(stride * sizeof(elem_t<D>));
  // The chunks of a group of `chunks` that request a line of the next block (bit j: chunk j):
  // as many per row as the group reads of its row, spread evenly.
  const auto requests_of = [&](std::size_t chunks) {
    const std::size_t k = (row_lines * chunks + nv - 1) / nv;
    unsigned bits = 0;
    for (std::size_t j = 0; j < chunks; ++j) {
      if ((j + 1) * k / chunks > j * k / chunks) bits |= 1u << j;
    }
    return bits;
  };
  with_shared_block_prefetcher(v_next, n_next * stride * sizeof(elem_t<D>), [&](auto& pf) {
    std::size_t c = 0;
    for (; c + NV <= nv; c += NV) {
      multi_pv_group<A, D, NV, Q>(p, v, stride, n, c, acc, pf, requests_of(NV));
    }
    if constexpr (NV > 4) {
      if (c + 4 <= nv)
        multi_pv_group<A, D, 4, Q>(p, v, stride, n, c, acc, pf, requests_of(4)), c += 4;
    }
    if constexpr (NV > 2) {
      if (c + 2 <= nv)
        multi_pv_group<A, D, 2, Q>(p, v, stride, n, c, acc, pf, requests_of(2)), c += 2;
    }
    for (; c < nv; ++c) multi_pv_group<A, D, 1, Q>(p, v, stride, n, c, acc, pf, requests_of(1));
    pf.rest();
  });
}

// Query states st[0, count) attend to one key block. s, p: scratch of count × s_stride
// floats (s_stride ≥ round_up(blk.n, W)); active, n: scratch of count entries.
template <class A, KvDtype D>
void attend_block_multi(QueryState* st, std::size_t count, const KeyBlock<D>& blk, std::size_t nv,
                        float* s, float* p, std::size_t s_stride, QueryState** active,
                        std::size_t* n) {
  std::size_t live = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t rows = visible_rows(st[i], blk);
    if (rows > 0) active[live] = &st[i], n[live++] = rows;
  }
  if (live == 0) return;
  multi_scores<A, D>(active, n, live, blk, nv, s, s_stride);
  for (std::size_t i = 0; i < live; ++i) {
    softmax_update<A>(*active[i], s + i * s_stride, n[i], blk.v_scale, nv, p + i * s_stride);
  }
  // p·V four queries at a time (one value load feeds 4 FMAs: with 2, streaming the value
  // block from L2 bounded MQA), then a pair, then one.
  const auto group = [&]<int Q>(std::size_t i) {
    std::size_t rows = 0;
    for (std::size_t j = i; j < i + Q; ++j) rows = n[j] > rows ? n[j] : rows;
    const float* pq[Q];
    float* accq[Q];
    for (std::size_t j = i; j < i + Q; ++j) {
      // A shorter row's weights are 0 only up to round_up(its n, W): clear the rest.
      float* pj = p + j * s_stride;
      for (std::size_t t = (n[j] + MultiTile<A>::W - 1) / MultiTile<A>::W * MultiTile<A>::W;
           t < rows; ++t) {
        pj[t] = 0.0f;
      }
      pq[j - i] = pj;
      accq[j - i] = active[j]->acc;
    }
    multi_pv<A, D, Q>(pq, blk.v, blk.stride, rows, nv, accq, blk.v_next, i == 0 ? blk.n_next : 0);
  };
  std::size_t i = 0;
  for (; i + 4 <= live; i += 4) group.template operator()<4>(i);
  if (i + 2 <= live) group.template operator()<2>(i), i += 2;
  if (i < live) {
    block_pv<A, D>(p + i * s_stride, blk.v, blk.stride, n[i], nv, active[i]->acc, blk.v_next,
                   i == 0 ? blk.n_next : 0);
  }
}

// attend_block_multi from the cache over a block whose rows run on across pages in chunks of
// 16 (BlockRows, KvView::chunked_block_rows; `stride` elements a row), for query states that
// all see its first_key + nb rows (decode): each chunk's scores and p·V by the multi-query
// kernels, one softmax update per query for the block. k_next, v_next: the next block's
// first n_next rows, by chunk, each chunk requested as the same chunk of this block is read.
template <class A, KvDtype D>
void attend_block_multi_chunked(QueryState* st, std::size_t count, const BlockRows& k,
                                const BlockRows& v, std::size_t first_key, std::size_t nb,
                                std::size_t stride, std::size_t nv, const float* k_scale,
                                const float* v_scale, const BlockRows& k_next,
                                const BlockRows& v_next, std::size_t n_next, float* s, float* p,
                                std::size_t s_stride, QueryState** active, std::size_t* n) {
  constexpr std::size_t C = BlockRows::kChunkRows;
  const auto chunk = [&](std::size_t r) {
    const std::size_t ahead = r < n_next ? (n_next - r < C ? n_next - r : C) : 0;
    return KeyBlock<D>{reinterpret_cast<const elem_t<D>*>(k.chunk[r / C]),
                       reinterpret_cast<const elem_t<D>*>(v.chunk[r / C]),
                       stride,
                       first_key + r,
                       nb - r < C ? nb - r : C,
                       k_scale ? k_scale + r : nullptr,
                       nullptr,
                       ahead ? reinterpret_cast<const elem_t<D>*>(k_next.chunk[r / C]) : nullptr,
                       ahead ? reinterpret_cast<const elem_t<D>*>(v_next.chunk[r / C]) : nullptr,
                       ahead};
  };
  for (std::size_t i = 0; i < count; ++i) active[i] = &st[i];
  for (std::size_t r = 0; r < nb; r += C) {
    const KeyBlock<D> blk = chunk(r);
    for (std::size_t i = 0; i < count; ++i) n[i] = blk.n;
    multi_scores<A, D>(active, n, count, blk, nv, s + r, s_stride);
  }
  for (std::size_t i = 0; i < count; ++i) {
    softmax_update<A>(st[i], s + i * s_stride, nb, v_scale, nv, p + i * s_stride);
  }
  for (std::size_t r = 0; r < nb; r += C) {
    const KeyBlock<D> blk = chunk(r);
    const auto group = [&]<int Q>(std::size_t i) {
      const float* pq[Q];
      float* accq[Q];
      for (int j = 0; j < Q; ++j) pq[j] = p + (i + j) * s_stride + r, accq[j] = st[i + j].acc;
      multi_pv<A, D, Q>(pq, blk.v, stride, blk.n, nv, accq, blk.v_next, i == 0 ? blk.n_next : 0);
    };
    std::size_t i = 0;
    for (; i + 4 <= count; i += 4) group.template operator()<4>(i);
    if (i + 2 <= count) group.template operator()<2>(i), i += 2;
    if (i < count) {
      block_pv<A, D>(p + i * s_stride + r, blk.v, stride, blk.n, nv, st[i].acc, blk.v_next,
                     i == 0 ? blk.n_next : 0);
    }
  }
}

}  // namespace kvscope::simd
