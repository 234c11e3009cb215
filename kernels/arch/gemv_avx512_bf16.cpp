// AVX512-BF16 decode GEMV (kernels/weights/gemv_bf16_dot.hpp). Built with -mavx512bf16;
// entered only where CPUID reports the unit.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>

#include "kernels/prefetch_policy.hpp"
#include "kernels/weights/gemv_bf16_dot.hpp"
#include "kernels/weights/row_streams.hpp"

namespace kvscope {
namespace {

constexpr std::size_t kPairsPerLine = 32;  // bf16 elements in one 64-byte line

// acc += pairwise products of a and b (bf16), summed in f32. Inline asm because GCC 12
// copies the accumulator around the intrinsic inside loops.
inline __m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  asm("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

// Elements [i, i + 32) of a bf16 row, zeros past `end`.
inline __m512i load_line(const std::uint16_t* row, std::size_t i, std::size_t end) {
  if (i + kPairsPerLine <= end) return _mm512_loadu_si512(row + i);
  const __mmask32 keep = (end - i >= 32) ? ~__mmask32{0} : ((__mmask32{1} << (end - i)) - 1);
  return _mm512_maskz_loadu_epi16(keep, row + i);
}

// Elements between the rows of a batch's x in bf16: its lines, then padding that starts
// consecutive rows 512 bytes apart modulo 4 KiB. Rows of a multiple of 4 KiB (k = 4096: 8 KiB,
// as W's rows) put a tile's 8 x lines and W's 3 block lines and 3 prefetched lines at the same
// offset within 4 KiB, all in one L1 set: 8 rows over a 4096 × 11008 bf16 matrix took 1.17-1.20×
// the padded time (AMD Zen 4, 2 threads; rows 64 or 128 bytes apart gained nothing, 256 to
// 1,536 bytes apart all about the same).
std::size_t batch_row_stride(std::size_t lines) {
  constexpr std::size_t kPage = 4096, kApart = 512;
  const std::size_t bytes = lines * 64;
  return (bytes + (kApart + kPage - bytes % kPage) % kPage) / sizeof(std::uint16_t);
}

// Frees what std::aligned_alloc gave.
struct FreeAligned {
  void operator()(std::uint16_t* p) const { std::free(p); }
};
using RoundedRows = std::unique_ptr<std::uint16_t[], FreeAligned>;

// x [m × k] in bf16, rows `stride` elements apart, each zero-padded past k, then `pad_rows`
// rows of zeros (the weights' tail is masked to zeros as well). 64-byte aligned, so that every
// line of x the kernels load is one cache line: new[] gives 16-byte alignment, and where the
// heap put x off a line each load touched two (AMD Zen 5, against new[], projection_bench:
// BM_SmallBatchWarm 0.84-0.93x the time, 16 rows cold 0.86-0.92x, the GEMV 0.71-0.75x in three
// rounds and level in two; the layer's step level, where x happened to sit on a line).
// A plain array, not a std::vector: no template code compiled with these flags may be shared
// with units built for other CPUs.
RoundedRows round_rows_to_bf16(const float* x, std::size_t m, std::size_t k, std::size_t lines,
                               std::size_t stride, std::size_t pad_rows) {
  const std::size_t bytes = ((m + pad_rows) * stride * sizeof(std::uint16_t) + 63) / 64 * 64;
  RoundedRows out(static_cast<std::uint16_t*>(std::aligned_alloc(64, bytes)));
  if (!out) throw std::bad_alloc();
  std::memset(out.get(), 0, bytes);
  for (std::size_t b = 0; b < m; ++b) {
    for (std::size_t l = 0; l < lines; ++l) {
      // Masked loads (no fault past k): element-wise copies through a buffer took 8% of an
      // 8-row product over 4096 × 512 (one thread; rounding runs before the threads start).
      const std::size_t left = k - l * kPairsPerLine;
      const auto first_n = [](std::size_t count) {
        return count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << count) - 1);
      };
      const float* part = x + b * k + l * kPairsPerLine;
      const __m512 low = _mm512_maskz_loadu_ps(first_n(left), part);
      const __m512 high = _mm512_maskz_loadu_ps(left > 16 ? first_n(left - 16) : 0, part + 16);
      const __m512bh pairs = _mm512_cvtne2ps_pbh(high, low);
      std::memcpy(out.get() + b * stride + l * kPairsPerLine, &pairs, sizeof pairs);
    }
  }
  return out;
}

// sums[r · XT + b] (in memory; zeros first where `first_chunk`) += lines [l0, l1) of W's rows
// w0 + r · apart (apart = k: adjacent rows), r < rows ≤ R (rows past `rows` read zeros), · x rows b
// < XT (at xb, `stride` elements apart), each lane in line order: the order gemv_bf16_dot sums in
// for any R and XT, whether k is taken whole or in chunks. Accumulators stay in registers over the
// lines (held in memory, every vdpbf16ps went through it). Per line read, a line of the rows
// read later is requested at the same offset from `next` into L2 (memory's latency) and from
// `near` into L1 (L2's), each skipped where nullptr. Rows read a block at a time are streams 2
// pages long (8 KiB each at k = 4096) that the hardware prefetcher ramps up anew at every page;
// asked one block (32 KiB) ahead, the decode GEMV over a 4096 × 11008 bf16 matrix ran at 3.30
// against 3.58 ms, and the layer's bf16 decode step at 16.1-16.6 against 17.4-18.0 ms (Intel
// Xeon, 2 threads). Asking 1-2 KiB ahead within each row helped the bench but slowed the layer.
template <std::size_t R, std::size_t XT>
void dot_lines(const std::uint16_t* w0, std::size_t k, std::size_t rows, std::size_t l0,
               std::size_t l1, const std::uint16_t* xb, std::size_t stride, __m512* sums,
               bool first_chunk, const std::uint16_t* next, std::size_t apart,
               const std::uint16_t* near = nullptr) {
  __m512 acc[R][XT];
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < XT; ++b)
      acc[r][b] = first_chunk ? _mm512_setzero_ps() : _mm512_load_ps(sums + r * XT + b);
  // Whole lines of whole blocks take plain loads; a block's last rows and a row's last,
  // partial line are masked.
  const std::size_t whole_end = rows == R ? std::min(l1, k / kPairsPerLine) : l0;
  for (std::size_t l = l0; l < whole_end; ++l) {
    const std::size_t i = l * kPairsPerLine;
    __m512i wl[R];
    for (std::size_t r = 0; r < R; ++r) wl[r] = _mm512_loadu_si512(w0 + r * apart + i);
    if (next != nullptr) {
      const std::size_t ahead = (l - l0) * kPairsPerLine;
      for (std::size_t r = 0; r < R; ++r) __builtin_prefetch(next + r * apart + ahead, 0, 2);
    }
    if (near != nullptr) {
      const std::size_t ahead = (l - l0) * kPairsPerLine;
      for (std::size_t r = 0; r < R; ++r) __builtin_prefetch(near + r * apart + ahead, 0, 3);
    }
    for (std::size_t b = 0; b < XT; ++b) {
      const __m512i xl = _mm512_loadu_si512(xb + b * stride + i);
      for (std::size_t r = 0; r < R; ++r) acc[r][b] = dot_pairs(acc[r][b], wl[r], xl);
    }
  }
  for (std::size_t l = whole_end; l < l1; ++l) {
    const std::size_t i = l * kPairsPerLine;
    __m512i wl[R];
    for (std::size_t r = 0; r < R; ++r)
      wl[r] = r < rows ? load_line(w0 + r * apart, i, k) : _mm512_setzero_si512();
    for (std::size_t b = 0; b < XT; ++b) {
      const __m512i xl = _mm512_loadu_si512(xb + b * stride + i);
      for (std::size_t r = 0; r < R; ++r) acc[r][b] = dot_pairs(acc[r][b], wl[r], xl);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < XT; ++b) _mm512_store_ps(sums + r * XT + b, acc[r][b]);
}

// y[b × n + first + r] for x's rows [b0, b0 + count) (count ≤ XT; x's rows past m are zeros)
// and W's rows [first, first + rows).
template <std::size_t R, std::size_t XT>
void tile_to_y(const std::uint16_t* w0, std::size_t k, std::size_t first, std::size_t rows,
               std::size_t lines, const std::uint16_t* x, std::size_t stride, std::size_t b0,
               std::size_t count, std::size_t n, float* y, const std::uint16_t* next) {
  alignas(64) __m512 sums[R * XT];
  dot_lines<R, XT>(w0, k, rows, 0, lines, x + b0 * stride, stride, sums, true, next, k);
  for (std::size_t b = 0; b < count; ++b) {
    for (std::size_t r = 0; r < rows; ++r)
      y[(b0 + b) * n + first + r] = _mm512_reduce_add_ps(sums[r * XT + b]);
  }
}

// The product over blocks of R rows of W, split over the threads, for batches of up to 4 rows
// (one tile). The block requests the next block's rows from memory.
template <std::size_t R, std::size_t XT>
void gemm_blocks(const std::uint16_t* x, std::size_t m, std::size_t stride, std::size_t lines,
                 const std::uint16_t* wd, std::size_t k, std::size_t n, float* y, int threads) {
  const auto n_blocks = static_cast<long>((n + R - 1) / R);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long block = 0; block < n_blocks; ++block) {
    const std::size_t first = static_cast<std::size_t>(block) * R;
    const std::size_t rows = std::min(R, n - first);
    const std::uint16_t* w0 = wd + first * k;
    const std::uint16_t* next = first + 2 * R <= n ? w0 + R * k : nullptr;  // a whole block
    tile_to_y<R, XT>(w0, k, first, rows, lines, x, stride, 0, m, n, y, next);
  }
}

// Batches of more than 4 rows read x in tiles of 8 rows (a last tile of at most 4 as 4) and W
// in blocks of 3 rows (24 accumulators). A tile of x over all of k (8 rows × 8 KiB at k = 4096)
// does not fit L1, so every block would bring it in again from L2 beside W's lines coming from
// memory. Instead W's blocks go in panels of kPanelBlocks, and k in chunks of kChunkLines
// lines: a chunk of the tile (16 KiB) stays in L1 while the panel's blocks take it, each
// block's sums kept in memory between chunks (12 KiB). Per lane the sums run in line order
// still, so every row stays bit for bit its GEMV.
// AMD Zen 4, 2 threads, bf16 matrices cold in memory, this kernel and the unchunked one
// alternated call by call (medians of 40-60 per-pair ratios): 8 rows over 11008 × 4096 0.93×
// the time, 4096 × 4096 0.96×, 1024 × 4096 0.95×, 4096 × 11008 1.00×; 5 rows 0.85×, 16 rows
// 0.95×, 32 rows 0.97×; the decoder layer's batch-8 step 0.90-0.94×. Without the requests
// ahead: 1.5× the time; chunks of 64 lines (32 KiB of x, L1's size): 1.3×.
constexpr std::size_t kChunkLines = 32;  // 2 KiB of each row
constexpr std::size_t kPanelBlocks = 8;
constexpr std::size_t kPiecesAhead = 2 * kPanelBlocks;  // a piece: one block over one chunk

// The first row of piece `piece` counted from the panel of block `block` on, in the order the
// pieces are computed (chunk by chunk, block by block within a chunk, panel after panel);
// nullptr past W's last whole block.
template <std::size_t R>
const std::uint16_t* piece_start(const std::uint16_t* wd, std::size_t k, std::size_t chunks,
                                 std::size_t whole_blocks, std::size_t block, std::size_t piece) {
  while (block < whole_blocks) {
    const std::size_t blocks = std::min(kPanelBlocks, whole_blocks - block);
    if (piece < chunks * blocks) {
      return wd + (block + piece % blocks) * R * k + piece / blocks * kChunkLines * kPairsPerLine;
    }
    piece -= chunks * blocks;
    block += blocks;
  }
  return nullptr;
}

// One tile of x (rows [b0, b0 + count), count ≤ XT) over the panel of `blocks` blocks from
// block `block`. Only the first tile requests pieces from memory (kPiecesAhead on): later tiles
// find the panel (192 KiB) in L2. Every tile requests the next piece into L1 as it reads one:
// the L1 prefetcher picks up each row's 2 KiB piece too late (perf: the samples on the loads of
// W). AMD Zen 5, 2 threads, against without: the layer's batch-8 step (GQA-8 f32 cache, 2,000
// tokens, bf16 weights) 1.13-1.15x the tokens/s in two sittings of 5-6 alternations
// (BM_SmallBatch 8 rows 0.95-0.99x the time, 16 rows 0.93-0.95x, 32 rows 0.99-1.03x); two
// pieces ahead 0.96x the gain's tokens/s, without the requests from memory 0.92x.
template <std::size_t R, std::size_t XT>
void panel_tile(const std::uint16_t* wd, std::size_t k, std::size_t n, std::size_t lines,
                std::size_t whole_blocks, std::size_t block, std::size_t blocks,
                const std::uint16_t* x, std::size_t stride, std::size_t b0, std::size_t count,
                float* y) {
  alignas(64) __m512 sums[kPanelBlocks][R * XT];
  const std::size_t chunks = (lines + kChunkLines - 1) / kChunkLines;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t l0 = c * kChunkLines, l1 = std::min(lines, l0 + kChunkLines);
    for (std::size_t p = 0; p < blocks; ++p) {
      const std::uint16_t* next = b0 == 0 ? piece_start<R>(wd, k, chunks, whole_blocks, block,
                                                           c * blocks + p + kPiecesAhead)
                                          : nullptr;
      const std::uint16_t* near =
          piece_start<R>(wd, k, chunks, whole_blocks, block, c * blocks + p + 1);
      dot_lines<R, XT>(wd + (block + p) * R * k, k, R, l0, l1, x + b0 * stride, stride, sums[p],
                       c == 0, next, k, near);
    }
  }
  for (std::size_t p = 0; p < blocks; ++p) {
    for (std::size_t b = 0; b < count; ++b) {
      for (std::size_t r = 0; r < R; ++r) {
        y[(b0 + b) * n + (block + p) * R + r] = _mm512_reduce_add_ps(sums[p][r * XT + b]);
      }
    }
  }
}

template <std::size_t R, std::size_t XT>
void gemm_panels(const std::uint16_t* x, std::size_t m, std::size_t stride, std::size_t lines,
                 const std::uint16_t* wd, std::size_t k, std::size_t n, float* y, int threads) {
  const std::size_t whole_blocks = n / R;
  const auto n_panels = static_cast<long>((whole_blocks + kPanelBlocks - 1) / kPanelBlocks);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long panel = 0; panel < n_panels; ++panel) {
    const std::size_t block = static_cast<std::size_t>(panel) * kPanelBlocks;
    const std::size_t blocks = std::min(kPanelBlocks, whole_blocks - block);
    for (std::size_t b0 = 0; b0 < m; b0 += XT) {
      const std::size_t count = std::min(XT, m - b0);
      if (count <= 4) {
        panel_tile<R, 4>(wd, k, n, lines, whole_blocks, block, blocks, x, stride, b0, count, y);
      } else {
        panel_tile<R, XT>(wd, k, n, lines, whole_blocks, block, blocks, x, stride, b0, count, y);
      }
    }
  }
  const std::size_t first = whole_blocks * R;  // W's last rows, fewer than a block
  for (std::size_t b0 = 0; first < n && b0 < m; b0 += XT) {
    tile_to_y<R, XT>(wd + first * k, k, first, n - first, lines, x, stride, b0,
                     std::min(XT, m - b0), n, y, nullptr);
  }
}

// Decode (one row of x): each thread's rows read as kStreams streams side by side
// (row_streams.hpp), one row of each per pass, an accumulator each. Against blocks of 4
// adjacent rows requesting the next block (AMD Zen 5, 2 threads, 2026-12-06, 3 alternations
// of projection_bench BM_DecodeGemvBf16Dot): 4096 x 4096, 4096 x 11008 and 11008 x 4096 at
// 0.90-0.92, 0.91-0.99 and 0.99-1.01 of the read loop's rate against 0.58-0.71, 0.66-0.80 and
// 0.71-0.84; the layer's decode step 0.87x the time. Fewer or more streams: 4 0.80-1.00, 6
// 0.88-1.01, 8 0.77-0.96, 12 0.71-0.86, 16 0.47-0.60; the layer 0.88x with 4 or 6 and 0.91x
// with 8. All streams' rows lie at one offset modulo 4 KiB (rows of whole pages), i.e. in one
// L1 set: 5 lines of W, x's and the next lines the L1 prefetcher brings fit its 12 ways.
// Batches keep their blocks and panels: streams of 3 rows over tiles of 8 rows of x (x from L2)
// read W at 34 GB/s, of 4 or 6 rows over two tiles of 4 at 36-41, the panels at 45-48
// (BM_SmallBatch/8/4096/11008/0, same sitting).
// 4 streams, not 5, since W sits on huge pages (engine/weight_matrix.cpp; the counts above
// were measured on 4 KiB pages): bf16 GB/s over the f32 GEMV's (4 streams) in the same round,
// calls alternated in one process, Zen 5, 2 threads, with memory in its fast state (f32 at
// 77-81 GB/s): 4096 x 11008 1.002-1.016 with 4 streams against 0.949-0.955 with 5 (3:
// 0.996-1.023, 6: 0.988); with memory slow level (0.999-1.006 against 0.991-0.996 at
// 4096 x 11008 and 11008 x 4096, 1.108 against 1.122 at 4096 x 4096).
constexpr std::size_t kStreams = 4;

// Its own parallel loop, not for_each_stream_pass: through that lambda GCC 12 copied one
// accumulator to another register and back around its vdpbf16ps in the hot loop, and the GEMV
// read at 0.86-0.88 of the read loop against 0.90-0.92 (4096 x 4096 and 4096 x 11008, 4
// alternations).
void gemv_streams(const std::uint16_t* x, std::size_t lines, const std::uint16_t* wd, std::size_t k,
                  std::size_t n, float* y, int threads) {
  const bool request_next = prefetch_weight_rows();
#pragma omp parallel num_threads(threads)
  {
    const RowStreams mine = row_streams(n, static_cast<std::size_t>(omp_get_num_threads()),
                                        static_cast<std::size_t>(omp_get_thread_num()), kStreams);
    const std::size_t apart = mine.length * k;
    for (std::size_t t = 0; t < mine.length; ++t) {
      const std::size_t rows = mine.streams_at(t, kStreams);
      const std::uint16_t* w0 = wd + (mine.first + t) * k;
      const std::uint16_t* next = request_next && t + 1 < mine.length ? w0 + k : nullptr;
      alignas(64) __m512 sums[kStreams];
      dot_lines<kStreams, 1>(w0, k, rows, 0, lines, x, 0, sums, true, next, apart);
      for (std::size_t j = 0; j < rows; ++j)
        y[mine.first + j * mine.length + t] = _mm512_reduce_add_ps(sums[j]);
    }
  }
}

}  // namespace

// Shapes: one row of x (decode) takes W in streams (gemv_streams); up to 4 rows of x, blocks of 4
// with all rows at once (16 accumulators); more, blocks of 3 rows in tiles of 8 (24 accumulators),
// so that each line of W read from memory feeds 8 rows of x while it is in registers. Before,
// batches took tiles of 4 over blocks of 4 and requested nothing ahead: a block was read from
// memory by its first tile, again from L2 by its second, and no memory reads hid either pass. Over
// a 4096 × 11008 bf16 matrix (AMD Zen 4, 2 threads, old and new kernels alternated in one process),
// with x's rows spaced as batch_row_stride does: 8 rows 0.71× the time (0.77-0.95× from the tiles
// alone), 16 rows 0.78-0.88×, 2 rows 0.72-0.93×, 4 rows 0.73-0.87×. The tiles of 8 then went over
// panels in chunks of k (gemm_panels): a first try, requesting 4-16 segments ahead, took 0.99-1.15×
// the unchunked time; requested two chunks ahead (96 KiB) they pay.
void gemm_bf16_dot(const float* x, std::size_t m, const WeightsView& w, float* y, int threads) {
  if (w.dtype != WeightDtype::bf16) {
    throw std::invalid_argument("gemv_bf16_dot needs bf16 weights");
  }
  if (m == 0) return;
  const std::size_t k = w.cols, n = w.rows;
  const std::size_t lines = (k + kPairsPerLine - 1) / kPairsPerLine;
  const std::size_t stride = m == 1 ? lines * kPairsPerLine : batch_row_stride(lines);
  const auto* wd = static_cast<const std::uint16_t*>(w.data);
  // x's rows padded with zero rows to whole tiles of XT.
  const auto rounded = [&](std::size_t tile) {
    return round_rows_to_bf16(x, m, k, lines, stride, (m + tile - 1) / tile * tile - m);
  };
  if (m == 1) return gemv_streams(rounded(1).get(), lines, wd, k, n, y, threads);
  if (m <= 4) return gemm_blocks<4, 4>(rounded(4).get(), m, stride, lines, wd, k, n, y, threads);
  gemm_panels<3, 8>(rounded(8).get(), m, stride, lines, wd, k, n, y, threads);
}

void gemv_bf16_dot(const float* x, const WeightsView& w, float* y, int threads) {
  gemm_bf16_dot(x, 1, w, y, threads);
}

}  // namespace kvscope
