#pragma once
// Many query vectors over one f32 key range with the queries in the SIMD lanes: MQA and
// wide GQA decode (g ≥ W query heads share each kv head: 32 for MQA at 32 heads) and their
// prefill tiles. Exact f32 arithmetic, as the widening path; only the order of the score
// sums differs (each lane sums its d products in order, as the scalar reference does).
//
// The widening path puts head_dim in the lanes: every score is a horizontal sum (a haddp per
// 16 scores) and every value row is re-read by each group of 4 queries; MQA f32 decode then
// ran at under half the FMA peak. With a lane per query both products are outer products:
//   scores   sᵀ[t][lane] = Σ_j k_t[j] · qᵀ[j][lane]   (k_t[j] broadcast, qᵀ rows loaded),
//   P·V      oᵀ[j][lane] += Σ_t v_t[j] · pᵀ[t][lane]  (v_t[j] broadcast, pᵀ rows loaded),
// so each cached element is loaded once per block, as one broadcast feeding 2 FMAs (2 query
// vectors), and the online softmax runs lane-wise with no horizontal reduction. qᵀ and oᵀ are
// transposed in and out once per call (run once per work item of thousands of keys). More
// queries than 2·W go in several passes, all served by each key block in turn (measured on
// AMD Zen 3, AVX2, where MQA is 2 passes: int8 MQA decode at 32,768 tokens 1.1-1.4× and
// 2,000-token int8 prefill 1.2-1.3× faster than a pass at a time over the whole range).
//
// f16, bf16 and int8 caches (the exact path, fp32-fma) take the same kernel: each block's
// visible rows are widened once into f32 tiles shared by all the lanes (exact conversions),
// int8 scores are × the row's k_scale and its weights × v_scale after the running sum, as
// the widening path does. The keys are widened before the score loops, the values a vector
// per step of the first pass's score loops (RowWidener), whose FMAs leave the load, convert
// and store units room: as a phase of its own the widening took 12% of MQA f16 decode. MQA
// decode (AMD Zen 5, 2 threads, cold, old and new binaries alternated): f16 0.92-0.93x the
// time at 32,768 tokens and 0.94-0.97x at 2,000; bf16 and int8 with --compute exact
// 0.92-0.98x at 32,768; GQA-2 f16 0.94-0.98x; causal prefill of 2,000 tokens 0.96-1.01x.
// The keys of the next block are widened likewise during the p·V loops, into a second key
// tile (a later pass's scores still read this block's): MQA f16 decode (Zen 5, 2 threads,
// cold, binaries alternated) 0.94x the time at 32,768 tokens and 0.95x at 2,000, bf16 and
// int8 with --compute exact 0.93-0.95x, GQA-2 f16 0.96-0.97x, prefill 0.97-1.01x.
//
// Include only from ISA-flagged translation units (kernels/arch/).
#include <algorithm>
#include <cassert>
#include <cstddef>
#include <functional>
#include <limits>
#include <type_traits>

#include "kernels/attention_block.hpp"
#include "kernels/kv_view.hpp"
#include "kernels/softmax_exp.hpp"
#include "kernels/transpose16x16.hpp"

namespace kvscope::simd {

// Runs pass.template operator()<QV>(first, lanes) over the queries [0, count) in passes of
// up to MaxQV·W queries (MaxQV 2 or 4): QV vectors of lanes, the fewest that hold the pass.
template <std::size_t W, int MaxQV = 2, class Pass>
void lane_passes(std::size_t count, Pass&& pass) {
  static_assert(MaxQV == 2 || MaxQV == 4);
  for (std::size_t first = 0; first < count; first += MaxQV * W) {
    const std::size_t lanes = count - first < MaxQV * W ? count - first : MaxQV * W;
    if (lanes > 2 * W) {
      if constexpr (MaxQV == 4) pass.template operator()<4>(first, lanes);
    } else if (lanes > W) {
      pass.template operator()<2>(first, lanes);
    } else {
      pass.template operator()<1>(first, lanes);
    }
  }
}

// Runs tile.template operator()<R>(first) over [0, n) in micro-tiles of R = Big rows, up to
// two of 8 where they leave no tile of 4 (64 = 4 × 12 + 2 × 8, 128 = 10 × 12 + 8: a tile of 4
// has too few accumulators to keep the unit busy and ran each row 1.4-1.5× slower, perf on
// MQA bf16 decode, Zen 5), then 4, then 1 for the rest.
template <std::size_t Big, class Tile>
void micro_tiles(std::size_t n, Tile&& tile) {
  std::size_t eights = 0;
  if constexpr (Big > 8) {
    const std::size_t fours = n / 4 * 4;
    for (std::size_t j = 1; j <= 2 && fours % Big != 0; ++j) {
      if (8 * j <= fours && (fours - 8 * j) % Big == 0) eights = j;
    }
  }
  std::size_t i = 0;
  for (; i + Big + 8 * eights <= n; i += Big) tile.template operator()<Big>(i);
  if constexpr (Big > 8) {
    for (; eights > 0; --eights, i += 8) tile.template operator()<8>(i);
  }
  for (; i + 4 <= n; i += 4) tile.template operator()<4>(i);
  for (; i < n; ++i) tile.template operator()<1>(i);
}

// visible[i] ← the rows of the block [b0, b0 + nb) that lane i's query sees (idle lanes past
// `lanes`: all of them), i < width; returns the most any live lane sees (the block is read up
// to there, never further).
inline std::size_t lane_visible_rows(const QueryState* st, std::size_t lanes, std::size_t width,
                                     std::size_t b0, std::size_t nb, float* visible) {
  std::size_t rows = 0;
  for (std::size_t i = 0; i < width; ++i) {
    std::size_t n = nb;
    if (i < lanes) {
      n = st[i].last_key < b0 ? 0 : st[i].last_key - b0 + 1;
      n = n < nb ? n : nb;
      rows = n > rows ? n : rows;
    }
    visible[i] = static_cast<float>(n);
  }
  return rows;
}

// Whether queries in lanes pay over a key range: from a vector's worth of queries (width),
// over ranges long enough to repay the transposes: 256 keys, or one block where every query
// sees the whole range (decode). There shorter ranges took the tile kernel, measured slower
// from 64 keys on: MQA decode at 100 tokens took 0.88x the time with 64 as with 256 (f32),
// 0.73x (bf16), 0.66x (int8; 2 threads, Zen 4). Prefill tiles keep 256: no faster with 64
// (2,000 tokens), and on a tile whose rows straddle a jump in the scores the int8 lanes kernel
// then missed the tests' error bound, 2.1x, by weights rounded to 0 in its blocks of 256
// (since given two digits where needed: weight_digits; not retried).
inline bool lanes_suit(std::size_t count, std::size_t width, std::size_t keys, bool all_see) {
  return count >= width && keys >= (all_see ? 64 : 256);
}

// Widens the rows [0, rows) of a 16-bit or int8 cache block (d elements each, d a multiple
// of the vector width: then block and tile are both rows · d contiguous elements) into an f32
// tile a vector per next(), so that a loop bound by FMAs converts the next operands beside
// them; rest() widens what is left (other d: all of it, as widen_rows). Default: nothing.
template <class A, KvDtype D>
class RowWidener {
  static constexpr std::size_t W = fbatch<A>::size;

 public:
  RowWidener() = default;
  RowWidener(const elem_t<D>* src, std::size_t d, std::size_t rows, float* tile)
      : src_(src),
        tile_(tile),
        d_(d),
        rows_(rows),
        from_(src),
        to_(tile),
        left_(d % W == 0 ? rows * d / W : 0) {}
  [[gnu::always_inline]] void next() {
    if (left_ == 0) return;
    load_elems<D, A>(from_).store_aligned(to_);
    from_ += W, to_ += W, --left_;
  }
  bool active() const { return src_ != nullptr; }
  void rest() {
    if (src_ == nullptr) return;
    if (d_ % W == 0) {
      while (left_ > 0) next();
    } else {
      widen_rows<A, D>(src_, d_, rows_, (d_ + W - 1) / W, tile_, nullptr, 0);
    }
    src_ = nullptr;
  }

 private:
  const elem_t<D>* src_ = nullptr;
  float* tile_ = nullptr;
  std::size_t d_ = 0, rows_ = 0;
  const elem_t<D>* from_ = nullptr;
  float* to_ = nullptr;
  std::size_t left_ = 0;
};

template <class A>
class HeadsInLanes {
  using B = fbatch<A>;
  static constexpr std::size_t W = B::size;
  static constexpr std::size_t kLanes = 2 * W;  // queries per pass: two vectors
  // Rows per micro-tile, × 2 query vectors = the accumulators: 24 of AVX-512's 32 registers,
  // 12 of AVX2's 16. Every loop over them is unrolled (#pragma), the short ones before and
  // after the main loop too: left as loops, GCC kept the accumulators in memory outside the
  // main loop (stored at entry, stored and reloaded at exit: 72 stack moves a tile, 10% of
  // p·V's samples). MQA f32 decode 0.95x the time, 2,000-token f32 prefill 0.96x (AMD Zen 5).
  static constexpr std::size_t kTile = W >= 16 ? 12 : 6;

 public:
  static constexpr std::size_t kBlock = 64;  // keys per online-softmax block

  static bool suits(std::size_t count, std::size_t keys, bool all_see) {
    return lanes_suit(count, W, keys, all_see);
  }

  // max_queries: the most query states one run() takes (each pass of kLanes keeps its qᵀ, oᵀ,
  // m and l). The tiles hold a block of f32 rows widened from a 16-bit or int8 cache, or
  // gathered from a block across pages.
  HeadsInLanes(std::size_t head_dim, std::size_t max_queries)
      : max_passes_((max_queries + kLanes - 1) / kLanes),
        pass_floats_(head_dim * kLanes),
        qt_(pass_floats_ * max_passes_),
        ot_(pass_floats_ * max_passes_),
        ml_(2 * kLanes * max_passes_),
        visible_(kLanes * max_passes_),
        row_max_(kLanes),
        pass_rows_(max_passes_),
        s_(kBlock * kLanes),
        tiles_(3 * kBlock * padded(head_dim)),
        scales_(2 * kBlock) {}

  // Query states st[0, count) attend to keys [t0, t1) of kv head kvh (cache of type D, both
  // K and V): the KeyRunner contract of attention_decode.hpp (st[i].q pre-scaled, keys after
  // st[i].last_key never read for it). count ≤ max_queries.
  //
  // The queries go in passes of up to 2·W (MQA's 32 queries are 2 passes on AVX2, prefill
  // tiles of 64 are 4), and every key block serves all passes before the next block: each
  // block is read (and, for 16-bit and int8 caches, widened) once per call, not once per pass.
  // after_range: the rows read after the range, requested during its last block (as each
  // next block; not over pages shorter than a block, whose next rows are elsewhere).
  template <KvDtype D>
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, const NextBlock& after_range = {}) {
    assert(count <= max_passes_ * kLanes);
    const std::size_t d = kv.head_dim;
    const std::size_t passes = (count + kLanes - 1) / kLanes;
    const auto lanes_of = [&](std::size_t pass) {
      const std::size_t first = pass * kLanes;
      return count - first < kLanes ? count - first : kLanes;
    };
    FirstBlockPrefetch first(kv, kvh, t0, t1, kBlock);  // while the queries are transposed
    for (std::size_t pass = 0; pass < passes; ++pass) {
      transpose_in(st + pass * kLanes, lanes_of(pass), d, pass, first);
    }
    first.rest();
    // The rows of a block at b that any query sees: up to the latest last_key.
    std::size_t last_seen = 0;
    for (std::size_t i = 0; i < count; ++i) last_seen = std::max(last_seen, st[i].last_key);
    bool keys_ready = false;  // the block's keys were widened during the block before's p·V
    std::size_t k_slot = 0;   // which of the two key tiles holds this block's keys

    for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
      nb = kv.chunked_block_rows(b0, t1, kBlock);  // across pages of 16 too
      std::size_t rows = 0;  // the most rows any pass sees; pass_rows_: each pass's most
      for (std::size_t pass = 0; pass < passes; ++pass) {
        const std::size_t seen = lane_visible_rows(st + pass * kLanes, lanes_of(pass), kLanes, b0,
                                                   nb, visible_.get() + pass * kLanes);
        pass_rows_.get()[pass] = seen;
        rows = seen > rows ? seen : rows;
      }
      if (rows == 0) continue;  // keys are widened ahead only for blocks some query sees
      const NextBlock next = kv.paged() && kv.page_tokens < kBlock
                                 ? NextBlock{}
                                 : NextBlock::within(kv, kvh, b0, nb, t1, kBlock, after_range);
      // f32: the cache rows themselves; otherwise the rows any lane sees widened into the
      // tiles. Either way the first pass's kernels request the next block's cache rows, a line
      // per step of their loops. (Requested by widen_rows, in its short phase, they arrived
      // late: MQA decode on fp32-fma took 0.92-0.95x the time with f16 rows in the loops'
      // requests, 0.92-0.98x with bf16 and int8; AMD Zen 4.)
      Block blk;
      RowWidener<A, D> values, next_keys;
      blk.k_next = next.k, blk.v_next = next.v, blk.n_next = next.rows;
      blk.next_row_bytes = kv.k_row_bytes();
      if (kv.spans_pages(b0, nb)) {
        gather_block<D>(kv, kvh, b0, nb, rows, t1, blk);
      } else if constexpr (D == KvDtype::f32) {
        blk.k = reinterpret_cast<const float*>(kv.k_row(kvh, b0));
        blk.v = reinterpret_cast<const float*>(kv.v_row(kvh, b0));
        blk.stride = d;
      } else {
        blk.stride = padded(d);
        float* k_tile = key_tile(k_slot, blk.stride);
        float* v_tile = tiles_.get() + kBlock * blk.stride;
        if (!keys_ready) {
          widen_rows<A, D>(reinterpret_cast<const elem_t<D>*>(kv.k_row(kvh, b0)), d, rows,
                           blk.stride / W, k_tile, nullptr, 0);
        }
        // The values are widened during the first pass's score loops, the next block's keys
        // during its p·V loops (RowWidener), where the range goes on in one page.
        values = RowWidener<A, D>(reinterpret_cast<const elem_t<D>*>(kv.v_row(kvh, b0)), d, rows,
                                  v_tile);
        const std::size_t b1 = b0 + nb;
        const std::size_t nb1 = kv.chunked_block_rows(b1, t1, kBlock);
        const std::size_t rows1 = last_seen < b1 ? 0 : std::min(nb1, last_seen - b1 + 1);
        if (rows1 > 0 && !kv.spans_pages(b1, nb1)) {
          next_keys = RowWidener<A, D>(reinterpret_cast<const elem_t<D>*>(kv.k_row(kvh, b1)), d,
                                       rows1, key_tile(1 - k_slot, blk.stride));
        }
        blk.k = k_tile, blk.v = v_tile;
        if constexpr (D == KvDtype::int8) {
          blk.k_scale = kv.k_scales(kvh, b0);  // rows [0, rows) are read, all inside the cache
          blk.v_scale = kv.v_scales(kvh, b0);
        }
      }
      for (std::size_t pass = 0; pass < passes; ++pass) {
        const std::size_t pass_rows = pass_rows_.get()[pass];
        if (pass_rows == 0) continue;
        if (lanes_of(pass) > W) {
          block_pass<2, D>(blk, d, pass_rows, pass, values, next_keys);
        } else {
          block_pass<1, D>(blk, d, pass_rows, pass, values, next_keys);
        }
        blk.n_next = 0;  // the first pass that runs has requested the next block
      }
      keys_ready = next_keys.active();
      next_keys.rest();
      if (keys_ready) k_slot = 1 - k_slot;
    }

    for (std::size_t pass = 0; pass < passes; ++pass) {
      transpose_out(st + pass * kLanes, lanes_of(pass), d, pass);
    }
  }

 private:
  static constexpr float kInf = std::numeric_limits<float>::infinity();

  static std::size_t padded(std::size_t d) { return (d + W - 1) / W * W; }
  // tiles_ holds a key tile, the value tile, then the other key tile.
  float* key_tile(std::size_t slot, std::size_t stride) const {
    return tiles_.get() + 2 * slot * kBlock * stride;
  }

  // One key block's rows (the cache's f32 rows, or the tiles they were widened into).
  struct Block {
    const float *k = nullptr, *v = nullptr;
    const float *k_scale = nullptr, *v_scale = nullptr;
    std::size_t stride = 0;
    // The next block's cache rows (n_next of them, next_row_bytes each), requested by the
    // first pass's kernels; none when n_next is 0.
    const std::byte *k_next = nullptr, *v_next = nullptr;
    std::size_t n_next = 0, next_row_bytes = 0;
  };

  // A block across pages of 16 (KvView::chunked_block_rows): its first `rows` rows gathered,
  // and widened, into the tiles chunk by chunk, each chunk requesting the same chunk of the
  // next block; int8 scales gathered likewise. Over pages of 16 the passes then work on
  // 64-key blocks, not 16 (MQA f32 at 32,768 tokens: 1.9x the contiguous step before).
  template <KvDtype D>
  void gather_block(const KvView& kv, std::size_t kvh, std::size_t b0, std::size_t nb,
                    std::size_t rows, std::size_t t1, Block& blk) {
    constexpr std::size_t C = BlockRows::kChunkRows;
    const std::size_t d = kv.head_dim;
    blk.n_next = 0;  // each chunk requests the next block's, below
    blk.stride = padded(d);
    float* k_tile = tiles_.get();
    float* v_tile = k_tile + kBlock * blk.stride;
    const std::size_t next = kv.chunked_block_rows(b0 + nb, t1, kBlock);
    for (std::size_t r = 0; r < rows; r += C) {
      const std::size_t n = rows - r < C ? rows - r : C;
      const std::size_t ahead = r < next ? (next - r < C ? next - r : C) : 0;
      const auto at = [&](const std::byte* row) { return reinterpret_cast<const elem_t<D>*>(row); };
      widen_rows<A, D>(at(kv.k_row(kvh, b0 + r)), d, n, blk.stride / W, k_tile + r * blk.stride,
                       ahead ? at(kv.k_row(kvh, b0 + nb + r)) : nullptr, ahead);
      widen_rows<A, D>(at(kv.v_row(kvh, b0 + r)), d, n, blk.stride / W, v_tile + r * blk.stride,
                       ahead ? at(kv.v_row(kvh, b0 + nb + r)) : nullptr, ahead);
      if constexpr (D == KvDtype::int8) {
        for (std::size_t i = 0; i < n; ++i) {
          scales_.get()[r + i] = kv.k_scales(kvh, b0 + r)[i];
          scales_.get()[kBlock + r + i] = kv.v_scales(kvh, b0 + r)[i];
        }
      }
    }
    blk.k = k_tile, blk.v = v_tile;
    if constexpr (D == KvDtype::int8) {
      blk.k_scale = scales_.get();
      blk.v_scale = scales_.get() + kBlock;
    }
  }

  // Pass `pass` keeps qᵀ and oᵀ as d rows of QV·W floats (QV = 2 vectors of lanes, 1 for a
  // pass of at most W queries; lanes past `lanes` are idle: q = 0, every key visible, results
  // dropped), m and l in ml_.
  float* qt(std::size_t pass) const { return qt_.get() + pass * pass_floats_; }
  float* ot(std::size_t pass) const { return ot_.get() + pass * pass_floats_; }
  float* m_of(std::size_t pass) const { return ml_.get() + 2 * pass * kLanes; }
  float* l_of(std::size_t pass) const { return m_of(pass) + kLanes; }

  void transpose_in(const QueryState* st, std::size_t lanes, std::size_t d, std::size_t pass,
                    FirstBlockPrefetch& first) const {
    const std::size_t L = lanes > W ? 2 * W : W;
    float* q = qt(pass);
    float* o = ot(pass);
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
      rows_to_lanes(st, lanes, L, d, &QueryState::q, q, first);
      rows_to_lanes(st, lanes, L, d, &QueryState::acc, o, first);
    } else {
      for (std::size_t i = 0; i < L; ++i) {
        const bool live = i < lanes;
        for (std::size_t j = 0; j < d; ++j) {
          if (j % 8 == 0) first.next();
          q[j * L + i] = live ? st[i].q[j] : 0.0f;
          o[j * L + i] = live ? st[i].acc[j] : 0.0f;
        }
      }
    }
    for (std::size_t i = 0; i < L; ++i) {
      const bool live = i < lanes;
      m_of(pass)[i] = live ? st[i].m : -kInf;
      l_of(pass)[i] = live ? st[i].l : 0.0f;
    }
  }

  void transpose_out(QueryState* st, std::size_t lanes, std::size_t d, std::size_t pass) const {
    const std::size_t L = lanes > W ? 2 * W : W;
    const float* o = ot(pass);
    if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
      lanes_to_rows(o, L, d, st, lanes);
    } else {
      for (std::size_t i = 0; i < lanes; ++i) {
        for (std::size_t j = 0; j < d; ++j) st[i].acc[j] = o[j * L + i];
      }
    }
    for (std::size_t i = 0; i < lanes; ++i) {
      st[i].m = m_of(pass)[i];
      st[i].l = l_of(pass)[i];
    }
  }

  // AVX-512: out[j · L + i] ← (st[i].*row)[j] for lanes i < L (0 past `lanes`), 16 lanes × 16
  // elements per register transpose, not a float at a time: MQA f32 decode at 2,000 tokens
  // (8 calls of 32 queries) 3-4% faster (AMD Zen 4, old and new binaries alternated).
  static void rows_to_lanes(const QueryState* st, std::size_t lanes, std::size_t L, std::size_t d,
                            float* QueryState::*row, float* out, FirstBlockPrefetch& first) {
    for (std::size_t v = 0; v * 16 < L; ++v) {
      for (std::size_t j0 = 0; j0 < d; j0 += 16) first.next();
      const float* rows[16];
      for (std::size_t k = 0; k < 16; ++k)
        rows[k] = v * 16 + k < lanes ? st[v * 16 + k].*row : nullptr;
      rows_to_lanes16(rows, d, d, std::identity{}, out + v * 16, L);
    }
  }
  // AVX-512: st[i].acc[j] ← in[j · L + i] for lanes i < lanes (the inverse of rows_to_lanes).
  static void lanes_to_rows(const float* in, std::size_t L, std::size_t d, QueryState* st,
                            std::size_t lanes) {
    for (std::size_t v = 0; v * 16 < lanes; ++v) {
      float* rows[16];
      for (std::size_t k = 0; k < 16; ++k)
        rows[k] = v * 16 + k < lanes ? st[v * 16 + k].acc : nullptr;
      lanes_to_rows16(in + v * 16, L, d, d, std::identity{}, rows);
    }
  }

  // One pass of up to QV·W queries over one key block: scores of its first `rows` rows, the
  // lane-wise online softmax (lanes see visible_ rows of it), p·V.
  template <int QV, KvDtype D>
  void block_pass(const Block& blk, std::size_t d, std::size_t rows, std::size_t pass,
                  RowWidener<A, D>& values, RowWidener<A, D>& next_keys) {
    constexpr std::size_t L = QV * W;  // floats per transposed row
    float* s = s_.get();
    const float* visible = visible_.get() + pass * kLanes;
    float* m_io = m_of(pass);
    float* l_io = l_of(pass);
    B m[QV], l[QV];
    for (int v = 0; v < QV; ++v) {
      m[v] = B::load_unaligned(m_io + v * W);
      l[v] = B::load_unaligned(l_io + v * W);
    }
    const float* qtp = qt(pass);
    float* row_max = row_max_.get();
    for (int v = 0; v < QV; ++v) B(-kInf).store_aligned(row_max + v * W);
    micro_tiles<kTile>(rows, [&]<std::size_t R>(std::size_t t) {
      if (blk.stride == kFixedStride) {
        scores<QV, R, kFixedStride>(blk, d, t, qtp, s, row_max, values);
      } else {
        scores<QV, R>(blk, d, t, qtp, s, row_max, values);
      }
    });
    values.rest();  // every pass's p·V reads them

    // Online softmax per lane: mask, block max, rescale factor, weights in place of s.
    B vis[QV], block_max[QV];
    // A vector whose lanes all see every row (decode; prefill's blocks left of the diagonal)
    // takes the maximum scores() kept and skips this pass: its scores need no mask (int8's
    // still take their row scales here). MQA f32 and f16 decode 0.99x the time (AMD Zen 5).
    bool kept[QV];
    for (int v = 0; v < QV; ++v) {
      vis[v] = B::load_unaligned(visible + v * W);
      kept[v] = D != KvDtype::int8 && xsimd::all(B(static_cast<float>(rows)) <= vis[v]);
      block_max[v] = kept[v] ? B::load_aligned(row_max + v * W) : B(-kInf);
    }
    for (std::size_t r = 0; r < rows; ++r) {
      for (int v = 0; v < QV; ++v) {
        if (kept[v]) continue;
        B x = B::load_aligned(s + r * L + v * W);
        if constexpr (D == KvDtype::int8) x *= B(blk.k_scale[r]);
        x = xsimd::select(B(static_cast<float>(r)) < vis[v], x, B(-kInf));
        x.store_aligned(s + r * L + v * W);
        block_max[v] = xsimd::max(block_max[v], x);
      }
    }
    B correction[QV];
    for (int v = 0; v < QV; ++v) {
      const B m_new = xsimd::max(m[v], block_max[v]);
      // A lane that has seen no key yet keeps m = −inf; exp against 0 then gives weights 0
      // instead of NaN from −inf − (−inf).
      const B base = xsimd::select(m_new == B(-kInf), B(0.0f), m_new);
      correction[v] = softmax_exp(m[v] - base);
      m[v] = m_new;
      B sum(0.0f);  // a local, not an array element: kept in memory, a store per row
      for (std::size_t r = 0; r < rows; ++r) {
        const B p = softmax_exp(B::load_aligned(s + r * L + v * W) - base);
        sum += p;
        if constexpr (D == KvDtype::int8) {
          (p * B(blk.v_scale[r])).store_aligned(s + r * L + v * W);
        } else {
          p.store_aligned(s + r * L + v * W);
        }
      }
      l[v] = xsimd::fma(l[v], correction[v], sum);
    }

    // The next block's value rows, a line per row step of every tile.
    LinePrefetcher pf(blk.v_next, blk.n_next * blk.next_row_bytes);
    float* otp = ot(pass);
    micro_tiles<kTile>(d, [&]<std::size_t R>(std::size_t j) {
      weighted_values<QV, R>(blk.v, blk.stride, rows, j, s, correction, otp, pf, next_keys);
    });
    pf.rest();
    for (int v = 0; v < QV; ++v) {
      m[v].store_unaligned(m_io + v * W);
      l[v].store_unaligned(l_io + v * W);
    }
  }

  // Rows of d_head 128 (every model preset's) get an instance with the stride fixed: each
  // row's broadcast is then the loop's one pointer plus a constant. With the stride a variable
  // the compiler kept a pointer per row, 12 of them, and spilled; MQA decode took 0.95-0.97x
  // the time with the fixed stride (f32, f16, 2,000-32,768 tokens, AMD Zen 4).
  static constexpr std::size_t kFixedStride = 128;

  // sᵀ[t0 + r] ← Σ_j k[t0 + r][j] · qᵀ[j] for the R rows of one micro-tile of blk's keys
  // (blk.stride floats apart; kStride, when not 0, is that stride fixed at compile time), and
  // row_max[lane] ← the largest of them so far; prefetches blk's next block's cache rows at
  // the same positions, a line per step of j.
  template <int QV, std::size_t R, std::size_t kStride = 0, class Widener>
  static void scores(const Block& blk, std::size_t d, std::size_t t0, const float* qt, float* s,
                     float* row_max, Widener& shared_values) {
    Widener values = shared_values;  // in registers for the loop
    constexpr std::size_t L = QV * W;
    const std::size_t stride = kStride ? kStride : blk.stride;
    B acc[R][QV];
#pragma GCC unroll 12
    for (std::size_t r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < QV; ++v) acc[r][v] = B(0.0f);
    }
    auto pf = LinePrefetcher::rows(blk.k_next, blk.next_row_bytes, t0, R, blk.n_next);
    const float* rows = blk.k + t0 * stride;
    for (std::size_t j = 0; j < d; ++j) {
      pf.next();
      values.next();
      B q[QV];
      for (int v = 0; v < QV; ++v) q[v] = B::load_aligned(qt + j * L + v * W);
#pragma GCC unroll 12
      for (std::size_t r = 0; r < R; ++r) {
        const B x(rows[r * stride + j]);
        for (int v = 0; v < QV; ++v) acc[r][v] = xsimd::fma(x, q[v], acc[r][v]);
      }
    }
    pf.rest();
    shared_values = values;
    B tile_max[QV];
    for (int v = 0; v < QV; ++v) tile_max[v] = B::load_aligned(row_max + v * W);
#pragma GCC unroll 12
    for (std::size_t r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int v = 0; v < QV; ++v) {
        acc[r][v].store_aligned(s + (t0 + r) * L + v * W);
        tile_max[v] = xsimd::max(tile_max[v], acc[r][v]);
      }
    }
    for (int v = 0; v < QV; ++v) tile_max[v].store_aligned(row_max + v * W);
  }

  // oᵀ[j0 + i] ← oᵀ[j0 + i] · correction + Σ_{t < rows} v[t][j0 + i] · pᵀ[t] for the R value
  // columns of one micro-tile (value rows `stride` floats apart); pf takes a line of the next
  // block's value rows per row step.
  template <int QV, std::size_t R, class Widener>
  static void weighted_values(const float* v, std::size_t stride, std::size_t rows, std::size_t j0,
                              const float* p, const B* correction, float* ot, LinePrefetcher& pf,
                              Widener& shared_keys) {
    Widener keys = shared_keys;  // in registers for the loop
    constexpr std::size_t L = QV * W;
    float* out = ot + j0 * L;
    B acc[R][QV];
#pragma GCC unroll 12
    for (std::size_t i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int q = 0; q < QV; ++q) {
        acc[i][q] = B::load_aligned(out + i * L + q * W) * correction[q];
      }
    }
    const float* col = v + j0;
    for (std::size_t t = 0; t < rows; ++t) {
      pf.next();
      keys.next();
      B w[QV];
      for (int q = 0; q < QV; ++q) w[q] = B::load_aligned(p + t * L + q * W);
#pragma GCC unroll 12
      for (std::size_t i = 0; i < R; ++i) {
        const B x(col[t * stride + i]);
        for (int q = 0; q < QV; ++q) acc[i][q] = xsimd::fma(x, w[q], acc[i][q]);
      }
    }
#pragma GCC unroll 12
    for (std::size_t i = 0; i < R; ++i) {
#pragma GCC unroll 4
      for (int q = 0; q < QV; ++q) acc[i][q].store_aligned(out + i * L + q * W);
    }
    shared_keys = keys;
  }

  std::size_t max_passes_, pass_floats_;
  Scratch<A> qt_, ot_, ml_, visible_;
  Scratch<A> row_max_;  // per lane, the block's largest score, kept by scores()
  Scratch<A, std::size_t> pass_rows_;
  Scratch<A> s_, tiles_, scales_;
};

}  // namespace kvscope::simd
