// AVX512-BF16 decode GEMV (kernels/weights/gemv_bf16_dot.hpp). Built with -mavx512bf16;
// entered only where CPUID reports the unit.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "kernels/weights/gemv_bf16_dot.hpp"

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

// x [m × k] in bf16, rows `stride` elements apart, each zero-padded past k, then `pad_rows`
// rows of zeros (the weights' tail is masked to zeros as well).
// A plain array, not a std::vector: no template code compiled with these flags may be shared
// with units built for other CPUs.
std::unique_ptr<std::uint16_t[]> round_rows_to_bf16(const float* x, std::size_t m, std::size_t k,
                                                    std::size_t lines, std::size_t stride,
                                                    std::size_t pad_rows) {
  std::unique_ptr<std::uint16_t[]> out(new std::uint16_t[(m + pad_rows) * stride]());
  for (std::size_t b = 0; b < m; ++b) {
    for (std::size_t l = 0; l < lines; ++l) {
      float part[kPairsPerLine] = {};
      for (std::size_t j = 0; j < kPairsPerLine && l * kPairsPerLine + j < k; ++j)
        part[j] = x[b * k + l * kPairsPerLine + j];
      const __m512bh pairs = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(part + 16), _mm512_loadu_ps(part));
      std::memcpy(out.get() + b * stride + l * kPairsPerLine, &pairs, sizeof pairs);
    }
  }
  return out;
}

// acc[r][b] = Σ over the lines of W's rows first + r (r < rows ≤ R) · x rows b < XT (at xb,
// `stride` elements apart), each lane in line order: the order gemv_bf16_dot sums in for any
// R and XT. Rows past `rows` read zeros. `next` (or nullptr): the next block's first row, whose
// lines are requested as this block's are read, a line for a line. The block's rows are
// streams 2 pages long (8 KiB each at k = 4096) that the hardware prefetcher ramps up anew at
// every page; asked one block (32 KiB) ahead, the decode GEMV over a 4096 × 11008 bf16 matrix
// ran at 3.30 against 3.58 ms, and the layer's bf16 decode step at 16.1-16.6 against 17.4-18.0
// ms (Intel Xeon, 2 threads). Asking 1-2 KiB ahead within each row helped the bench but slowed
// the layer.
template <std::size_t R, std::size_t XT>
void dot_block(const std::uint16_t* w0, std::size_t k, std::size_t rows, std::size_t lines,
               const std::uint16_t* xb, std::size_t stride, __m512 (&out)[R][XT],
               const std::uint16_t* next) {
  // Local accumulators, copied out once: kept in registers across the loop (held in the
  // caller's array, every vdpbf16ps went through memory).
  __m512 acc[R][XT];
  for (auto& row : acc)
    for (__m512& a : row) a = _mm512_setzero_ps();
  const std::size_t whole = rows == R ? k / kPairsPerLine : 0;
  for (std::size_t l = 0; l < whole; ++l) {
    const std::size_t i = l * kPairsPerLine;
    __m512i wl[R];
    for (std::size_t r = 0; r < R; ++r) wl[r] = _mm512_loadu_si512(w0 + r * k + i);
    if (next != nullptr) {
      for (std::size_t r = 0; r < R; ++r) __builtin_prefetch(next + r * k + i, 0, 2);
    }
    for (std::size_t b = 0; b < XT; ++b) {
      const __m512i xl = _mm512_loadu_si512(xb + b * stride + i);
      for (std::size_t r = 0; r < R; ++r) acc[r][b] = dot_pairs(acc[r][b], wl[r], xl);
    }
  }
  for (std::size_t l = whole; l < lines; ++l) {
    const std::size_t i = l * kPairsPerLine;
    __m512i wl[R];
    for (std::size_t r = 0; r < R; ++r)
      wl[r] = r < rows ? load_line(w0 + r * k, i, k) : _mm512_setzero_si512();
    for (std::size_t b = 0; b < XT; ++b) {
      const __m512i xl = _mm512_loadu_si512(xb + b * stride + i);
      for (std::size_t r = 0; r < R; ++r) acc[r][b] = dot_pairs(acc[r][b], wl[r], xl);
    }
  }
  for (std::size_t r = 0; r < R; ++r)
    for (std::size_t b = 0; b < XT; ++b) out[r][b] = acc[r][b];
}

// y[b × n + first + r] for x's rows [b0, b0 + count) (count ≤ XT; x's rows past m are zeros)
// and W's rows [first, first + rows).
template <std::size_t R, std::size_t XT>
void tile_to_y(const std::uint16_t* w0, std::size_t k, std::size_t first, std::size_t rows,
               std::size_t lines, const std::uint16_t* x, std::size_t stride, std::size_t b0,
               std::size_t count, std::size_t n, float* y, const std::uint16_t* next) {
  __m512 acc[R][XT];
  dot_block<R, XT>(w0, k, rows, lines, x + b0 * stride, stride, acc, next);
  for (std::size_t b = 0; b < count; ++b) {
    for (std::size_t r = 0; r < rows; ++r)
      y[(b0 + b) * n + first + r] = _mm512_reduce_add_ps(acc[r][b]);
  }
}

// The product over blocks of R rows of W, split over the threads. Each block serves x's rows
// in tiles of XT (a last tile of at most 4 rows as 4); its first tile requests the next
// block's rows from memory (later tiles find the block in L1 or L2).
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
    for (std::size_t b0 = 0; b0 < m; b0 += XT, next = nullptr) {
      const std::size_t count = std::min(XT, m - b0);
      if (XT > 4 && count <= 4) {
        tile_to_y<R, 4>(w0, k, first, rows, lines, x, stride, b0, count, n, y, next);
      } else {
        tile_to_y<R, XT>(w0, k, first, rows, lines, x, stride, b0, count, n, y, next);
      }
    }
  }
}

}  // namespace

// Shapes: one row of x (decode) takes blocks of 4 rows of W, an accumulator each; up to 4
// rows of x, blocks of 4 with all rows at once (16 accumulators); more, blocks of 3 rows in
// tiles of 8 (24 accumulators), so that each line of W read from memory feeds 8 rows of x
// while it is in registers. Before, batches took tiles of 4 over blocks of 4 and requested
// nothing ahead: a block was read from memory by its first tile, again from L2 by its
// second, and no memory reads hid either pass. Over a 4096 × 11008 bf16 matrix (AMD Zen 4,
// 2 threads, old and new kernels alternated in one process), with x's rows spaced as
// batch_row_stride does: 8 rows 0.71× the time (0.77-0.95× from the tiles alone), 16 rows
// 0.78-0.88×, 2 rows 0.72-0.93×, 4 rows 0.73-0.87×. Tried and slower: k in chunks of 1-2 KiB
// per row so that a tile's chunk of x stays in L1 (0.99-1.15× the unchunked time: W's rows
// then stream in short pieces).
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
  const auto run = [&]<std::size_t R, std::size_t XT>() {
    const std::unique_ptr<std::uint16_t[]> x_bf16 =
        round_rows_to_bf16(x, m, k, lines, stride, (m + XT - 1) / XT * XT - m);
    gemm_blocks<R, XT>(x_bf16.get(), m, stride, lines, wd, k, n, y, threads);
  };
  if (m == 1) return run.template operator()<4, 1>();
  if (m <= 4) return run.template operator()<4, 4>();
  run.template operator()<3, 8>();
}

void gemv_bf16_dot(const float* x, const WeightsView& w, float* y, int threads) {
  gemm_bf16_dot(x, 1, w, y, threads);
}

}  // namespace kvscope
