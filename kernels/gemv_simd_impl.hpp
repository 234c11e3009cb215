#pragma once
// The body of the xsimd GEMV kernel, written once over xsimd::batch<float, Arch>. Included
// only by the ISA-flagged units in kernels/arch/, which instantiate it.
#include <algorithm>

#include "kernels/gemv_simd.hpp"

namespace kvscope {

template <class Arch>
void gemv_kernel(const float* x, const float* w, std::size_t k, std::size_t n, float* y,
                 int threads) {
  using Batch = xsimd::batch<float, Arch>;
  constexpr std::size_t kLanes = Batch::size;
  constexpr std::size_t kRows = 4;
  const std::size_t k_vec = k - k % kLanes;
  const auto n_blocks = static_cast<long>((n + kRows - 1) / kRows);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long block = 0; block < n_blocks; ++block) {
    const std::size_t first = static_cast<std::size_t>(block) * kRows;
    const std::size_t rows = std::min(kRows, n - first);
    const float* w0 = w + first * k;
    if (rows == kRows) {
      Batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
      for (std::size_t i = 0; i < k_vec; i += kLanes) {
        const Batch xb = Batch::load_unaligned(x + i);
        a0 = xsimd::fma(Batch::load_unaligned(w0 + i), xb, a0);
        a1 = xsimd::fma(Batch::load_unaligned(w0 + k + i), xb, a1);
        a2 = xsimd::fma(Batch::load_unaligned(w0 + 2 * k + i), xb, a2);
        a3 = xsimd::fma(Batch::load_unaligned(w0 + 3 * k + i), xb, a3);
      }
      float sums[kRows] = {xsimd::hadd(a0), xsimd::hadd(a1), xsimd::hadd(a2), xsimd::hadd(a3)};
      for (std::size_t r = 0; r < kRows; ++r) {
        for (std::size_t i = k_vec; i < k; ++i) sums[r] += w0[r * k + i] * x[i];
        y[first + r] = sums[r];
      }
    } else {
      for (std::size_t r = 0; r < rows; ++r) {
        const float* wr = w0 + r * k;
        Batch acc(0.0f);
        for (std::size_t i = 0; i < k_vec; i += kLanes) {
          acc = xsimd::fma(Batch::load_unaligned(wr + i), Batch::load_unaligned(x + i), acc);
        }
        float sum = xsimd::hadd(acc);
        for (std::size_t i = k_vec; i < k; ++i) sum += wr[i] * x[i];
        y[first + r] = sum;
      }
    }
  }
}

}  // namespace kvscope
