#pragma once
// Decode attention (one new query row) over a KV cache, written once over
// xsimd::batch<float, A>. Instantiated per ISA in kernels/arch/; declared in
// kernels/attention_kernels.hpp.
//
// Algorithm: flash-decoding (Dao et al. 2023). Work items are (kv head, chunk of the
// sequence). An item runs all g = n_heads / n_kv_heads query heads of its kv head together
// over its chunk in blocks of 64 keys, with online softmax (attention_block.hpp), so each K
// and V row comes from memory once per step, not once per query head. Chunks of one head
// are merged exactly afterwards: M = max m_c, L = Σ l_c e^(m_c − M),
// out = Σ acc_c e^(m_c − M) / L.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>

#include "kernels/attention.hpp"
#include "kernels/attention_block.hpp"
#include "kernels/attention_block_multi.hpp"
#include "kernels/attention_heads_in_lanes.hpp"
#include "kernels/isa_neutral.hpp"
#include "kernels/prefetch_policy.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope::simd {

inline constexpr std::size_t kKeyBlock = 64;  // keys per online-softmax block (multiple of W)

// How the sequence of one decode step is cut. The split depends on the problem (and the
// kernel's min_chunk) only, not on the thread count (up to 16 threads), so results are
// bitwise identical for 1..16 threads. min_chunk: keys below which a chunk costs more in
// setup and merge than it gains.
template <class A>
struct DecodePlan {
  std::size_t chunks_per_head = 1;
  std::size_t chunk_len = 0;  // keys, a multiple of kKeyBlock

  // long_chunk: keys beyond which a chunk is split for load balance.
  // short_chunk: the keys a chunk may shrink to when a problem makes few items.
  // whole_pages: pages of a paged cache that items read whole (0: none); where they are whole
  // blocks longer than one, chunks are a whole number of pages. A chunk that ended inside a
  // page left that page's rest of every head to another item, read at the same time by the
  // other thread: MHA decode at 2,000 tokens over pages of 256 (Zen 5, 2 threads, cold,
  // chunks of 128 keys against 256) took 1.24x the contiguous step against 1.01x (f32) and
  // 1.32x against 1.07x (bf16).
  DecodePlan(std::size_t n_keys, std::size_t n_kv_heads, int threads, std::size_t min_chunk,
             std::size_t long_chunk = 8192, std::size_t short_chunk = 0,
             std::size_t whole_pages = 0) {
    const std::size_t kMinChunk = min_chunk;
    const std::size_t want_items = threads > 16 ? static_cast<std::size_t>(threads) : 16;
    std::size_t chunks = (want_items + n_kv_heads - 1) / n_kv_heads;
    const std::size_t long_chunks = (n_keys + long_chunk - 1) / long_chunk;
    if (long_chunks > chunks) chunks = long_chunks;
    std::size_t max_chunks = (n_keys + kMinChunk - 1) / kMinChunk;
    // Short contexts: fewer than 4 items leave threads idle (MQA under 1,500 tokens made 1-3),
    // so chunks may then shrink: to 4 items of short_chunk keys or more each (the last one
    // included), else to 2 of a block or more.
    if (n_kv_heads * max_chunks < 4 && short_chunk < kMinChunk) {
      for (const auto& [items, least] :
           {std::pair{std::size_t{4}, short_chunk}, std::pair{std::size_t{2}, kKeyBlock}}) {
        const std::size_t c = (items + n_kv_heads - 1) / n_kv_heads;
        if (c > max_chunks && last_chunk_keys(n_keys, c) >= least) {
          max_chunks = c;
          break;
        }
      }
    }
    if (chunks > max_chunks) chunks = max_chunks;
    if (chunks < 1) chunks = 1;
    chunk_len = chunk_keys(n_keys, chunks);
    if (rounds_to_pages(whole_pages)) {
      chunk_len = (chunk_len + whole_pages - 1) / whole_pages * whole_pages;
    }
    chunks_per_head = (n_keys + chunk_len - 1) / chunk_len;
  }

  // Whether chunks are whole pages of page_tokens (read whole by items): pages of whole blocks,
  // more than one.
  static constexpr bool rounds_to_pages(std::size_t page_tokens) {
    return page_tokens > kKeyBlock && page_tokens % kKeyBlock == 0;
  }

 private:
  static std::size_t chunk_keys(std::size_t n_keys, std::size_t chunks) {
    return ((n_keys + chunks - 1) / chunks + kKeyBlock - 1) / kKeyBlock * kKeyBlock;
  }
  // The keys of the last chunk when n_keys are cut into chunks of chunk_keys(n_keys, chunks).
  static std::size_t last_chunk_keys(std::size_t n_keys, std::size_t chunks) {
    const std::size_t len = chunk_keys(n_keys, chunks);
    return n_keys - (n_keys - 1) / len * len;
  }
};

// Per-thread buffers of one work item: g query states, their scores and weights for one
// key block, and the block tiles.
template <class A>
struct DecodeScratch {
  Scratch<A> floats;
  Scratch<A, QueryState> states;
  Scratch<A, QueryState*> active;
  Scratch<A, std::size_t> rows;
  float *q, *acc, *s, *p, *k_tile, *v_tile, *k_scale, *v_scale;
  // The rows read after a run() call's range when they are not its continuation (a paged
  // cache read page by page: the next head's rows of the page), prefetched by its last block.
  NextBlock after_range;
  // A paged cache read a page at a time by one query per head: its groups of heads' requests,
  // which every block takes a line of per line read (nullptr: blocks request the next block).
  PageGroupPrefetcher* page_group = nullptr;
  // A paged cache read a page at a time where single rows are not requested ahead: the part
  // requested while a part of one block is read (see run_page_part).
  NextBlock page_ahead;
  // One query per head, rows read in place: whether they are also requested ahead in software
  // (prefetch_single_query_rows(); without, the hardware prefetchers stream them alone).
  bool prefetch_single_rows = true;

  DecodeScratch(std::size_t g, std::size_t dp, bool tiles)
      : floats(2 * g * dp + 2 * g * kKeyBlock + 2 * kKeyBlock + (tiles ? 2 * kKeyBlock * dp : 0)),
        states(g),
        active(g),
        rows(g) {
    q = floats.get();
    acc = q + g * dp;
    s = acc + g * dp;
    p = s + g * kKeyBlock;
    k_scale = p + g * kKeyBlock;
    v_scale = k_scale + kKeyBlock;
    k_tile = v_scale + kKeyBlock;
    v_tile = k_tile + kKeyBlock * dp;
  }
};

// Query states [0, count) attend to one block: alone, or register-blocked together.
template <class A, KvDtype D, bool from_cache>
void attend_block_all(QueryState* st, std::size_t count, const KeyBlock<D>& blk, std::size_t nv,
                      const DecodeScratch<A>& ws) {
  if (count == 1) {
    attend_block<A, D, from_cache>(st[0], blk, nv, ws.s, ws.p);
  } else {
    attend_block_multi<A, D>(st, count, blk, nv, ws.s, ws.p, kKeyBlock, ws.active.get(),
                             ws.rows.get());
  }
}

// One query over keys [t0, t1) of kv head kvh within one page, read in place, taking a line of
// requests per line read: a page of 16 tokens is one block, and this is run_key_range's loop
// without what such a block does not need. The requests:
// - where single rows are requested ahead (prefetch_single_query_rows): the page group's
//   (PageGroupPrefetcher);
// - elsewhere (AMD, whose prefetchers stream a contiguous cache's rows alone) the next piece
//   in reading order: while the keys are read, the block's values; while the values are, the
//   next part's keys (the next head's of the page, else the next page's first). A page holds
//   its heads' keys and values back to back, so this is one stream, and the prefetchers alone
//   ran it slowly: a read loop over that layout (pages of 16 tokens, f32 rows of 128, 32
//   heads) at 24-31 GB/s, against 50 over a contiguous cache's and 48 with these requests
//   (Zen 5, 1 thread). MHA f32 decode at 2,000 tokens over pages of 16 took 0.68x the time
//   (1 thread) and 0.69x (2 threads, cold); bf16 0.66x, f16 0.69x. A part of one block under
//   8 KiB (ws.page_ahead, set by decode_with) requests instead the keys and values of the
//   part 8 KiB or more on.
template <class A, KvDtype D>
void run_page_part(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1,
                   QueryState& st, std::size_t nv, const DecodeScratch<A>& ws) {
  for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
    nb = kv.block_rows(b0, t1, kKeyBlock);
    const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kKeyBlock, ws.after_range);
    const float* k_scale = nullptr;
    const float* v_scale = nullptr;
    if constexpr (D == KvDtype::int8) {
      block_scales<A>(kv, kvh, b0, nb, kKeyBlock, ws.k_scale, ws.v_scale, k_scale, v_scale);
      next.prefetch_scales();
    }
    KeyBlock<D> blk{reinterpret_cast<const elem_t<D>*>(kv.k_row(kvh, b0)),
                    reinterpret_cast<const elem_t<D>*>(kv.v_row(kvh, b0)),
                    kv.head_dim,
                    b0,
                    nb,
                    k_scale,
                    v_scale};
    if (ws.prefetch_single_rows) {
      blk.k_lines = &ws.page_group->key_lines(), blk.v_lines = &ws.page_group->value_lines();
      attend_block<A, D, true>(st, blk, nv, ws.s, ws.p);
      continue;
    }
    // While the keys are read: the part ahead's keys, else this block's values; while the
    // values are: the part ahead's values, else the next block's keys.
    const bool part_ahead = nb == t1 - t0 && ws.page_ahead.rows > 0;
    const NextBlock& ahead = ws.page_ahead;
    PageRunPrefetcher during_keys = part_ahead
                                        ? PageRunPrefetcher(ahead.k, ahead.rows * kv.k_row_bytes())
                                        : PageRunPrefetcher(blk.v, nb * kv.v_row_bytes());
    PageRunPrefetcher during_values =
        part_ahead ? PageRunPrefetcher(ahead.v, ahead.rows * kv.v_row_bytes())
                   : PageRunPrefetcher(next.k, next.rows * kv.k_row_bytes());
    blk.k_lines = &during_keys, blk.v_lines = &during_values;
    attend_block<A, D, true>(st, blk, nv, ws.s, ws.p);
  }
}

// Pages a part of run_page_heads spans at most: a block's, pages of one AVX-512 vector each.
inline constexpr std::size_t kMaxPagesPerPart = kKeyBlock / 16;

// The parts of kv heads [kvh0, kvh0 + heads) of a paged cache over keys [t0, t1) in reading
// order: a page's heads in turn, then the next page's (none for no heads). A part holds one
// head's rows of up to `pages` consecutive pages (runs; whole pages but the last): their heads in
// turn, then the next pages'. A page holds its heads' blocks at a fixed stride, so a part is found
// by a step, not a page-table lookup.
class PagePartCursor {
 public:
  KVSCOPE_ISA_NEUTRAL PagePartCursor(const KvView& kv, std::size_t kvh0, std::size_t heads,
                                     std::size_t t0, std::size_t t1, std::size_t pages = 1)
      : kv_(&kv),
        kvh0_(kvh0),
        heads_(heads),
        t1_(t1),
        pages_(pages < 1                  ? 1
               : pages > kMaxPagesPerPart ? kMaxPagesPerPart
                                          : pages),
        b0_(heads > 0 ? t0 : t1) {
    start_page();
  }
  bool done() const { return b0_ >= t1_; }
  std::size_t head() const { return i_; }  // of the item: kv head kvh0 + head()
  std::size_t first_key() const { return b0_; }
  std::size_t rows() const { return done() ? 0 : rows_; }  // of all its runs
  std::size_t runs() const { return done() ? 0 : runs_; }
  // Run j's rows (NextBlock::at's, found by a step from head kvh0's); part() is run 0.
  KVSCOPE_ISA_NEUTRAL NextBlock run(std::size_t j) const {
    if (done() || j >= runs_) return {};
    NextBlock at = page_[j];
    const std::size_t step = i_ * kv_->k_head_stride_bytes;  // V's stride is the same in a page
    const auto stepped = [step](const float* scales) {
      return scales
                 ? reinterpret_cast<const float*>(reinterpret_cast<const std::byte*>(scales) + step)
                 : nullptr;
    };
    at.kvh += i_, at.k += step, at.v += step;
    at.k_scale = stepped(at.k_scale), at.v_scale = stepped(at.v_scale);
    return at;
  }
  KVSCOPE_ISA_NEUTRAL NextBlock part() const { return run(0); }
  KVSCOPE_ISA_NEUTRAL void advance() {
    if (done()) return;
    if (++i_ < heads_) return;
    i_ = 0, b0_ += rows_;
    start_page();
  }

 private:
  KVSCOPE_ISA_NEUTRAL void start_page() {
    runs_ = rows_ = 0;
    if (done()) return;
    for (std::size_t pos = b0_; runs_ < pages_ && pos < t1_;) {
      const NextBlock run =
          NextBlock::at(*kv_, kvh0_, pos, kv_->block_rows(pos, t1_, kv_->page_tokens));
      page_[runs_++] = run;
      rows_ += run.rows, pos += run.rows;
      // Only whole pages are followed by another run (so that every run but the last holds
      // whole vectors of scores where pages do).
      if (run.rows != kv_->page_tokens) break;
    }
  }
  const KvView* kv_;
  std::size_t kvh0_, heads_, t1_, pages_, b0_, i_ = 0;
  std::size_t runs_ = 0, rows_ = 0;
  NextBlock page_[kMaxPagesPerPart];  // head kvh0's runs of the current part
};

// One query per kv head (st[i] for head kvh0 + i) over keys [t0, t1) of kv heads
// [kvh0, kvh0 + heads) of a paged cache with pages of at most a block, where single rows are
// not requested ahead (AMD); for int8, bf16 and f16 rows (kPipelinesPages). A page of 16 tokens is
// one vector of scores a head, and a part's chain (scores → max → e^x → p·V) then cost more than
// its loads and FMAs: run_page_part, a part at a time, took 1.7-1.8x the contiguous step's
// time warm. So the parts are software-pipelined: part k + 1's scores are computed between
// part k's softmax update and its p·V. That reads part k + 1's keys before part k's values,
// so the heads go in two streams, the item's first half and its second, taking parts in turn:
// each stream still reads its rows in order (a page's heads, then the next page's) and the
// hardware prefetchers follow it. While a part's keys are read, the keys of the part `ahead`
// on in its stream are requested, while its values are, that part's values (ahead: decode_with's
// parts_ahead, 8 KiB of parts, at least one).
// A part may span several pages (pages_per_part, at most kMaxPagesPerPart; decode_with sets it
// for int8 rows on AVX-512): one head's rows of consecutive pages (runs), whose scores lie side
// by side for one softmax update, their p·V run by run, each run requesting the same run's rows
// of the part ahead.
// MHA int8 decode over pages of 16, Zen 5, 2 threads, against run_page_part (binaries
// alternated; contiguous step in brackets): warm 0.69x the time at 2,000 tokens; cold with
// memory in its fast state 0.65x at 2,000 (1.08x the contiguous step against 1.66x) and
// 0.69-0.72x at 32,768 (1.05-1.08x against 1.50-1.55x); in its slow state level at 2,000
// (1.10x) but 1.11x at 32,768 (1.17-1.19x against 1.06-1.08x), where reading in strict order
// paid. One stream (part k + 1's keys before part k's values) took 1.06x the time of two at
// 32,768 fast, 1.04x slow; four 1.10x, eight 1.06x. Pages of 32 0.87x, of 64 0.96x (2,000,
// fast). bf16 at 2,000 tokens: fast 0.80x (1.05x the contiguous step against 1.30x), slow
// 1.02x; at 32,768 fast 0.84x; f16 slow 1.02x at 2,000 and 0.99x at 32,768. f32 rows, whose
// step is bound by memory (run_page_part reads them as fast as a contiguous cache), keep
// run_page_part: pipelined they took 1.11x its time cold (slow state).
// Pages of a whole block (64 rows, whose chain costs what a contiguous cache's block's does)
// are read in series instead, in one stream of parts in memory order (a page's heads, each
// head's keys, then its values): pipelined, the two streams' reads interleave, and a read loop
// in that order alone took 1.07-1.09x the time of one in memory order (Zen 4, 2 threads, cold,
// pages of 16). MHA decode over pages of 64, Zen 4, 2 threads, cold, steps of both alternated
// in one process, in series against pipelined: int8 (fp32-fma) 0.78-0.92x the time at 2,000
// tokens (warm 0.85-0.94x) and 0.89-0.97x at 32,768; bf16 and f16 0.97-0.98x and 0.96-0.99x
// (warm level); on AVX2 int8 0.90x, bf16 1.02x. Over pages of 16 and 32 (int8 in parts of 4
// and 2 pages) in series measured level (0.99-1.05x) and they keep the pipeline.
template <class A, KvDtype D>
void run_page_heads(const KvView& kv, std::size_t kvh0, std::size_t heads, std::size_t t0,
                    std::size_t t1, QueryState* st, std::size_t nv, std::size_t ahead,
                    std::size_t pages_per_part) {
  constexpr std::size_t W = fbatch<A>::size;
  // One page's rows of a part, and the requests of the values of the same run of the part
  // ahead (made while these values are read).
  struct Run {
    const elem_t<D>* k = nullptr;
    const elem_t<D>* v = nullptr;
    const float* k_scale = nullptr;
    std::size_t n = 0;  // visible rows
    PageRunPrefetcher values_ahead{nullptr, 0};
  };
  // One part in flight: its runs, scores and weights (runs side by side, each but the last
  // whole vectors long).
  struct Slot {
    Run runs[kMaxPagesPerPart];
    std::size_t n_runs = 0;
    QueryState* st = nullptr;
    std::size_t n = 0;  // visible rows of all runs
    const float* v_scale = nullptr;
    alignas(64) float s[kKeyBlock];
    alignas(64) float p[kKeyBlock];
    alignas(64) float scales[2][kKeyBlock];  // padded k scales of a short run; v scales of all
  };
  Slot slots[2];

  // Two streams of parts, each in reading order: the first half of the heads and the second.
  // Pages of a whole block are read in series, in one stream.
  struct Stream {
    PagePartCursor cur, later;
  };
  const bool in_series = kv.page_tokens >= kKeyBlock;
  const std::size_t half = in_series ? heads : (heads + 1) / 2;
  Stream streams[2] = {{PagePartCursor(kv, kvh0, half, t0, t1, pages_per_part),
                        PagePartCursor(kv, kvh0, half, t0, t1, pages_per_part)},
                       {PagePartCursor(kv, kvh0 + half, heads - half, t0, t1, pages_per_part),
                        PagePartCursor(kv, kvh0 + half, heads - half, t0, t1, pages_per_part)}};
  for (Stream& stream : streams) {
    for (std::size_t i = 0; i < ahead; ++i) stream.later.advance();
  }
  std::size_t turn = 0;
  // Sets up the next part (the streams in turn) in `slot` and computes its scores; false when
  // none is left.
  const auto start = [&](Slot& slot) {
    Stream* stream = &streams[turn % 2];
    if (stream->cur.done()) stream = &streams[(turn + 1) % 2];
    if (stream->cur.done()) return false;
    ++turn;
    PagePartCursor& cur = stream->cur;
    PagePartCursor& later = stream->later;
    slot.st = st + (cur.part().kvh - kvh0);
    slot.n_runs = cur.runs();
    slot.n = 0;
    slot.v_scale = nullptr;
    for (std::size_t j = 0; j < slot.n_runs; ++j) {
      const NextBlock run = cur.run(j), run_ahead = later.run(j);
      if constexpr (D == KvDtype::int8) run_ahead.prefetch_scales();
      Run& r = slot.runs[j];
      r.k = reinterpret_cast<const elem_t<D>*>(run.k);
      r.v = reinterpret_cast<const elem_t<D>*>(run.v);
      r.k_scale = run.k_scale;
      r.values_ahead = PageRunPrefetcher(run_ahead.v, run_ahead.rows * kv.v_row_bytes());
      const KeyBlock<D> blk{r.k, r.v, kv.head_dim, run.pos, run.rows, run.k_scale, run.v_scale};
      r.n = visible_rows(*slot.st, blk);
      if (r.n == 0) continue;  // (a causal query: no later run is visible either)
      const float* v_scale = run.v_scale;
      if (r.n % W != 0 && r.k_scale != nullptr) {  // a short run: padded scales
        block_scales<A>(kv, run.kvh, run.pos, r.n, (r.n + W - 1) / W * W, slot.scales[0],
                        slot.scales[1] + slot.n, r.k_scale, v_scale);
      }
      if (v_scale != nullptr) {
        if (slot.n_runs == 1) {
          slot.v_scale = v_scale;
        } else {  // the runs' value scales side by side
          if (v_scale != slot.scales[1] + slot.n)
            std::copy(v_scale, v_scale + r.n, slot.scales[1] + slot.n);
          slot.v_scale = slot.scales[1];
        }
      }
      PageRunPrefetcher keys_ahead(run_ahead.k, run_ahead.rows * kv.k_row_bytes());
      query_scores<A, D, true>(slot.st->q, r.k, kv.head_dim, r.n, nv, r.k_scale, slot.s + slot.n,
                               keys_ahead);
      slot.n += r.n;
    }
    cur.advance(), later.advance();
    return true;
  };
  const auto softmax = [&](Slot& slot) {
    if (slot.n > 0) softmax_update<A>(*slot.st, slot.s, slot.n, slot.v_scale, nv, slot.p);
  };
  const auto pv = [&](Slot& slot) {
    for (std::size_t j = 0, done = 0; j < slot.n_runs && done < slot.n; done += slot.runs[j++].n) {
      Run& r = slot.runs[j];
      block_pv<A, D>(slot.p + done, r.v, kv.head_dim, r.n, nv, slot.st->acc, r.values_ahead);
    }
  };
  if (in_series) {
    while (start(slots[0])) softmax(slots[0]), pv(slots[0]);
    return;
  }
  bool more = start(slots[0]);
  for (std::size_t k = 0; more; ++k) {
    Slot& slot = slots[k % 2];
    softmax(slot);
    more = start(slots[(k + 1) % 2]);
    pv(slot);
  }
}

// Runs query states [0, count) over keys [t0, t1) of kv head `kvh`, 64 keys at a time.
// direct: read the cache rows in place, widening in registers; otherwise widen each block
// once into f32 tiles shared by all query vectors.
template <class A, KvDtype D>
void run_key_range(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1,
                   QueryState* st, std::size_t count, std::size_t nv, bool direct,
                   const DecodeScratch<A>& ws) {
  constexpr std::size_t W = fbatch<A>::size;
  const std::size_t d = kv.head_dim;
  if (ws.page_group != nullptr && direct && count == 1) {  // rows of one page
    return run_page_part<A, D>(kv, kvh, t0, t1, st[0], nv, ws);
  }
  // Rows read in place take blocks across pages (attend_block_chunked): one query, or several
  // that all see the whole range (decode; a causal tile would need its rows cut per query).
  const bool chunked = direct && (count == 1 || all_see(st, count, t1));
  // One query reading rows of under 32 KiB a block in place: prefetches by groups of blocks.
  // (GQA-8's query tiles on groups took 1.02-1.12x the time: they keep the next block's.)
  GroupPrefetcher group(kv, kvh, t0, t1, kKeyBlock, ws.after_range);
  const bool ahead = count > 1 || ws.prefetch_single_rows;
  // One query reading 16-bit or int8 rows of a contiguous cache in place where the hardware
  // prefetchers stream them alone (AMD): they fell behind (the widening puts more work
  // between loads than f32 rows carry), so the rows kRowsAheadBytes on in the same range are
  // requested, a line per line read. MHA decode at 2,000 tokens on Zen 5, cold: int8 0.73-0.78x
  // the time, bf16 0.77-0.91x, f16 0.84-0.88x; at 32,768 int8 0.70x, bf16 0.89x (4 or 16 KiB
  // ahead did less; f32 rows took 1.01-1.06x, and the next block, 32 KiB on, 1.21x: left to the
  // hardware).
  constexpr std::size_t kRowsAheadBytes = 8 * 1024;
  const bool rows_ahead = direct && count == 1 && !ahead && D != KvDtype::f32 && !kv.paged();
  const std::size_t skip_rows = (kRowsAheadBytes + kv.k_row_bytes() - 1) / kv.k_row_bytes();
  const bool grouped = direct && count == 1 && group.grouped() && ahead;
  for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
    nb = chunked ? kv.chunked_block_rows(b0, t1, kKeyBlock) : kv.block_rows(b0, t1, kKeyBlock);
    const float* k_scale = nullptr;
    const float* v_scale = nullptr;
    if constexpr (D == KvDtype::int8) {
      block_scales<A>(kv, kvh, b0, nb, kKeyBlock, ws.k_scale, ws.v_scale, k_scale, v_scale);
    }
    if (chunked && kv.spans_pages(b0, nb)) {
      NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kKeyBlock, ws.after_range);
      for (std::size_t r = 0; r < next.rows; r += BlockRows::kChunkRows) {
        const std::size_t n = std::min(BlockRows::kChunkRows, next.rows - r);
        NextBlock::at(kv, next.kvh, next.pos + r, n).prefetch_scales();
      }
      const BlockRows k = kv.k_block(kvh, b0, nb), v = kv.v_block(kvh, b0, nb);
      const BlockRows k_next = kv.k_block(next.kvh, next.pos, next.rows);
      const BlockRows v_next = kv.v_block(next.kvh, next.pos, next.rows);
      const std::size_t n_next = ahead ? next.rows : 0;
      if (count == 1) {
        attend_block_chunked<A, D>(st[0], k, v, b0, nb, d, nv, k_scale, v_scale, k_next, v_next,
                                   n_next, ws.s, ws.p);
      } else {
        attend_block_multi_chunked<A, D>(st, count, k, v, b0, nb, d, nv, k_scale, v_scale, k_next,
                                         v_next, n_next, ws.s, ws.p, kKeyBlock, ws.active.get(),
                                         ws.rows.get());
      }
      continue;
    }
    const auto* k = reinterpret_cast<const elem_t<D>*>(kv.k_row(kvh, b0));
    const auto* v = reinterpret_cast<const elem_t<D>*>(kv.v_row(kvh, b0));
    if (grouped) {  // the group requests the rows ahead; no next block to find
      group.at_block(b0, nb);
      KeyBlock<D> blk{k, v, d, b0, nb, k_scale, v_scale};
      blk.k_lines = &group.key_lines(), blk.v_lines = &group.value_lines();
      attend_block<A, D, true>(st[0], blk, nv, ws.s, ws.p);
      continue;
    }
    const NextBlock next = NextBlock::within(kv, kvh, b0, nb, t1, kKeyBlock, ws.after_range);
    if (kv.paged()) next.prefetch_scales();
    // A next block across pages: its first page's rows (the rest are elsewhere).
    std::size_t n_next = !ahead                 ? 0
                         : next.spans_pages(kv) ? kv.page_tokens - kv.row_in_page(next.pos)
                                                : next.rows;
    const auto* k_next = reinterpret_cast<const elem_t<D>*>(next.k);
    const auto* v_next = reinterpret_cast<const elem_t<D>*>(next.v);
    if (rows_ahead) {  // the range's rows kRowsAheadBytes on, as many as the block has
      const std::size_t from = b0 + skip_rows;
      n_next = from < t1 ? std::min(nb, t1 - from) : 0;
      if (n_next > 0) {
        k_next = reinterpret_cast<const elem_t<D>*>(kv.k_row(kvh, from));
        v_next = reinterpret_cast<const elem_t<D>*>(kv.v_row(kvh, from));
      }
    }
    if (direct) {
      const KeyBlock<D> blk{k, v, d, b0, nb, k_scale, v_scale, k_next, v_next, n_next};
      attend_block_all<A, D, true>(st, count, blk, nv, ws);
    } else {
      widen_rows<A, D>(k, d, nb, nv, ws.k_tile, k_next, n_next);
      widen_rows<A, D>(v, d, nb, nv, ws.v_tile, v_next, n_next);
      const KeyBlock<KvDtype::f32> blk{ws.k_tile, ws.v_tile, nv * W, b0, nb, k_scale, v_scale};
      attend_block_all<A, KvDtype::f32, false>(st, count, blk, nv, ws);
    }
  }
}

// Runs query states over a key range on compute unit U; one per thread. The fp32-fma runner
// is run_key_range; the dot units' runners are in kernels/units/dot_unit_attention.hpp.
template <class A, KvDtype D, ComputeUnit U>
struct KeyRunner;

// Caches read by W or more queries at once (MQA, wide GQA, prefill tiles) put the queries in
// the lanes (attention_heads_in_lanes.hpp; 16-bit and int8 rows widened once per block for
// all of them); the rest run run_key_range.
template <class A, KvDtype D>
struct KeyRunner<A, D, ComputeUnit::fp32_fma> {
  static constexpr bool kLanes =
      D == KvDtype::f32 || D == KvDtype::f16 || D == KvDtype::bf16 || D == KvDtype::int8;
  KeyRunner(std::size_t head_dim, std::size_t max_queries) {
    if constexpr (kLanes) {
      if (HeadsInLanes<A>::suits(max_queries, kKeyBlock, true)) {
        lanes.emplace(head_dim, max_queries);
      }
    }
  }
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t nv, bool direct, const DecodeScratch<A>& ws) {
    if constexpr (kLanes) {
      if (lanes && HeadsInLanes<A>::suits(count, t1 - t0, all_see(st, count, t1))) {
        return lanes->template run<D>(kv, kvh, t0, t1, st, count, ws.after_range);
      }
    }
    run_key_range<A, D>(kv, kvh, t0, t1, st, count, nv, direct, ws);
  }
  // One query per kv head over whole pages, all heads of an item (run_page_heads).
  void run_pages(const KvView& kv, std::size_t kvh0, std::size_t heads, std::size_t t0,
                 std::size_t t1, QueryState* st, std::size_t nv, std::size_t ahead,
                 std::size_t pages_per_part) {
    run_page_heads<A, D>(kv, kvh0, heads, t0, t1, st, nv, ahead, pages_per_part);
  }
  std::optional<HeadsInLanes<A>> lanes;
};

// q_out[0, dp) ← q[0, d) · scale, zero-padded; the score scale fused into the query.
template <class A>
void load_scaled_query(const float* q, std::size_t d, std::size_t dp, float scale, float* q_out) {
  for (std::size_t j = 0; j < d; ++j) q_out[j] = q[j] * scale;
  for (std::size_t j = d; j < dp; ++j) q_out[j] = 0.0f;
}

// A runner constructible as Runner(head_dim, max_queries, ForPrefill{}) is made so for prefill,
// where one call's cache is fixed and every query block of a kv head reads the same rows: it
// may prepare them once per kv head (AMX-BF16 interleaves bf16 and f16 value rows in pairs).
struct ForPrefill {};

// Keys per work item at least (DecodePlan's min_chunk): 512 for most runners; kernels whose
// run() sets up more (packing 32 queries, tile accumulators) raise it. Each item sets up its
// queries' states, starts its rows' streams cold and leaves partials to merge. Against 256
// (Zen 4, 2 threads, cold, alternated 6 times): MQA decode at 2,000 tokens 0.94x the time
// (f32), 0.93x (bf16), 0.87x (int8), at 600 tokens 0.81x (int8); GQA-16 bf16 0.92x. The cost:
// at 2,000 tokens MQA now makes 4 items, not 8, so more threads than 4 cannot share them.
template <class Runner>
inline constexpr std::size_t kMinChunkKeys = 512;
// Keys per work item at least when a problem makes 4 items instead of fewer (DecodePlan's
// short_chunk): 256. MQA decode, Zen 4, 2 threads, cold, against HEAD's items of 512 (old and
// new binaries alternated 6 times, the lanes kernel's shorter ranges included): f32 0.65x the
// time at 200 tokens (2 items), 0.71x at 400, 0.76x at 1,500 (4 items); bf16 0.64x, 0.75x,
// 0.79x; int8 0.63x, 0.80x, 0.85x.
// Runners that need longer items (the AMX runners' 1,024) keep their minimum: unmeasured there.
template <class Runner>
inline constexpr std::size_t kShortChunkKeys =
    kMinChunkKeys<Runner> <= 512 ? 256 : kMinChunkKeys<Runner>;

// Runners whose run() costs nothing beyond its keys (no query packing or state copies per
// call) can be called a page at a time: decode_with then reads a paged cache page by page.
template <class Runner>
inline constexpr bool kRunsPageByPage = false;
template <class A, KvDtype D>
inline constexpr bool kRunsPageByPage<KeyRunner<A, D, ComputeUnit::fp32_fma>> = true;
// Runners with run_pages(kv, kvh0, heads, t0, t1, st, nv, ahead): one query per kv head, whole
// pages read by run_page_heads (int8, bf16 and f16 rows widened in registers; f32 rows keep
// run_page_part, see run_page_heads).
template <class Runner>
inline constexpr bool kPipelinesPages = false;
template <class A, KvDtype D>
inline constexpr bool kPipelinesPages<KeyRunner<A, D, ComputeUnit::fp32_fma>> =
    D == KvDtype::int8 || D == KvDtype::bf16 || D == KvDtype::f16;
// run() and run_paged() for runners that keep their queries in slots across calls: Derived
// has begin(st, count, first) (queries into the unit's format, accumulators into its order, in
// slots [first, first + count)), keys(kv, kvh, t0, t1, st, count, first, after_range) and
// end(st, count, first). Over a paged cache the setup then runs once per work item, not per
// page (needs max_queries ≥ heads · g). Derived::kPagePartRows: the rows keys() takes at once
// over a paged cache (for_page_parts' min_rows: 0 for a page at a time).
template <class Derived>
class SlotKeyRunner {
 public:
  template <class Scratch>
  void run(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1, QueryState* st,
           std::size_t count, std::size_t /*nv*/, bool /*direct*/, const Scratch& /*unused*/) {
    self().begin(st, count, 0);
    self().keys(kv, kvh, t0, t1, st, count, 0, NextBlock{});
    self().end(st, count, 0);
  }
  // The states of kv heads [kvh0, kvh0 + heads), g per head (st[i·g …]), over keys [t0, t1),
  // each page's heads in turn.
  void run_paged(const KvView& kv, std::size_t kvh0, std::size_t heads, std::size_t t0,
                 std::size_t t1, QueryState* st, std::size_t g) {
    self().begin(st, heads * g, 0);
    for_page_parts(kv, kvh0, heads, t0, t1, Derived::kPagePartRows,
                   [&](std::size_t i, std::size_t b0, std::size_t b1, const NextBlock& next) {
                     self().keys(kv, kvh0 + i, b0, b1, st + i * g, g, i * g, next);
                   });
    self().end(st, heads * g, 0);
  }

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

// Runners with run_paged(kv, kvh0, heads, t0, t1, st, g) read the pages themselves (their
// per-call setup hoisted out of the page loop); decode_with calls run() page by page for the
// others.
template <class Runner>
inline constexpr bool kPagesItself = requires(Runner& r, const KvView& kv, QueryState* st) {
  r.run_paged(kv, std::size_t{}, std::size_t{}, std::size_t{}, std::size_t{}, st, std::size_t{});
};

// The kv heads of one paged work item: the most, up to 8, that divide n_kv_heads. A page
// holds its heads' rows back to back, so 8 heads still read runs of 16-64 KiB per page
// (int8 to f32, d_head 128), while MHA's 32 heads make 4 items per chunk: 4 chunks of
// a head to merge at 2,000 tokens, not 16.
inline std::size_t page_heads_per_item(std::size_t n_kv_heads) {
  std::size_t heads = n_kv_heads < 8 ? n_kv_heads : 8;
  while (n_kv_heads % heads != 0) --heads;
  return heads;
}

// Decode: p.n_queries == 1 at position p.first_pos; keys [0, first_pos] of every kv head.
// out, q: [n_heads × head_dim]. Threads over (kv head, chunk) items, then over heads to merge.
// make_runner(head_dim, max_queries) makes one thread's KeyRunner (it reads the cache);
// direct is passed on to it.
//
// A paged cache is read by items of (chunk, group of kv heads: page_heads_per_item), page by
// page, each page's heads of the group in turn: a page holds every head's rows back to back
// (kv_view.hpp), so the item streams runs of a page (64 KiB of K for 8 heads × 16 f32 rows of
// 128) where a head at a time would read scattered pieces of 8 KiB (measured on Zen 5: a
// plain read loop over shuffled 8 KiB pieces runs at 16 GB/s against 43 in order; MHA decode
// at 32,768 tokens over pages of 16 went from 1.5-2.2× the contiguous step to 1.2×).
template <class A, class MakeRunner>
void decode_with(const AttentionProblem& p, int threads, bool direct,
                 const MakeRunner& make_runner) {
  constexpr std::size_t W = fbatch<A>::size;
  using Runner = decltype(make_runner(std::size_t{}, std::size_t{}));
  const KvView& kv = p.kv;
  const std::size_t d = kv.head_dim;
  const std::size_t nv = (d + W - 1) / W;
  const std::size_t dp = nv * W;
  const std::size_t g = p.n_heads / kv.n_kv_heads;
  const std::size_t n_keys = p.first_pos + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const bool by_page = kRunsPageByPage<Runner> && kv.paged() && kv.n_kv_heads > 1;
  const bool single_rows_ahead = prefetch_single_query_rows();
  // One query per head streaming its rows without software prefetches reads whole pages, all
  // heads of each in turn: a page is then one run for the hardware prefetchers (pages of 16,
  // f32 rows of 128: 512 KiB, against 128 KiB for 8 heads). Measured on Zen 4, MHA f32 decode
  // at 2,000 tokens: 1.06x the contiguous step, against 1.20x for items of 8 heads.
  const bool whole_pages = direct && g == 1 && !single_rows_ahead;
  std::size_t heads_per_item = !by_page      ? 1
                               : whole_pages ? kv.n_kv_heads
                                             : page_heads_per_item(kv.n_kv_heads);
  // One query per head reading pages shorter than a block in place: a page at a time, heads in
  // groups (PageGroupPrefetcher), or each piece requesting the next (run_page_part), rather than
  // blocks across pages (on Zen 5, blocks of 64 across 4 pages of 16 took 1.16x the contiguous
  // step, a page at a time with the next piece requested 0.97x). Where single rows are not
  // requested ahead (AMD), longer pages too: their blocks, read by run_key_range, requested
  // nothing, and the prefetchers alone followed the page's K and V runs slowly. MHA decode at
  // 2,000 tokens on Zen 5 (2 threads, cold), against the contiguous step: pages of 64 from
  // 1.48-1.51x to 1.09-1.14x (int8, exact), 1.10x to 1.03x (bf16); pages of 128 from 1.76-1.84x
  // to 1.25-1.27x (int8) and 1.26x to 1.15x (bf16); f32 level.
  const bool page_groups =
      by_page && direct && g == 1 && (kv.page_tokens < kKeyBlock || !single_rows_ahead);
  // Parts of a page under kPartsAheadBytes (K and V rows of one head) are requested that far
  // ahead, a whole number of parts on (page_read_ahead), rather than each part's values while
  // its keys are read and the next part's keys while its values are (run_page_part): int8 rows
  // of 128 in pages of 16 make parts of 4 KiB, and the requests came 2 KiB ahead, too late.
  // MHA int8 decode over pages of 16 on Zen 5 (2 threads, cold, widening), against the
  // contiguous step: 1.22-1.53x before, 1.10-1.17x one part ahead, 1.05-1.07x two (at 2,000
  // and 32,768 tokens), 1.07-1.21x four. bf16's parts of 8 KiB kept the pairwise requests: one
  // part ahead took 1.03-1.10x against their 1.01-1.06x.
  constexpr std::size_t kPartsAheadBytes = 8 * 1024;
  const std::size_t part_bytes = kv.page_tokens * (kv.k_row_bytes() + kv.v_row_bytes());
  // Parts of `bytes` (> 0) that make kPartsAheadBytes; 0 for parts of that size or more.
  const auto parts_in_reach = [](std::size_t bytes) {
    return bytes < kPartsAheadBytes ? (kPartsAheadBytes + bytes - 1) / bytes : 0;
  };
  const std::size_t parts_ahead =
      page_groups && !single_rows_ahead ? parts_in_reach(part_bytes) : 0;
  // int8 and 16-bit rows over pages of at most a block there: run_page_heads, which pipelines
  // parts shorter than a block.
  const bool page_heads =
      kPipelinesPages<Runner> && page_groups && !single_rows_ahead && kv.page_tokens <= kKeyBlock;
  // int8 rows on AVX-512 take parts of a block's whole pages (run_page_heads): pages of 16
  // then make one softmax update, horizontal max and sum and part setup per 64 rows rather than
  // per 16. MHA int8 decode over pages of 16, Zen 4, 2 threads, in pairs against parts of one
  // page: 0.82-0.87x the time (2,000 and 32,768 tokens, warm and cold); pages of 32 0.93-0.94x.
  // 16-bit rows (1.02x) and AVX2 (W = 8: 1.00-1.02x) keep parts of one page.
  const std::size_t pages_per_part = page_heads && W == 16 && kv.k_dtype == KvDtype::int8 &&
                                             kv.page_tokens % W == 0 &&
                                             kKeyBlock % kv.page_tokens == 0
                                         ? kKeyBlock / kv.page_tokens
                                         : 1;
  const std::size_t page_parts_ahead =
      page_heads ? std::max<std::size_t>(parts_in_reach(pages_per_part * part_bytes), 1) : 1;
  // Page by page an item holds several heads, so one query per head reading in place may take
  // chunks as short as a block (16 items rather than 7 at 2,000 tokens keep 2 threads evenly
  // loaded), and long contexts are cut finer. Runners that set up more per item (query groups,
  // the dot units' slots) keep the runner's minimum: at 2,000 tokens over pages of 16 (Zen 4,
  // 2 threads, old and new binaries alternated), GQA-8 int8 (vnni-int8) took 0.85x the time of
  // items of 64 keys, f32 and bf16 (fp32-fma) 0.88x and 0.91x; MHA int8 (vnni-int8) 0.98-1.01x
  // (0.88x in an A/B within one binary). MHA f32 and bf16 reading in place took 1.03-1.12x
  // with items of 512 keys, so they keep 64.
  // run_page_heads keeps 512 too (4 items at 2,000 tokens), its parts being cheaper to read
  // than its items to set up and merge: MHA int8 over pages of 16 (Zen 5, 2 threads) took
  // 0.91-0.94x the time warm, cold 0.88x with memory fast and 0.98x slow (items of 1,024 level
  // with 512).
  // (At most 512 over pages: AMX's 1,024 is unmeasured there.)
  const bool short_items = g == 1 && !kPagesItself<Runner> && !page_heads;
  const std::size_t min_chunk = !by_page      ? kMinChunkKeys<Runner>
                                : short_items ? kKeyBlock
                                              : std::min<std::size_t>(kMinChunkKeys<Runner>, 512);
  const auto plan_for = [&](std::size_t heads) {
    return DecodePlan<A>(n_keys, kv.n_kv_heads / heads, threads, min_chunk, by_page ? 2048 : 8192,
                         kShortChunkKeys<Runner>, by_page ? kv.page_tokens : 0);
  };
  DecodePlan<A> plan = plan_for(heads_per_item);
  // Chunks of whole pages (DecodePlan's whole_pages) can leave fewer items than the plan's 16
  // for up to 16 threads (2,000 tokens over pages of 256: 8 chunks): items then hold half as
  // many heads, each still reading runs of a page, until there are 16. On 2 threads that
  // measured level with 8 items (MHA at 2,000 tokens over pages of 256, Zen 5, cold, 3
  // alternations: f32 0.98-0.99x the contiguous step either way, bf16 1.06-1.07x against
  // 1.05-1.07x).
  while (by_page && DecodePlan<A>::rounds_to_pages(kv.page_tokens) && heads_per_item % 2 == 0 &&
         kv.n_kv_heads / heads_per_item * plan.chunks_per_head < 16) {
    heads_per_item /= 2;
    plan = plan_for(heads_per_item);
  }
  const std::size_t chunks = plan.chunks_per_head;
  const std::size_t n_items = kv.n_kv_heads / heads_per_item * chunks;
  const bool split = chunks > 1;
  // Per (kv head, chunk, query head): acc [dp], then m and l.
  const std::size_t part_stride = dp + 2;
  Scratch<A> partial(split ? kv.n_kv_heads * chunks * g * part_stride : 1);

  std::atomic<long> unclaimed{0};  // items claimed after the threads' first ones
#pragma omp parallel num_threads(threads)
  {
    DecodeScratch<A> ws(g * heads_per_item, dp, !direct);
    ws.prefetch_single_rows = single_rows_ahead;
    PageGroupPrefetcher page_group(kv, heads_per_item);
    if (page_groups) ws.page_group = &page_group;
    // A runner that pages itself keeps every head's queries of an item at once.
    auto runner = make_runner(d, kPagesItself<Runner> ? g * heads_per_item : g);
    QueryState* st = ws.states.get();
    const long last_item = static_cast<long>(n_items);
    // Keys [first_key(item), end_key(first_key(item))) of kv head item / chunks.
    const auto first_key = [&](long item) {
      return static_cast<std::size_t>(item) % chunks * plan.chunk_len;
    };
    const auto end_key = [&](std::size_t t0) { return std::min(t0 + plan.chunk_len, n_keys); };
    // Items are claimed one ahead (dynamic scheduling by hand), so that the item a thread takes
    // next is known during this one: a contiguous cache's key ranges then request the next
    // item's first rows during their last block, as they request each next block.
    // Each thread's first item is its own. Claimed from the counter, the first thread's first
    // and following items were both claimed before the second thread came, and a problem of
    // two items ran on one thread; MQA decode at 1,000 tokens now takes 0.54x the time (f32),
    // 0.62x (bf16), 0.59x (int8; Zen 4, 2 threads, cold).
    const long team = omp_get_num_threads();
    for (long item = omp_get_thread_num(), following; item < last_item; item = following) {
      following = team + unclaimed.fetch_add(1);
      const std::size_t kvh0 = static_cast<std::size_t>(item) / chunks * heads_per_item;
      const std::size_t chunk = static_cast<std::size_t>(item) % chunks;
      const std::size_t t0 = first_key(item), t1 = end_key(t0);
      for (std::size_t h = 0; h < g * heads_per_item; ++h) {
        st[h] = QueryState{ws.q + h * dp, ws.acc + h * dp, -std::numeric_limits<float>::infinity(),
                           0.0f, n_keys - 1};
        load_scaled_query<A>(p.q + (kvh0 * g + h) * d, d, dp, scale, st[h].q);
        for (std::size_t j = 0; j < dp; ++j) st[h].acc[j] = 0.0f;
      }
      if constexpr (kPagesItself<Runner>) {
        if (by_page) runner.run_paged(kv, kvh0, heads_per_item, t0, t1, st, g);
      } else if (page_heads) {
        if constexpr (kPipelinesPages<Runner>) {
          runner.run_pages(kv, kvh0, heads_per_item, t0, t1, st, nv, page_parts_ahead,
                           pages_per_part);
        }
      } else if (by_page) {
        // Rows read in place take blocks across pages (run_key_range).
        for_page_parts(kv, kvh0, heads_per_item, t0, t1, direct && !page_groups ? kKeyBlock : 0,
                       [&](std::size_t i, std::size_t b0, std::size_t b1, const NextBlock& next) {
                         if (page_groups && single_rows_ahead) {
                           page_group.at_part(kv, kvh0, i, b0, b1, t1);
                         }
                         ws.after_range = next;
                         if (parts_ahead > 0) {
                           ws.page_ahead = page_read_ahead(kv, kvh0, heads_per_item, i, b0, b1 - b0,
                                                           t1, parts_ahead);
                         }
                         runner.run(kv, kvh0 + i, b0, b1, st + i * g, g, nv, direct, ws);
                       });
        ws.after_range = NextBlock{};
      }
      if (!by_page) {
        ws.after_range = NextBlock{};
        if (following < last_item) {
          const std::size_t f0 = first_key(following), f1 = end_key(f0);
          const std::size_t f_kvh = static_cast<std::size_t>(following) / chunks * heads_per_item;
          ws.after_range = NextBlock::at(kv, f_kvh, f0, kv.block_rows(f0, f1, kKeyBlock));
        }
        runner.run(kv, kvh0, t0, t1, st, g, nv, direct, ws);
      }
      for (std::size_t h = 0; h < g * heads_per_item; ++h) {
        const std::size_t kvh = kvh0 + h / g;
        if (split) {
          float* part = partial.get() + ((kvh * chunks + chunk) * g + h % g) * part_stride;
          for (std::size_t j = 0; j < d; ++j) part[j] = st[h].acc[j];
          part[dp] = st[h].m;
          part[dp + 1] = st[h].l;
        } else {
          float* out = p.out + (kvh0 * g + h) * d;
          const float inv_l = 1.0f / st[h].l;
          for (std::size_t j = 0; j < d; ++j) out[j] = st[h].acc[j] * inv_l;
        }
      }
    }
#pragma omp barrier
    if (split) {
#pragma omp for schedule(static)
      for (long head = 0; head < static_cast<long>(p.n_heads); ++head) {
        const std::size_t kvh = static_cast<std::size_t>(head) / g;
        const std::size_t h = static_cast<std::size_t>(head) % g;
        const auto part = [&](std::size_t c) {
          return partial.get() + ((kvh * chunks + c) * g + h) * part_stride;
        };
        float m = -std::numeric_limits<float>::infinity();
        for (std::size_t c = 0; c < chunks; ++c) m = part(c)[dp] > m ? part(c)[dp] : m;
        float l = 0.0f;
        float* out = p.out + static_cast<std::size_t>(head) * d;
        for (std::size_t j = 0; j < d; ++j) out[j] = 0.0f;
        for (std::size_t c = 0; c < chunks; ++c) {
          const float w = std::exp(part(c)[dp] - m);
          l += part(c)[dp + 1] * w;
          for (std::size_t j = 0; j < d; ++j) out[j] += part(c)[j] * w;
        }
        const float inv_l = 1.0f / l;
        for (std::size_t j = 0; j < d; ++j) out[j] *= inv_l;
      }
    }
  }
}

// Decode on compute unit U with a cache whose keys and values are both of type D.
template <class A, KvDtype D, ComputeUnit U>
void attend_decode(const AttentionProblem& p, int threads) {
  constexpr std::size_t W = fbatch<A>::size;
  const std::size_t d = p.kv.head_dim;
  // Read the cache in place, widening in registers, whenever rows are whole vectors, for any
  // number of query heads per kv head: a query tile of 4 re-widens what the tile before it
  // widened, but the loads and conversions then run beside the FMAs. Widening each block once
  // into f32 tiles shared by the g query heads was a phase of its own that read the block from
  // memory while nothing computed (more than 4 heads per kv head used to take it). f16 decode,
  // Zen 5, 2 threads, cold, in one process, in place against tiles: g = 8 (GQA-4 of 32 heads)
  // 0.59x the time at 32,768 tokens, 0.66x at 2,000; g = 7 (qwen2.5-7b) 0.64x / 0.68x; g = 5
  // 0.64x, g = 12 0.71x, g = 15 0.78x; bf16 and int8 with --compute exact (g = 8) 0.62x and
  // 0.68x; pages of 16 0.70x; AVX2 (g = 6) 0.71-0.72x. (Rows that are not whole vectors keep
  // the tiles. The dot units keep their own.)
  const bool direct = U != ComputeUnit::fp32_fma || d % W == 0;
  decode_with<A>(p, threads, direct, [](std::size_t head_dim, std::size_t max_queries) {
    return KeyRunner<A, D, U>(head_dim, max_queries);
  });
}

}  // namespace kvscope::simd
