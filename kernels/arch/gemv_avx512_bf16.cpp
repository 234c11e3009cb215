// AVX512-BF16 decode GEMV (kernels/weights/gemv_bf16_dot.hpp). Built with -mavx512bf16;
// entered only where CPUID reports the unit.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

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

}  // namespace

void gemv_bf16_dot(const float* x, const WeightsView& w, float* y, int threads) {
  if (w.dtype != WeightDtype::bf16) {
    throw std::invalid_argument("gemv_bf16_dot needs bf16 weights");
  }
  const std::size_t k = w.cols, n = w.rows;
  const std::size_t lines = (k + kPairsPerLine - 1) / kPairsPerLine;
  // x in bf16, zero-padded to whole lines (the weights' tail is masked to zeros as well).
  std::vector<std::uint16_t> x_bf16(lines * kPairsPerLine);
  for (std::size_t l = 0; l < lines; ++l) {
    float part[kPairsPerLine] = {};
    for (std::size_t j = 0; j < kPairsPerLine && l * kPairsPerLine + j < k; ++j)
      part[j] = x[l * kPairsPerLine + j];
    const __m512bh pairs = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(part + 16), _mm512_loadu_ps(part));
    std::memcpy(x_bf16.data() + l * kPairsPerLine, &pairs, sizeof pairs);
  }
  const std::uint16_t* xb = x_bf16.data();
  const auto* wd = static_cast<const std::uint16_t*>(w.data);
  const auto n_blocks = static_cast<long>((n + kRows - 1) / kRows);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long block = 0; block < n_blocks; ++block) {
    const std::size_t first = static_cast<std::size_t>(block) * kRows;
    const std::size_t rows = std::min(kRows, n - first);
    const std::uint16_t* w0 = wd + first * k;
    __m512 acc[kRows] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                         _mm512_setzero_ps()};
    if (rows == kRows) {
      const std::size_t whole = k / kPairsPerLine;
      for (std::size_t l = 0; l < whole; ++l) {
        const std::size_t i = l * kPairsPerLine;
        const __m512i xl = _mm512_loadu_si512(xb + i);
        for (std::size_t r = 0; r < kRows; ++r)
          acc[r] = dot_pairs(acc[r], _mm512_loadu_si512(w0 + r * k + i), xl);
      }
      for (std::size_t l = whole; l < lines; ++l) {
        const std::size_t i = l * kPairsPerLine;
        const __m512i xl = _mm512_loadu_si512(xb + i);
        for (std::size_t r = 0; r < kRows; ++r)
          acc[r] = dot_pairs(acc[r], load_line(w0 + r * k, i, k), xl);
      }
    } else {
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t i = 0; i < lines * kPairsPerLine; i += kPairsPerLine)
          acc[r] = dot_pairs(acc[r], load_line(w0 + r * k, i, k), _mm512_loadu_si512(xb + i));
      }
    }
    for (std::size_t r = 0; r < rows; ++r) y[first + r] = _mm512_reduce_add_ps(acc[r]);
  }
}

}  // namespace kvscope
