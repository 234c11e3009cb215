#pragma once
// The body of the xsimd GEMV kernel, written once over xsimd::batch<float, Arch> and the
// weight element type. Included only by the ISA-flagged units in kernels/arch/.
#include <algorithm>

#include "kernels/simd_rows.hpp"
#include "kernels/weights/gemv_simd.hpp"

namespace kvscope {

template <class Arch, KvDtype D>
void gemv_kernel(const float* x, const void* w_data, std::size_t k, std::size_t n, float* y,
                 int threads) {
  using Batch = xsimd::batch<float, Arch>;
  using Elem = simd::elem_t<D>;
  constexpr std::size_t kLanes = Batch::size;
  constexpr std::size_t kRows = 4;
  const auto* w = static_cast<const Elem*>(w_data);
  const std::size_t k_vec = k - k % kLanes, k_tail = k - k_vec;
  const Batch x_tail =
      k_tail ? simd::load_elems_partial<KvDtype::f32, Arch>(x + k_vec, k_tail) : Batch(0.0f);
  const auto n_blocks = static_cast<long>((n + kRows - 1) / kRows);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long block = 0; block < n_blocks; ++block) {
    const std::size_t first = static_cast<std::size_t>(block) * kRows;
    const std::size_t rows = std::min(kRows, n - first);
    const Elem* w0 = w + first * k;
    Batch acc[kRows] = {Batch(0.0f), Batch(0.0f), Batch(0.0f), Batch(0.0f)};
    // 16-bit weights: the next block's rows requested a line for each line read (see
    // gemv_avx512_bf16.cpp's dot_block); nullptr for the last whole block. Not f32: there it
    // sped up the 4096 × 4096 GEMV by 10% but slowed the layer's f32 decode step by 5%
    // (27.5-28.0 -> 29.1-30.1 ms, Intel Xeon, 2 threads).
    const Elem* next = sizeof(Elem) == 2 && first + 2 * kRows <= n ? w0 + kRows * k : nullptr;
    constexpr std::size_t kLineElems = 64 / sizeof(Elem);
    if (rows == kRows) {
      for (std::size_t i = 0; i < k_vec; i += kLanes) {
        if (next != nullptr && i % kLineElems == 0) {
          for (std::size_t r = 0; r < kRows; ++r) __builtin_prefetch(next + r * k + i, 0, 2);
        }
        const Batch xb = Batch::load_unaligned(x + i);
        for (std::size_t r = 0; r < kRows; ++r) {
          acc[r] = xsimd::fma(simd::load_elems<D, Arch>(w0 + r * k + i), xb, acc[r]);
        }
      }
    } else {
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t i = 0; i < k_vec; i += kLanes) {
          acc[r] = xsimd::fma(simd::load_elems<D, Arch>(w0 + r * k + i),
                              Batch::load_unaligned(x + i), acc[r]);
        }
      }
    }
    for (std::size_t r = 0; r < rows; ++r) {
      if (k_tail) {
        acc[r] = xsimd::fma(simd::load_elems_partial<D, Arch>(w0 + r * k + k_vec, k_tail), x_tail,
                            acc[r]);
      }
      y[first + r] = xsimd::hadd(acc[r]);
    }
  }
}

}  // namespace kvscope
