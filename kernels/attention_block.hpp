#pragma once
// The inner loop shared by decode and prefill: a set of query vectors attends to one block
// of consecutive keys with online softmax (Milakov & Gimelshein 2018; FlashAttention,
// Dao et al. 2022). Each query vector keeps a running max m, a running sum l of
// exp(score − m) and an accumulator acc = Σ exp(score − m) · v; a new block rescales them
// by exp(m_old − m_new) once, so keys are read in one pass and no score row is kept.
//
// Include only from ISA-flagged translation units (kernels/arch/).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "kernels/isa_neutral.hpp"
#include "kernels/kv_view.hpp"
#include "kernels/prefetch_policy.hpp"
#include "kernels/scratch_pool.hpp"
#include "kernels/simd_rows.hpp"
#include "kernels/softmax_exp.hpp"

namespace kvscope::simd {

template <int Locality>
class PageRunPrefetcherAt;
using PageRunPrefetcher = PageRunPrefetcherAt<2>;

// Keys and values of one block: rows [0, n) of element type D, row r at k + r * stride.
// The rows are either the cache itself (D = the cache dtype, stride = head_dim) or an f32
// tile the block was widened into (D = f32, stride = padded head_dim).
// int8: k_scale/v_scale hold the block's per-row scales, readable up to a multiple of W
// (the cache's own scales for a full block, else a zero-padded copy).
template <KvDtype D>
struct KeyBlock {
  const elem_t<D>* k = nullptr;
  const elem_t<D>* v = nullptr;
  std::size_t stride = 0;
  std::size_t first_key = 0;  // position of row 0
  std::size_t n = 0;
  const float* k_scale = nullptr;
  const float* v_scale = nullptr;
  // Cache rows of the next block of the same range (n_next of them, 0 for none), prefetched
  // row by row while this block computes; see prefetch_row.
  const elem_t<D>* k_next = nullptr;
  const elem_t<D>* v_next = nullptr;
  std::size_t n_next = 0;
  // Or, for one query reading the cache in place, a group's prefetchers (GroupPrefetcher):
  // this block takes a line of them per line it reads, in place of k_next and v_next.
  PageRunPrefetcher* k_lines = nullptr;
  PageRunPrefetcher* v_lines = nullptr;
};

// Prefetches [from, from + bytes) into L2 a 64-byte line per next(), so that a kernel can
// spread a block's requests over its inner loop: issued all at once, they wait for free miss
// buffers and stall the loop behind them (perf on Zen 5: ~10% of the f32 lanes kernel's time
// sat on its prefetch instructions). rest() requests what the loop did not reach.
class LinePrefetcher {
 public:
  LinePrefetcher(const void* from, std::size_t bytes)
      : p_(static_cast<const char*>(from)), end_(p_ + (from ? bytes : 0)) {}
  void next() {
    if (p_ < end_) {
      __builtin_prefetch(p_, 0, 2);
      p_ += 64;
    }
  }
  void rest() {
    for (; p_ < end_; p_ += 64) __builtin_prefetch(p_, 0, 2);
  }
  bool done() const { return p_ >= end_; }
  // Lines not yet requested.
  std::size_t lines_left() const {
    return p_ < end_ ? static_cast<std::size_t>(end_ - p_ + 63) / 64 : 0;
  }

  // Rows [first, first + count) of a block whose rows lie row_bytes apart from `base`, as far
  // as they fall among its first n_rows (the rows there are to prefetch).
  static LinePrefetcher rows(const void* base, std::size_t row_bytes, std::size_t first,
                             std::size_t count, std::size_t n_rows) {
    const std::size_t ahead =
        first < n_rows ? (n_rows - first < count ? n_rows - first : count) : 0;
    return LinePrefetcher(ahead ? static_cast<const char*>(base) + first * row_bytes : nullptr,
                          ahead * row_bytes);
  }

 private:
  const char* p_;
  const char* end_;
};

// LinePrefetcher's contract, for kernels bound by memory (rows read in place, one or a few
// queries per row): on Intel the lines go out in 4 KiB runs side by side (line j of every
// run, then line j + 1), not front to back. Each run is a page to the hardware prefetcher,
// which then streams several pages at once. A thread reading one stream front to back reached
// about 2/3 of the bandwidth of one reading 8 such runs at once (Intel Xeon, 2 threads: 18-20
// against 26-28 GB/s; runs under 4 KiB were no better than one stream). On AMD front to back
// measured faster (prefetch_policy.hpp). Kernels bound by arithmetic keep LinePrefetcher: this
// one's next() costs a few more instructions (MQA f32 8-11% slower).
// Locality: __builtin_prefetch's, 2 (prefetcht1: into L2) or 3 (prefetcht0: into L1 as well;
// SharedBlockPrefetcher below).
template <int Locality>
class PageRunPrefetcherAt {
 public:
  static constexpr std::size_t kRunBytes = 4096;
  // In runs on this CPU, else front to back (prefetch_in_page_runs()).
  static inline const bool kInPageRuns = prefetch_in_page_runs();

  PageRunPrefetcherAt(const void* from, std::size_t bytes, bool in_runs = kInPageRuns)
      : base_(static_cast<const char*>(from)), lines_(from ? (bytes + 63) / 64 : 0) {
    const std::size_t runs = bytes / kRunBytes;
    spread_lines_ = from && runs >= 2 && in_runs ? runs * (kRunBytes / 64) : 0;
  }
  void next() {
    if (done_ >= lines_) return;
    __builtin_prefetch(base_ + offset_, 0, Locality);
    ++done_;
    if (done_ < spread_lines_) {
      offset_ += kRunBytes;  // the same line of the next run, or the next line of the first
      if (offset_ >= spread_lines_ * 64) offset_ -= spread_lines_ * 64 - 64;
    } else {
      offset_ = done_ * 64;  // past the whole runs: front to back
    }
  }
  void next(std::size_t lines) {
    for (std::size_t i = 0; i < lines; ++i) next();
  }
  void rest() {
    while (done_ < lines_) next();
  }
  bool done() const { return done_ >= lines_; }
  std::size_t lines_left() const { return lines_ - done_; }
  // The line the next next() requests; nullptr when done.
  const char* upcoming() const { return done_ < lines_ ? base_ + offset_ : nullptr; }

 private:
  const char* base_;
  std::size_t lines_, spread_lines_ = 0;
  std::size_t done_ = 0, offset_ = 0;
};

// The next block of rows that several queries read together (GQA's query tiles on fp32-fma,
// rows widened once into f32 tiles, the dot units' tile kernel) is requested into L1 where
// prefetch_shared_blocks_to_l1(), else into L2: run(std::type_identity<P>) with P the
// prefetcher type for this CPU. Two types, not a flag read in next(): with the flag, next()'s
// extra load and branch cost MHA int8 decode 7%.
using SharedBlockPrefetcher = PageRunPrefetcherAt<3>;
template <class Run>
void with_shared_block_level(Run&& run) {
  static const bool to_l1 = prefetch_shared_blocks_to_l1();
  if (to_l1) {
    run(std::type_identity<SharedBlockPrefetcher>{});
  } else {
    run(std::type_identity<PageRunPrefetcher>{});
  }
}
// run(prefetcher) over [from, from + bytes) at that level.
template <class Run>
void with_shared_block_prefetcher(const void* from, std::size_t bytes, Run&& run) {
  with_shared_block_level([&]<class P>(std::type_identity<P>) {
    P pf(from, bytes);
    run(pf);
  });
}
// The same for a block's keys and values: run(key prefetcher, value prefetcher).
template <class Run>
void with_shared_block_prefetchers(const void* k_from, std::size_t k_bytes, const void* v_from,
                                   std::size_t v_bytes, Run&& run) {
  with_shared_block_level([&]<class P>(std::type_identity<P>) {
    P k(k_from, k_bytes), v(v_from, v_bytes);
    run(k, v);
  });
}

// 64-byte lines of a row of `bytes` (what a prefetcher requests per row consumed).
constexpr std::size_t lines_per_row(std::size_t bytes) { return (bytes + 63) / 64; }

// PageRunPrefetcher's order over the first n_rows rows of a block across pages (BlockRows):
// the 4 KiB runs of all its chunks side by side, line j of every run, then line j + 1, as
// over one contiguous block's pages. Chunk by chunk, front to back, each page's rows were a
// stream of 2-8 KiB that the hardware prefetcher had barely picked up before it ended: a
// copy of decode's reads over pages of 16 read f32 rows at 14-15 GB/s so, 18-25 in runs.
// Runs past kMaxRuns (chunks over 16 KiB) are left to the hardware prefetcher.
class BlockRunPrefetcher {
 public:
  static constexpr std::size_t kMaxRuns = 32;

  KVSCOPE_ISA_NEUTRAL BlockRunPrefetcher(const BlockRows& rows, std::size_t n_rows) {
    for (std::size_t c = 0; c * BlockRows::kChunkRows < n_rows; ++c) {
      const std::size_t chunk_rows =
          std::min(BlockRows::kChunkRows, n_rows - c * BlockRows::kChunkRows);
      const std::size_t bytes = chunk_rows * rows.row_bytes;
      for (std::size_t at = 0; at < bytes && runs_ < kMaxRuns; at += PageRunPrefetcher::kRunBytes) {
        const std::size_t lines = lines_per_row(std::min(PageRunPrefetcher::kRunBytes, bytes - at));
        run_[runs_] = reinterpret_cast<const char*>(rows.chunk[c]) + at;
        run_lines_[runs_++] = lines;
        max_lines_ = std::max(max_lines_, lines);
      }
    }
  }
  void next() {
    if (done()) return;
    __builtin_prefetch(upcoming(), 0, 2);
    // On to line_ of the next run, or line_ + 1 of the first; short runs (a block's last
    // chunk) are passed over once their lines are out.
    do {
      if (++run_i_ == runs_) run_i_ = 0, ++line_;
    } while (!done() && line_ >= run_lines_[run_i_]);
  }
  void next(std::size_t lines) {
    for (std::size_t i = 0; i < lines; ++i) next();
  }
  void rest() {
    while (!done()) next();
  }
  bool done() const { return line_ >= max_lines_; }
  // The line the next next() requests; nullptr when done.
  const char* upcoming() const { return done() ? nullptr : run_[run_i_] + line_ * 64; }

 private:
  // Only [0, runs_) is set: a block sets up two of these, and zeroing 32 runs cost more.
  const char* run_[kMaxRuns];
  std::size_t run_lines_[kMaxRuns];
  std::size_t runs_ = 0, max_lines_ = 0, run_i_ = 0, line_ = 0;
};

// Two ranges (a block's K and V rows) requested over every phase of the work before them, a
// share of the lines per phase, a few per step: requests issued only in one phase wait on
// the miss buffers there and leave memory idle in the others. Kept to two plain ranges:
// step() runs for about every line the kernels read, and a list of ranges here (for blocks
// across pages) made AMX GQA-4 decode over a contiguous cache 8% slower.
class PhasedPrefetcher {
 public:
  PhasedPrefetcher(const void* k, const void* v, std::size_t bytes_each)
      : k_(k, bytes_each), v_(v, bytes_each), total_(k_.lines_left() + v_.lines_left()) {}
  // The next phase requests about `share` of all the lines over `steps` calls of step().
  void phase(double share, std::size_t steps) {
    const auto lines = static_cast<std::size_t>(share * static_cast<double>(total_)) + 1;
    per_step_ = steps ? (lines + steps - 1) / steps : 0;
  }
  void step() {
    for (std::size_t i = 0; i < per_step_; ++i) k_.lines_left() ? k_.next() : v_.next();
  }
  void rest() { k_.rest(), v_.rest(); }

 private:
  LinePrefetcher k_, v_;
  std::size_t total_, per_step_ = 0;
};

// What to prefetch while the block [b0, b0 + nb) of a key range ending at `end` computes: the
// next block's rows (`rows` of them at k and v; 0 at the range's end), which the kernels
// prefetch row by row, a block ahead. Not with pages shorter than a block: the next block of
// the head is then another page, which the decode kernels reach only after the other heads'
// rows of this page (decode_with reads a page's heads in turn), and prefetching a block
// ahead in the same head at once was measured slower (2.2× against 1.5× contiguous for pages
// of 16 tokens at 32,768).
struct NextBlock {
  std::size_t rows = 0;
  std::size_t kvh = 0, pos = 0;  // whose rows, from which position
  const std::byte* k = nullptr;
  const std::byte* v = nullptr;
  const float* k_scale = nullptr;  // int8 rows' scales (nullptr for types without them)
  const float* v_scale = nullptr;

  NextBlock() = default;  // nothing to prefetch
  KVSCOPE_ISA_NEUTRAL NextBlock(const KvView& kv, std::size_t kvh, std::size_t b0, std::size_t nb,
                                std::size_t end, std::size_t max_rows) {
    if (kv.paged() && kv.page_tokens < max_rows) return;
    *this = at(kv, kvh, b0 + nb, kv.block_rows(b0 + nb, end, max_rows));
  }
  // `rows` rows of kv head kvh from position pos (consecutive in memory).
  KVSCOPE_ISA_NEUTRAL static NextBlock at(const KvView& kv, std::size_t kvh, std::size_t pos,
                                          std::size_t rows) {
    NextBlock next;
    if (rows > 0) {
      next.rows = rows, next.kvh = kvh, next.pos = pos;
      next.k = kv.k_row(kvh, pos), next.v = kv.v_row(kvh, pos);
      next.k_scale = kv.k_scales(kvh, pos), next.v_scale = kv.v_scales(kvh, pos);
    }
    return next;
  }
  // The block after [b0, b0 + nb) in a range ending at `end`; at the range's end, after_end
  // (the rows read after the range, when the caller knows them).
  KVSCOPE_ISA_NEUTRAL static NextBlock within(const KvView& kv, std::size_t kvh, std::size_t b0,
                                              std::size_t nb, std::size_t end, std::size_t max_rows,
                                              const NextBlock& after_end) {
    return b0 + nb < end ? NextBlock(kv, kvh, b0, nb, end, max_rows) : after_end;
  }
  // The block after this one (up to max_rows rows) in a range ending at `end`, for a block
  // inside that range: none at its end, or over pages.
  KVSCOPE_ISA_NEUTRAL NextBlock following(const KvView& kv, std::size_t end,
                                          std::size_t max_rows) const {
    if (rows == 0 || kv.paged() || pos + rows >= end) return {};
    return at(kv, kvh, pos + rows, kv.block_rows(pos + rows, end, max_rows));
  }
  // Requests the keys of following() into L2, all at once, where prefetch_block_after_next():
  // for a kernel that requested this block a line per line it read and then computes without
  // reading (softmax, p·V). Keys only: their values are requested a block later, beside the
  // score loop that interleaves them (prefetch_policy.hpp has the measurements). Out of line:
  // inlined into DotQueryQuads::run, it cost its score loop registers (spills there made GQA-4
  // bf16 decode 1.6x slower).
  [[gnu::noinline]] void request_following_keys(const KvView& kv, std::size_t end,
                                                std::size_t max_rows) const {
    static const bool wanted = prefetch_block_after_next();
    if (!wanted) return;
    const NextBlock block = following(kv, end, max_rows);
    LinePrefetcher(block.k, block.rows * kv.k_row_bytes()).rest();
  }
  // Whether the rows run on across pages (KvView::chunked_block_rows): k and v then hold only
  // the first page's, and kernels find the others by kvh and pos.
  KVSCOPE_ISA_NEUTRAL bool spans_pages(const KvView& kv) const {
    return rows > 0 && kv.spans_pages(pos, rows);
  }
  // Requests the rows' scales into L2: a paged cache keeps them in each page, where no
  // hardware prefetcher follows them (an int8 page of 16 rows has one line of each; unasked,
  // every page's first read of them waited for memory: 8% of MHA decode over pages of 16).
  void prefetch_scales() const {
    for (const float* scales : {k_scale, v_scale}) {
      if (scales == nullptr) continue;
      const auto* bytes = reinterpret_cast<const char*>(scales);
      for (std::size_t i = 0; i < rows * sizeof(float); i += 64)
        __builtin_prefetch(bytes + i, 0, 2);
    }
  }
};

// The prefetches of a key range [t0, t1) of one kv head of a contiguous cache, read block by
// block (block_rows rows, the last one shorter), when a block's rows are under 32 KiB: int8
// rows of 128 bytes make 8 KiB blocks, two page runs. Blocks then go in groups of about
// 32 KiB of rows; while one group is read, the next group's keys and values are requested, a
// line per line read, in page runs across the whole group (PageRunPrefetcher). A copy of
// decode's pattern read 17-19 GB/s with 8 KiB blocks a block ahead and 21-22 with 32 KiB
// groups, as fast as with 32 KiB blocks; MHA int8 decode took 0.79x the time at 32,768
// tokens, bf16 0.86x (Intel Xeon, 2 threads). The block after next, or 64 KiB groups,
// gained nothing more. On AMD blocks go a block ahead, ungrouped (prefetch_in_groups()).
class GroupPrefetcher {
 public:
  static constexpr std::size_t kGroupBytes = 32 * 1024;
  // Groups on this CPU (prefetch_in_groups()), else none.
  static inline const bool kInGroups = prefetch_in_groups();

  // after_range: the rows read after the range, requested during its last group. in_groups:
  // false for no groups at all.
  GroupPrefetcher(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1,
                  std::size_t block_rows, const NextBlock& after_range, bool in_groups = kInGroups)
      : kv_(kv), kvh_(kvh), t0_(t0), t1_(t1), after_(after_range) {
    const std::size_t row_bytes = std::max(kv.k_row_bytes(), kv.v_row_bytes());
    if (in_groups && !kv.paged() && block_rows * row_bytes < kGroupBytes) {
      const std::size_t rows = kGroupBytes / row_bytes / block_rows * block_rows;
      group_rows_ = rows > block_rows ? rows : 0;
    }
  }
  // Whether blocks go in groups (if not, kernels request the next block as before).
  bool grouped() const { return group_rows_ > 0; }
  std::size_t group_rows() const { return group_rows_; }

  // Before block [b0, b0 + nb) is read. At a group's first block the next group's requests
  // begin; at the range's first block the rest of its own group is requested at once (no
  // group before it did).
  KVSCOPE_ISA_NEUTRAL void at_block(std::size_t b0, std::size_t nb) {
    if (!grouped() || (b0 - t0_) % group_rows_ != 0) return;
    const std::size_t next = b0 + group_rows_;
    if (next < t1_) {
      k_ = rows(kv_.k_row(kvh_, next), next, kv_.k_row_bytes());
      v_ = rows(kv_.v_row(kvh_, next), next, kv_.v_row_bytes());
    } else {
      k_ = PageRunPrefetcher(after_.k, after_.rows * kv_.k_row_bytes());
      v_ = PageRunPrefetcher(after_.v, after_.rows * kv_.v_row_bytes());
    }
    if (b0 == t0_ && b0 + nb < t1_) {
      rows(kv_.k_row(kvh_, b0 + nb), b0 + nb, kv_.k_row_bytes(), next).rest();
      rows(kv_.v_row(kvh_, b0 + nb), b0 + nb, kv_.v_row_bytes(), next).rest();
    }
  }
  // The group's requests; a block takes a line per line it reads (its share).
  PageRunPrefetcher& key_lines() { return k_; }
  PageRunPrefetcher& value_lines() { return v_; }

  // A block's share of a group's requests for kernels that end with rest(): next() requests
  // a line, rest() leaves the others to the group's later blocks.
  class Share {
   public:
    explicit Share(PageRunPrefetcher& pf) : pf_(pf) {}
    void next() { pf_.next(); }
    void next(std::size_t lines) { pf_.next(lines); }
    void rest() {}

   private:
    PageRunPrefetcher& pf_;
  };
  Share key_share() { return Share(k_); }
  Share value_share() { return Share(v_); }

 private:
  // Rows [from, min(until, from + group, t1)) of a kv head's keys or values at `at`.
  PageRunPrefetcher rows(const std::byte* at, std::size_t from, std::size_t row_bytes,
                         std::size_t until = SIZE_MAX) const {
    const std::size_t end = std::min({until, from + group_rows_, t1_});
    return PageRunPrefetcher(at, (end - from) * row_bytes);
  }

  const KvView& kv_;
  std::size_t kvh_, t0_, t1_, group_rows_ = 0;
  NextBlock after_;
  PageRunPrefetcher k_{nullptr, 0}, v_{nullptr, 0};
};

// The rows of a paged cache that for_page_parts hands out at once from b0 on, keys up to
// `end`: the rest of b0's page, or for runners that address blocks by BlockRows
// (min_rows > 0) at least min_rows across pages of a multiple of 16 tokens.
inline std::size_t page_part_rows(const KvView& kv, std::size_t b0, std::size_t end,
                                  std::size_t min_rows) {
  if (min_rows > kv.page_tokens) return kv.chunked_block_rows(b0, end, min_rows);
  return kv.block_rows(b0, end, kv.page_tokens);
}

// A paged cache read page by page, heads [kvh0, kvh0 + heads) of each page in turn, over keys
// up to `end`: what is read after head kvh0 + i's rows [b0, b0 + nb) of a page — the next
// head's rows of the page, after the last head the first head's rows of the next page.
// (Prefetching 2 to 8 such parts ahead measured no faster; on AMD, parts under 8 KiB are
// requested further ahead: page_read_ahead.)
inline NextBlock page_read_next(const KvView& kv, std::size_t kvh0, std::size_t heads,
                                std::size_t i, std::size_t b0, std::size_t nb, std::size_t end,
                                std::size_t min_rows) {
  if (i + 1 < heads) return NextBlock::at(kv, kvh0 + i + 1, b0, nb);
  const std::size_t b1 = b0 + nb;
  return NextBlock::at(kv, kvh0, b1, page_part_rows(kv, b1, end, min_rows));
}

// The part `parts` on from head kvh0 + i's rows [b0, b0 + nb) of a page in that reading order
// (parts < heads): a later head's rows of the page, else an earlier head's of the next page.
KVSCOPE_ISA_NEUTRAL NextBlock page_read_ahead(const KvView& kv, std::size_t kvh0, std::size_t heads,
                                              std::size_t i, std::size_t b0, std::size_t nb,
                                              std::size_t end, std::size_t parts) {
  std::size_t j = i + parts, pos = b0;
  if (j >= heads) j -= heads, pos = b0 + nb;
  if (j >= heads || pos >= end) return NextBlock{};
  return NextBlock::at(kv, kvh0 + j, pos, kv.block_rows(pos, end, kv.page_tokens));
}

// Keys [t0, t1) of kv heads [kvh0, kvh0 + heads) page by page, each page's heads in turn:
// part(i, b0, b1, next) for head kvh0 + i's rows [b0, b1) of a page, `next` what is read after.
// min_rows > 0: parts of that many rows, from as many pages as they span (page_part_rows), for
// runners that take blocks across pages; over pages of 16 tokens such a runner then works in
// blocks of 64 keys, not 16, and reads 4 pages at once, each page's heads in turn.
template <class Part>
void for_page_parts(const KvView& kv, std::size_t kvh0, std::size_t heads, std::size_t t0,
                    std::size_t t1, std::size_t min_rows, Part&& part) {
  for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
    nb = page_part_rows(kv, b0, t1, min_rows);
    for (std::size_t i = 0; i < heads; ++i) {
      part(i, b0, b0 + nb, page_read_next(kv, kvh0, heads, i, b0, nb, t1, min_rows));
    }
  }
}

// The prefetches of a paged cache read a page at a time, each page's heads [0, heads) of an
// item in turn (for_page_parts with min_rows 0), one query per head. A page holds its heads'
// blocks back to back, so the heads go in groups of about 32 KiB of a page's rows; while one
// group is read, the next group's keys and values (the next heads of the page, else the first
// heads of the next page) are requested in page runs, a line per line read. A copy of decode's
// reads over pages of 16 (bf16 and f32 rows of 128, 8 heads an item, Intel Xeon) read so as
// fast as a contiguous cache (0.99-1.03x the time), where blocks of 64 rows across 4 pages,
// each requesting the next head's, took 1.10-1.13x; MHA f32 decode went from 1.19-1.23x the
// contiguous step to 1.07-1.09x.
class PageGroupPrefetcher {
 public:
  static constexpr std::size_t kGroupBytes = 32 * 1024;

  PageGroupPrefetcher(const KvView& kv, std::size_t heads) : heads_(heads) {
    const std::size_t piece = kv.page_tokens * std::max(kv.k_row_bytes(), kv.v_row_bytes());
    group_ = std::clamp<std::size_t>(piece ? kGroupBytes / piece : 1, 1, heads);
  }
  std::size_t group_heads() const { return group_; }
  // Before head i's rows [b0, b1) of a page, in an item of heads from kvh0 over keys up to end.
  KVSCOPE_ISA_NEUTRAL void at_part(const KvView& kv, std::size_t kvh0, std::size_t i,
                                   std::size_t b0, std::size_t b1, std::size_t end) {
    if (i % group_ != 0) return;
    std::size_t next = i + group_, pos = b0;
    if (next >= heads_) next = 0, pos = b1;
    if (pos >= end) {
      k_ = v_ = PageRunPrefetcher(nullptr, 0);
      return;
    }
    const std::size_t rows = kv.block_rows(pos, end, kv.page_tokens);
    const std::size_t last = kvh0 + next + std::min(group_, heads_ - next) - 1;
    // The group's heads' blocks are back to back: one range, from the first head's keys to the
    // last head's values, split between the two in proportion to what keys and values read.
    const std::byte* from = kv.k_row(kvh0 + next, pos);
    const std::size_t bytes =
        static_cast<std::size_t>(kv.v_row(last, pos) - from) + rows * kv.v_row_bytes();
    const std::size_t k_bytes =
        bytes * kv.k_row_bytes() / (kv.k_row_bytes() + kv.v_row_bytes()) / 64 * 64;
    k_ = PageRunPrefetcher(from, k_bytes);
    v_ = PageRunPrefetcher(from + k_bytes, bytes - k_bytes);
    // Part of a page (an item's first or last): the heads' rows are not back to back, and the
    // parts read fewer lines than the range holds, so it is requested at once.
    if (rows < kv.page_tokens) k_.rest(), v_.rest();
  }
  PageRunPrefetcher& key_lines() { return k_; }
  PageRunPrefetcher& value_lines() { return v_; }

 private:
  std::size_t heads_, group_ = 1;
  PageRunPrefetcher k_{nullptr, 0}, v_{nullptr, 0};
};

// A work item's first block of keys [t0, t0 + max_rows) of kv head kvh, K and V rows, to
// request while the item sets up (transposing or packing its queries): the kernels prefetch
// only from block to block, so nothing else covers it (an eighth of the keys in MQA decode at
// 2,000 tokens when items were 256 keys).
struct FirstBlockPrefetch {
  LinePrefetcher k, v;

  KVSCOPE_ISA_NEUTRAL FirstBlockPrefetch(const KvView& kv, std::size_t kvh, std::size_t t0,
                                         std::size_t t1, std::size_t max_rows)
      : k(kv.k_row(kvh, t0), kv.block_rows(t0, t1, max_rows) * kv.k_row_bytes()),
        v(kv.v_row(kvh, t0), kv.block_rows(t0, t1, max_rows) * kv.v_row_bytes()) {}
  void next() { k.next(), v.next(); }
  void rest() { k.rest(), v.rest(); }
};

// Online-softmax state of one query vector. q is pre-scaled by 1/sqrt(head_dim) (the score
// scale is fused into it) and zero-padded to nv·W lanes, as is acc. Keys after `last_key`
// are masked (causal); they are skipped, never read for this query.
struct QueryState {
  float* q = nullptr;
  float* acc = nullptr;
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
  std::size_t last_key = 0;
};

// Whether every state of st[0, count) sees all keys before t1.
inline bool all_see(const QueryState* st, std::size_t count, std::size_t t1) {
  for (std::size_t i = 0; i < count; ++i) {
    if (st[i].last_key + 1 < t1) return false;
  }
  return true;
}

// Where row r's partial-sum vector must go in haddp's input for lane r of the result to be
// its sum. xsimd 8.1's AVX-512 haddp returns its lanes in the order
// 0 1 4 5 2 3 6 7 | 8 9 12 13 10 11 14 15 (an involution), so rows are placed pre-permuted;
// the SSE2 and AVX versions are in order.
template <class A>
constexpr std::size_t haddp_slot(std::size_t r) {
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    const std::size_t in8 = r % 8;
    if (in8 >= 2 && in8 < 4) return r + 2;
    if (in8 >= 4 && in8 < 6) return r - 2;
  }
  return r;
}

// The full groups of W cache rows of block_scores (rows [0, n − n mod W)) for head_dim = NV·W
// known at compile time: the query stays in NV registers and each row's dot product is
// unrolled, so the loop body is cache loads, widening and FMAs only (the generic loop
// re-reads q from memory and counts chunks at run time, which costs int8 most). Same
// arithmetic in the same order as block_scores. Returns the rows done.
template <class A, KvDtype D, int NV, class Prefetcher>
std::size_t block_scores_fixed(const float* q, const elem_t<D>* k, std::size_t n,
                               const float* k_scale, float* s, Prefetcher& shared_next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t stride = NV * W;
  // 16-bit and f32 rows take a local copy of the prefetcher, in registers for the loop (MHA
  // decode 0.93-0.94x the time, Zen 5); int8's stay behind the reference (1.03x with a copy).
  std::conditional_t<D == KvDtype::int8, Prefetcher&, Prefetcher> next = shared_next;
  B qr[NV];
#pragma GCC unroll 8
  for (int c = 0; c < NV; ++c) qr[c] = B::load_aligned(q + c * W);
  const std::size_t full = n - n % W;
  for (std::size_t r0 = 0; r0 < full; r0 += W) {
    const elem_t<D>* base = k + r0 * stride;
    B parts[W];
#pragma GCC unroll 16
    for (std::size_t r = 0; r < W; ++r) {
      const elem_t<D>* row = base + r * stride;
      next.next(lines_per_row(stride * sizeof(elem_t<D>)));
      B part = qr[0] * load_elems<D, A>(row);
#pragma GCC unroll 16
      for (int c = 1; c < NV; ++c) part = xsimd::fma(qr[c], load_elems<D, A>(row + c * W), part);
      parts[haddp_slot<A>(r)] = part;
    }
    B sc = xsimd::haddp(parts);
    if (k_scale != nullptr) sc *= B::load_unaligned(k_scale + r0);
    sc.store_aligned(s + r0);
  }
  if constexpr (D != KvDtype::int8) shared_next = next;
  return full;
}

// s[0, round_up(n, W)) ← q · k_r (× k_scale[r] for int8) for rows r < n, −inf beyond n.
// row_major: visit rows one after another (cache rows); else chunk-major (L1 tiles).
// W rows at a time: W partial-sum vectors are reduced together by one haddp (a transpose-add)
// instead of W horizontal sums.
template <class A, KvDtype D, bool row_major, class Prefetcher>
void block_scores(const float* q, const elem_t<D>* k, std::size_t stride, std::size_t n,
                  std::size_t nv, const float* k_scale, float* s, Prefetcher& next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  alignas(64) static constexpr float kLane[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                  8, 9, 10, 11, 12, 13, 14, 15};
  for (std::size_t r0 = 0; r0 < n; r0 += W) {
    const std::size_t rows = n - r0 < W ? n - r0 : W;
    const elem_t<D>* base = k + r0 * stride;
    B parts[W];
    for (std::size_t r = 0; r < W; ++r) parts[r] = B(0.0f);
    if (rows == W && row_major) {
      // Cache rows: walk each row front to back, so the stream stays sequential and the
      // hardware prefetcher sees it (chunk-major order over W rows strides 16 rows apart).
#pragma GCC unroll 16
      for (std::size_t r = 0; r < W; ++r) {
        B& part = parts[haddp_slot<A>(r)];
        const elem_t<D>* row = base + r * stride;
        next.next(lines_per_row(stride * sizeof(elem_t<D>)));
        for (std::size_t c = 0; c < nv; ++c) {
          part = xsimd::fma(B::load_aligned(q + c * W), load_elems<D, A>(row + c * W), part);
        }
      }
    } else if (rows == W) {
      // Tile rows (L1-resident): chunk-major, one q load serves W rows.
      for (std::size_t c = 0; c < nv; ++c) {
        const B qc = B::load_aligned(q + c * W);
#pragma GCC unroll 16
        for (std::size_t r = 0; r < W; ++r) {
          B& part = parts[haddp_slot<A>(r)];
          part = xsimd::fma(qc, load_elems<D, A>(base + r * stride + c * W), part);
        }
      }
    } else {
      // Unrolled as the full cases, rows past `rows` skipped: a parts index known only at run
      // time would keep all W partial sums in memory, in every case.
      for (std::size_t c = 0; c < nv; ++c) {
        const B qc = B::load_aligned(q + c * W);
#pragma GCC unroll 16
        for (std::size_t r = 0; r < W; ++r) {
          if (r >= rows) continue;
          B& part = parts[haddp_slot<A>(r)];
          part = xsimd::fma(qc, load_elems<D, A>(base + r * stride + c * W), part);
        }
      }
    }
    B sc = xsimd::haddp(parts);
    if (k_scale != nullptr) sc *= B::load_unaligned(k_scale + r0);
    if (rows < W) {
      sc = xsimd::select(B::load_aligned(kLane) < B(static_cast<float>(rows)), sc,
                         B(-std::numeric_limits<float>::infinity()));
    }
    sc.store_aligned(s + r0);
  }
}

// acc[c0·W, (c0+NV)·W) += Σ_{t<n} p[t] · v_t over those lanes, NV accumulators in registers.
template <class A, KvDtype D, int NV, class Prefetcher>
void block_pv_lanes(const float* p, const elem_t<D>* v, std::size_t stride, std::size_t n,
                    std::size_t c0, float* acc, Prefetcher& shared_next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  // A local copy lives in registers: through the reference every request stored its state
  // (with copies here and in multi_pv_group, GQA-8 decode took 0.92-0.97x the time; Zen 5).
  Prefetcher next = shared_next;
  // Its loops over a[] unrolled too: as loops, GCC kept a[] on the stack around the main loop
  // (MHA bf16 decode 0.99x the time unrolled, int8 level; Zen 5, 2 threads, cold, steps of
  // both in turn in one process).
  B a[NV];
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) a[j] = B::load_aligned(acc + (c0 + j) * W);
  const elem_t<D>* col = v + c0 * W;
  const std::size_t row_lines = lines_per_row(stride * sizeof(elem_t<D>));
  for (std::size_t t = 0; t < n; ++t) {
    const B pt(p[t]);
    const elem_t<D>* row = col + t * stride;
    next.next(row_lines);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) a[j] = xsimd::fma(pt, load_elems<D, A>(row + j * W), a[j]);
  }
  shared_next = next;
#pragma GCC unroll 8
  for (int j = 0; j < NV; ++j) a[j].store_aligned(acc + (c0 + j) * W);
}

// acc[0, nv·W) += Σ_{t<n} p[t] · v_t, in lane groups of 8, 4, 2, 1 vectors.
// v_next: rows [0, n_next) to prefetch, a row's lines per row read (mostly during the first
// lane group).
template <class A, KvDtype D, class Prefetcher>
void block_pv(const float* p, const elem_t<D>* v, std::size_t stride, std::size_t n, std::size_t nv,
              float* acc, Prefetcher& next) {
  std::size_t c = 0;
  for (; c + 8 <= nv; c += 8) block_pv_lanes<A, D, 8>(p, v, stride, n, c, acc, next);
  if (c + 4 <= nv) block_pv_lanes<A, D, 4>(p, v, stride, n, c, acc, next), c += 4;
  if (c + 2 <= nv) block_pv_lanes<A, D, 2>(p, v, stride, n, c, acc, next), c += 2;
  if (c < nv) block_pv_lanes<A, D, 1>(p, v, stride, n, c, acc, next);
}
template <class A, KvDtype D>
void block_pv(const float* p, const elem_t<D>* v, std::size_t stride, std::size_t n, std::size_t nv,
              float* acc, const elem_t<D>* v_next = nullptr, std::size_t n_next = 0) {
  PageRunPrefetcher next(v_next, n_next * stride * sizeof(elem_t<D>));
  block_pv<A, D>(p, v, stride, n, nv, acc, next);
}

// Lane i of a swizzle: lane i ^ Half (swapping the two halves of every 2·Half lanes).
template <std::size_t Half>
struct XorLanes {
  static constexpr std::uint32_t get(std::uint32_t i, std::uint32_t) { return i ^ Half; }
};

// The largest lane of v, as a tree of log2 W in-register steps: with pages of 16 tokens a
// block is one vector of scores, and this runs once per 16 keys (through memory, a lane at a
// time, it was a tenth of the MHA bf16 decode's softmax time over pages of 16).
template <class A, std::size_t Half = fbatch<A>::size / 2>
float lanes_max(fbatch<A> v) {
  if constexpr (Half == 0) {
    alignas(64) float lanes[fbatch<A>::size];
    v.store_aligned(lanes);
    return lanes[0];
  } else {
    using Index = xsimd::batch<std::uint32_t, A>;
    v = xsimd::max(v, xsimd::swizzle(v, xsimd::make_batch_constant<Index, XorLanes<Half>>()));
    return lanes_max<A, Half / 2>(v);
  }
}

// Online-softmax update of one query vector with the scores s[0, round_up(n, W)) of one
// block (−inf past n): m ← max(m, max s), l ← l·e^(m_old−m) + Σ e^(s−m), acc ← acc·e^(m_old−m).
// Writes the weights p = e^(s−m) (× v_scale for int8) for the p·V step; p past n is 0.
// e^x by softmax_exp (as the queries-in-lanes kernels): over pages of 16 (MHA f32, 600
// tokens, warm; perf, AMD Zen 4) this function fell from 9.3% to 7.7% of the samples.
template <class A>
void softmax_update(QueryState& st, const float* s, std::size_t n, const float* v_scale,
                    std::size_t nv, float* p) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  const std::size_t padded = (n + W - 1) / W * W;
  B vmax(-std::numeric_limits<float>::infinity());
  for (std::size_t r = 0; r < padded; r += W) vmax = xsimd::max(vmax, B::load_aligned(s + r));
  const float block_max = lanes_max<A>(vmax);

  const float m_new = block_max > st.m ? block_max : st.m;
  // exp(−inf) = 0 on the first block; a block that does not raise the maximum (most of them)
  // skips the call: exp(0) is 1 exactly.
  const float correction = m_new == st.m ? 1.0f : std::exp(st.m - m_new);
  const B vm(m_new);
  B vsum(0.0f);
  for (std::size_t r = 0; r < padded; r += W) {
    B e = softmax_exp(B::load_aligned(s + r) - vm);  // masked lanes: exp(−inf) = 0
    vsum += e;
    if (v_scale != nullptr) e *= B::load_unaligned(v_scale + r);  // int8: fold V scale
    e.store_aligned(p + r);
  }
  st.l = st.l * correction + xsimd::hadd(vsum);
  if (correction != 1.0f) {
    const B vc(correction);
    for (std::size_t c = 0; c < nv; ++c) {
      (B::load_aligned(st.acc + c * W) * vc).store_aligned(st.acc + c * W);
    }
  }
  st.m = m_new;
}

// s ← the scores of query q over rows [0, n) of k (block_scores' contract), from_cache: by
// block_scores_fixed where head_dim = 8·W on AVX-512 (128: 8 query and 16 partial-sum
// registers fit in its 32), the rest by block_scores.
template <class A, KvDtype D, bool from_cache, class Prefetcher>
void query_scores(const float* q, const elem_t<D>* k, std::size_t stride, std::size_t n,
                  std::size_t nv, const float* k_scale, float* s, Prefetcher& next) {
  std::size_t done = 0;
  if constexpr (from_cache && std::is_base_of_v<xsimd::avx512f, A>) {
    if (stride == 8 * fbatch<A>::size) {
      done = block_scores_fixed<A, D, 8>(q, k, n, k_scale, s, next);
    }
  }
  block_scores<A, D, from_cache>(q, k + done * stride, stride, n - done, nv,
                                 k_scale ? k_scale + done : nullptr, s + done, next);
}
// query_scores prefetching rows [0, n_next) of k_next, a row's lines per row read.
template <class A, KvDtype D, bool from_cache>
void query_scores(const float* q, const elem_t<D>* k, std::size_t stride, std::size_t n,
                  std::size_t nv, const float* k_scale, float* s, const elem_t<D>* k_next,
                  std::size_t n_next) {
  PageRunPrefetcher next(k_next, n_next * stride * sizeof(elem_t<D>));
  query_scores<A, D, from_cache>(q, k, stride, n, nv, k_scale, s, next);
}

// Keys of `blk` visible to query `st` (causal): rows [0, result).
template <KvDtype D>
std::size_t visible_rows(const QueryState& st, const KeyBlock<D>& blk) {
  if (st.last_key < blk.first_key) return 0;  // whole block masked for this query
  const std::size_t last_row = st.last_key - blk.first_key;
  return last_row + 1 < blk.n ? last_row + 1 : blk.n;
}

// One query vector attends to one key block: scores, online-softmax update, p·V.
// from_cache: the rows are the cache itself (streamed from memory), not an f32 tile.
// s and p are scratch of round_up(block.n, W) floats.
template <class A, KvDtype D, bool from_cache>
void attend_block(QueryState& st, const KeyBlock<D>& blk, std::size_t nv, float* s, float* p) {
  const std::size_t n = visible_rows(st, blk);
  if (n == 0) return;
  if (blk.k_lines != nullptr) {
    query_scores<A, D, from_cache>(st.q, blk.k, blk.stride, n, nv, blk.k_scale, s, *blk.k_lines);
    softmax_update<A>(st, s, n, blk.v_scale, nv, p);
    block_pv<A, D>(p, blk.v, blk.stride, n, nv, st.acc, *blk.v_lines);
    return;
  }
  query_scores<A, D, from_cache>(st.q, blk.k, blk.stride, n, nv, blk.k_scale, s, blk.k_next,
                                 blk.n_next);
  softmax_update<A>(st, s, n, blk.v_scale, nv, p);
  block_pv<A, D>(p, blk.v, blk.stride, n, nv, st.acc, blk.v_next, blk.n_next);
}

// attend_block from the cache over a block whose rows run on across pages in chunks of 16
// (BlockRows, KvView::chunked_block_rows; `stride` elements a row): each chunk's scores and
// p·V by the row kernels, one softmax update for the block. Over pages of 16 tokens the
// update, the accumulator passes and the block's setup then come once per 64 keys, not per
// 16. k_next, v_next: the next block's first n_next rows, requested a line per line read in
// page runs across their chunks (BlockRunPrefetcher).
template <class A, KvDtype D>
void attend_block_chunked(QueryState& st, const BlockRows& k, const BlockRows& v,
                          std::size_t first_key, std::size_t nb, std::size_t stride, std::size_t nv,
                          const float* k_scale, const float* v_scale, const BlockRows& k_next,
                          const BlockRows& v_next, std::size_t n_next, float* s, float* p) {
  if (st.last_key < first_key) return;
  const std::size_t n = st.last_key - first_key + 1 < nb ? st.last_key - first_key + 1 : nb;
  constexpr std::size_t C = BlockRows::kChunkRows;
  const auto rows_of = [](const BlockRows& b, std::size_t r) {
    return reinterpret_cast<const elem_t<D>*>(b.chunk[r / C]);
  };
  BlockRunPrefetcher k_ahead(k_next, n_next), v_ahead(v_next, n_next);
  for (std::size_t r = 0; r < n; r += C) {
    query_scores<A, D, true>(st.q, rows_of(k, r), stride, n - r < C ? n - r : C, nv,
                             k_scale ? k_scale + r : nullptr, s + r, k_ahead);
  }
  softmax_update<A>(st, s, n, v_scale, nv, p);
  for (std::size_t r = 0; r < n; r += C) {
    block_pv<A, D>(p + r, rows_of(v, r), stride, n - r < C ? n - r : C, nv, st.acc, v_ahead);
  }
}

// Widens rows [0, n) of a cache block (row r at src + r * d) into an f32 tile with rows of
// nv·W lanes, zero-padded past d. Used when several query vectors share the block, so each
// element is converted once rather than once per query.
template <class A, KvDtype D>
void widen_rows(const elem_t<D>* src, std::size_t d, std::size_t n, std::size_t nv, float* tile,
                const elem_t<D>* next, std::size_t n_next) {
  using B = fbatch<A>;
  constexpr std::size_t W = B::size;
  const std::size_t full = d / W;
  const std::size_t row_lines = lines_per_row(d * sizeof(elem_t<D>));
  with_shared_block_prefetcher(next, n_next * d * sizeof(elem_t<D>), [&](auto& ahead) {
    for (std::size_t r = 0; r < n; ++r) {
      const elem_t<D>* row = src + r * d;
      float* out = tile + r * nv * W;
      ahead.next(row_lines);
      for (std::size_t c = 0; c < full; ++c) {
        load_elems<D, A>(row + c * W).store_aligned(out + c * W);
      }
      if (full < nv) {
        load_elems_partial<D, A>(row + full * W, d - full * W).store_aligned(out + full * W);
      }
    }
  });
}

// Copies scales [0, n) and zero-pads to `padded` (int8 blocks).
template <class A>
void copy_scales(const float* src, std::size_t n, std::size_t padded, float* dst) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = src[i];
  for (std::size_t i = n; i < padded; ++i) dst[i] = 0.0f;
}

// The int8 scales of rows [b0, b0 + nb) of kv head `kvh`, readable for `block` lanes: the
// cache's own for a full block within one page, else zero-padded copies into k_pad and v_pad
// (lanes past the range must read 0, not the next tokens' scales; a block across pages,
// chunked_block_rows, has its scales in each page).
template <class A>
void block_scales(const KvView& kv, std::size_t kvh, std::size_t b0, std::size_t nb,
                  std::size_t block, float* k_pad, float* v_pad, const float*& k_scale,
                  const float*& v_scale) {
  k_scale = kv.k_scales(kvh, b0);
  v_scale = kv.v_scales(kvh, b0);
  if (kv.spans_pages(b0, nb)) {
    for (std::size_t r = 0, n; r < nb; r += n) {
      n = kv.block_rows(b0 + r, b0 + nb, nb - r);  // the rest of that page
      copy_scales<A>(kv.k_scales(kvh, b0 + r), n, n, k_pad + r);
      copy_scales<A>(kv.v_scales(kvh, b0 + r), n, n, v_pad + r);
    }
    copy_scales<A>(k_pad, 0, block - nb, k_pad + nb);
    copy_scales<A>(v_pad, 0, block - nb, v_pad + nb);
    k_scale = k_pad;
    v_scale = v_pad;
  } else if (nb < block) {
    copy_scales<A>(k_scale, nb, block, k_pad);
    copy_scales<A>(v_scale, nb, block, v_pad);
    k_scale = k_pad;
    v_scale = v_pad;
  }
}

// 64-byte aligned scratch of `count` T, given back on scope exit to the thread's pool
// (scratch_pool.hpp), which the next call's scratch of the same size takes again; O(tile) per
// thread. Templated on the architecture so that no instance is shared between ISA-flagged
// units (no std::vector here for the same reason).
template <class A, class T = float>
class Scratch {
 public:
  explicit Scratch(std::size_t count) : data_(allocate(count)), count_(count) {}
  ~Scratch() { give_back_scratch(data_, bytes(count_)); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return data_; }
  // Room for at least `count` T; contents are lost when it moves.
  void reserve(std::size_t count) {
    if (count <= count_) return;
    give_back_scratch(data_, bytes(count_));
    data_ = allocate(count), count_ = count;
  }

 private:
  static std::size_t bytes(std::size_t count) { return (count * sizeof(T) + 64) / 64 * 64; }
  static T* allocate(std::size_t count) { return static_cast<T*>(take_scratch(bytes(count))); }
  T* data_;
  std::size_t count_;
};

}  // namespace kvscope::simd
