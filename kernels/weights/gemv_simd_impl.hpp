#pragma once
// The body of the xsimd GEMV kernel, written once over xsimd::batch<float, Arch> and the
// weight element type. Included only by the ISA-flagged units in kernels/arch/.
#include <algorithm>

#include "kernels/prefetch_policy.hpp"
#include "kernels/simd_rows.hpp"
#include "kernels/weights/gemv_simd.hpp"
#include "kernels/weights/row_streams.hpp"

namespace kvscope {

// Streams of rows (row_streams.hpp), not blocks of 4 adjacent rows: AMD Zen 5 (2 threads,
// 2026-12-06, projection_bench BM_DecodeGemv, 3 alternations) bf16 weights at 0.82-0.83,
// 0.86-0.90 and 0.82-0.86 of the read loop's rate (4096 x 4096, 4096 x 11008, 11008 x 4096)
// against 0.61, 0.71-0.76 and 0.64-0.71; f16 0.81-0.84 against 0.60; f32 level (0.90-1.2 both).
// 4 streams measured 1.02-1.05x the rate of 5 here (widening costs issue slots that the dot
// kernel's 5 streams do not).
constexpr std::size_t kGemvStreams = 4;

template <class Arch, KvDtype D>
void gemv_kernel(const float* x, const void* w_data, std::size_t k, std::size_t n, float* y,
                 int threads) {
  using Batch = xsimd::batch<float, Arch>;
  using Elem = simd::elem_t<D>;
  constexpr std::size_t kLanes = Batch::size, S = kGemvStreams;
  const auto* w = static_cast<const Elem*>(w_data);
  const std::size_t k_vec = k - k % kLanes, k_tail = k - k_vec;
  const Batch x_tail =
      k_tail ? simd::load_elems_partial<KvDtype::f32, Arch>(x + k_vec, k_tail) : Batch(0.0f);
  // 16-bit weights on CPUs that want it: each stream's next row requested a line for each
  // line read (prefetch_policy.hpp). Not f32: there it sped up the 4096 × 4096 GEMV by 10% but
  // slowed the layer's f32 decode step by 5% (27.5-28.0 -> 29.1-30.1 ms, Intel Xeon, 2
  // threads, blocks of adjacent rows).
  const bool request_next = sizeof(Elem) == 2 && prefetch_weight_rows();
  constexpr std::size_t kLineElems = 64 / sizeof(Elem);
  for_each_stream_pass(n, S, threads, [&](const StreamPass& pass) {
    const Elem* w0 = w + pass.row * k;
    const Elem* next = request_next && !pass.last ? w0 + k : nullptr;
    const std::size_t apart = pass.apart * k;
    Batch acc[S];
    for (Batch& a : acc) a = Batch(0.0f);
    if (pass.rows == S) {
      for (std::size_t i = 0; i < k_vec; i += kLanes) {
        if (next != nullptr && i % kLineElems == 0) {
          for (std::size_t r = 0; r < S; ++r) __builtin_prefetch(next + r * apart + i, 0, 2);
        }
        const Batch xb = Batch::load_unaligned(x + i);
        for (std::size_t r = 0; r < S; ++r) {
          acc[r] = xsimd::fma(simd::load_elems<D, Arch>(w0 + r * apart + i), xb, acc[r]);
        }
      }
    } else {
      for (std::size_t r = 0; r < pass.rows; ++r) {
        for (std::size_t i = 0; i < k_vec; i += kLanes) {
          acc[r] = xsimd::fma(simd::load_elems<D, Arch>(w0 + r * apart + i),
                              Batch::load_unaligned(x + i), acc[r]);
        }
      }
    }
    for (std::size_t r = 0; r < pass.rows; ++r) {
      if (k_tail) {
        acc[r] = xsimd::fma(simd::load_elems_partial<D, Arch>(w0 + r * apart + k_vec, k_tail),
                            x_tail, acc[r]);
      }
      y[pass.row_of(r)] = xsimd::hadd(acc[r]);
    }
  });
}

}  // namespace kvscope
