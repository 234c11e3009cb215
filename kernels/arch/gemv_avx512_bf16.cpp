// AVX512-BF16 decode GEMV (kernels/weights/gemv_bf16_dot.hpp). Built with -mavx512bf16;
// entered only where CPUID reports the unit.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "kernels/weights/gemv_bf16_dot.hpp"

namespace kvscope {
namespace {

constexpr std::size_t kPairsPerLine = 32;  // bf16 elements in one 64-byte line
constexpr std::size_t kRows = 4;           // rows sharing each load of x

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

// x [m × k] in bf16, each row zero-padded to `lines` whole lines, then `pad_rows` rows of
// zeros (the weights' tail is masked to zeros as well).
// A plain array, not a std::vector: no template code compiled with these flags may be shared
// with units built for other CPUs.
std::unique_ptr<std::uint16_t[]> round_rows_to_bf16(const float* x, std::size_t m, std::size_t k,
                                                    std::size_t lines, std::size_t pad_rows) {
  std::unique_ptr<std::uint16_t[]> out(new std::uint16_t[(m + pad_rows) * lines * kPairsPerLine]());
  for (std::size_t b = 0; b < m; ++b) {
    for (std::size_t l = 0; l < lines; ++l) {
      float part[kPairsPerLine] = {};
      for (std::size_t j = 0; j < kPairsPerLine && l * kPairsPerLine + j < k; ++j)
        part[j] = x[b * k + l * kPairsPerLine + j];
      const __m512bh pairs = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(part + 16), _mm512_loadu_ps(part));
      std::memcpy(out.get() + (b * lines + l) * kPairsPerLine, &pairs, sizeof pairs);
    }
  }
  return out;
}

// acc[r][b] = Σ over the lines of W's rows first + r (r < rows ≤ kRows) · x rows b < XT (at xb,
// `stride` elements apart), each lane in line order: the order gemv_bf16_dot sums in for
// any XT. Rows past `rows` read zeros. `next` (or nullptr): the next block's first row, whose
// lines are requested as this block's are read, a line for a line. The block's 4 rows are 4
// streams 2 pages long (8 KiB each at k = 4096) that the hardware prefetcher ramps up anew
// at every page; asked one block (32 KiB) ahead, the decode GEMV over a 4096 × 11008 bf16
// matrix ran at 3.30 against 3.58 ms, and the layer's bf16 decode step at 16.1-16.6 against
// 17.4-18.0 ms (Intel Xeon, 2 threads). Asking 1-2 KiB ahead within each row helped the
// bench but slowed the layer.
template <std::size_t XT>
void dot_block(const std::uint16_t* w0, std::size_t k, std::size_t rows, std::size_t lines,
               const std::uint16_t* xb, std::size_t stride, __m512 (&out)[kRows][XT],
               const std::uint16_t* next = nullptr) {
  // Local accumulators, copied out once: kept in registers across the loop (held in the
  // caller's array, every vdpbf16ps went through memory).
  __m512 acc[kRows][XT];
  for (auto& row : acc)
    for (__m512& a : row) a = _mm512_setzero_ps();
  const std::size_t whole = rows == kRows ? k / kPairsPerLine : 0;
  for (std::size_t l = 0; l < whole; ++l) {
    const std::size_t i = l * kPairsPerLine;
    __m512i wl[kRows];
    for (std::size_t r = 0; r < kRows; ++r) wl[r] = _mm512_loadu_si512(w0 + r * k + i);
    if (next != nullptr) {
      for (std::size_t r = 0; r < kRows; ++r) __builtin_prefetch(next + r * k + i, 0, 2);
    }
    for (std::size_t b = 0; b < XT; ++b) {
      const __m512i xl = _mm512_loadu_si512(xb + b * stride + i);
      for (std::size_t r = 0; r < kRows; ++r) acc[r][b] = dot_pairs(acc[r][b], wl[r], xl);
    }
  }
  for (std::size_t l = whole; l < lines; ++l) {
    const std::size_t i = l * kPairsPerLine;
    __m512i wl[kRows];
    for (std::size_t r = 0; r < kRows; ++r)
      wl[r] = r < rows ? load_line(w0 + r * k, i, k) : _mm512_setzero_si512();
    for (std::size_t b = 0; b < XT; ++b) {
      const __m512i xl = _mm512_loadu_si512(xb + b * stride + i);
      for (std::size_t r = 0; r < kRows; ++r) acc[r][b] = dot_pairs(acc[r][b], wl[r], xl);
    }
  }
  for (std::size_t r = 0; r < kRows; ++r)
    for (std::size_t b = 0; b < XT; ++b) out[r][b] = acc[r][b];
}

constexpr std::size_t kXTile = 4;  // rows of x sharing each line of W held in registers

}  // namespace

void gemm_bf16_dot(const float* x, std::size_t m, const WeightsView& w, float* y, int threads) {
  if (w.dtype != WeightDtype::bf16) {
    throw std::invalid_argument("gemv_bf16_dot needs bf16 weights");
  }
  if (m == 0) return;
  const std::size_t k = w.cols, n = w.rows;
  const std::size_t lines = (k + kPairsPerLine - 1) / kPairsPerLine;
  const std::size_t stride = lines * kPairsPerLine;
  const std::size_t tiles = m == 1 ? 1 : (m + kXTile - 1) / kXTile;
  const std::unique_ptr<std::uint16_t[]> x_bf16 =
      round_rows_to_bf16(x, m, k, lines, m == 1 ? 0 : tiles * kXTile - m);
  const auto* wd = static_cast<const std::uint16_t*>(w.data);
  const auto n_blocks = static_cast<long>((n + kRows - 1) / kRows);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long block = 0; block < n_blocks; ++block) {
    const std::size_t first = static_cast<std::size_t>(block) * kRows;
    const std::size_t rows = std::min(kRows, n - first);
    const std::uint16_t* w0 = wd + first * k;
    if (m == 1) {  // decode: one row of x, one accumulator per row of W
      __m512 acc[kRows][1];
      const bool more = first + 2 * kRows <= n;  // a whole block after this one
      dot_block<1>(w0, k, rows, lines, x_bf16.get(), stride, acc, more ? w0 + kRows * k : nullptr);
      for (std::size_t r = 0; r < rows; ++r) y[first + r] = _mm512_reduce_add_ps(acc[r][0]);
      continue;
    }
    for (std::size_t t = 0; t < tiles; ++t) {  // W's block from L1 after the first tile
      __m512 acc[kRows][kXTile];
      dot_block<kXTile>(w0, k, rows, lines, x_bf16.get() + t * kXTile * stride, stride, acc);
      for (std::size_t b = 0; b < kXTile && t * kXTile + b < m; ++b) {
        for (std::size_t r = 0; r < rows; ++r)
          y[(t * kXTile + b) * n + first + r] = _mm512_reduce_add_ps(acc[r][b]);
      }
    }
  }
}

void gemv_bf16_dot(const float* x, const WeightsView& w, float* y, int threads) {
  gemm_bf16_dot(x, 1, w, y, threads);
}

}  // namespace kvscope
