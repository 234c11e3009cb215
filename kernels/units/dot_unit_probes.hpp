#pragma once
// Peak probes of the dot-product units: independent accumulator chains, as fma_burn_arch does
// for f32 FMAs. Include only from kernels/arch/avx512_dot.cpp.
#include <immintrin.h>

#include <cstddef>

#include "kernels/units/dot_unit_kernels.hpp"

namespace kvscope::simd {

inline constexpr int kDotChains = 16;  // enough to hide a 4–5 cycle latency on 2–4 ports

template <class A>
double vnni_burn_arch(std::size_t iterations, int threads) {
  double ops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : ops)
  {
    __m512i acc[kDotChains];
    for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_set1_epi32(c);
    // Each lane's four products are 1, −1, 1, −1: the sums stay put, nothing overflows.
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi32(static_cast<int>(0xff01ff01u));
    for (std::size_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
      for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_dpbusd_epi32(acc[c], a, b);
    }
    __m512i sum = acc[0];
    for (int c = 1; c < kDotChains; ++c) sum = _mm512_xor_si512(sum, acc[c]);
    volatile int sink = _mm512_reduce_or_epi32(sum);
    (void)sink;
    ops += 2.0 * 64 * kDotChains * static_cast<double>(iterations);
  }
  return ops;
}

template <class A>
double bf16_dot_burn_arch(std::size_t iterations, int threads) {
  double ops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : ops)
  {
    __m512 acc[kDotChains];
    for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
    // Tiny products keep the accumulators finite over any number of iterations.
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(-1e-3f), _mm512_set1_ps(1e-3f));
    for (std::size_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
      for (int c = 0; c < kDotChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
    }
    __m512 sum = acc[0];
    for (int c = 1; c < kDotChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
    volatile float sink = _mm512_reduce_add_ps(sum);
    (void)sink;
    ops += 2.0 * 32 * kDotChains * static_cast<double>(iterations);
  }
  return ops;
}

}  // namespace kvscope::simd
