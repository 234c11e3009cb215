#pragma once
// The roofline probes written once over xsimd::batch<…, A>: a read loop with the ISA's
// widest loads (the bandwidth ceiling for decode) and independent FMA chains (the FP32
// compute ceiling for prefill). Include only from ISA-flagged units (kernels/arch/).
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <xsimd/xsimd.hpp>

namespace kvscope::simd {

// Each thread XORs its contiguous, 64-byte aligned share of [data, data + bytes) into 8
// independent accumulators, reading the share as 8 streams at once (8 loads in flight per
// iteration); the tail is read bytewise.
template <class A>
float read_sweep_arch(const std::byte* data, std::size_t bytes, int threads) {
  using U = xsimd::batch<std::uint32_t, A>;
  std::uint32_t total = 0;
#pragma omp parallel num_threads(threads) reduction(^ : total)
  {
    const auto n_threads = static_cast<std::size_t>(omp_get_num_threads());
    const auto me = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t share = (bytes / n_threads + 63) / 64 * 64;
    const std::size_t begin = me * share < bytes ? me * share : bytes;
    const std::size_t end = begin + share < bytes ? begin + share : bytes;
    U acc[8];
    for (U& a : acc) a = U(0u);
    // Eight streams at once, one per eighth of the share, as decode reads K and V of
    // several heads at once: one stream alone leaves memory-level parallelism unused.
    constexpr std::size_t kStreams = 8;
    const std::size_t lane_bytes = (end - begin) / kStreams / sizeof(U) * sizeof(U);
    for (std::size_t offset = 0; offset < lane_bytes; offset += sizeof(U)) {
#pragma GCC unroll 8
      for (std::size_t j = 0; j < kStreams; ++j) {
        acc[j] ^= U::load_unaligned(
            reinterpret_cast<const std::uint32_t*>(data + begin + j * lane_bytes + offset));
      }
    }
    std::size_t i = begin + kStreams * lane_bytes;
    for (std::size_t j = 1; j < 8; ++j) acc[0] ^= acc[j];
    alignas(64) std::uint32_t lanes[U::size];
    acc[0].store_aligned(lanes);
    std::uint32_t mine = 0;
    for (std::uint32_t lane : lanes) mine ^= lane;
    for (; i < end; ++i) mine ^= static_cast<std::uint32_t>(data[i]);
    total ^= mine;
  }
  return static_cast<float>(total);
}

// read_with_fmas() (roofline.hpp) for F multiply-adds per element, on architecture A. The
// multiplier is read at run time, so the compiler cannot turn the FMAs into additions.
template <class A, int F>
float read_with_fmas_for(const std::byte* data, std::size_t bytes, int threads) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t kLine = 64, kBlock = 16 * 1024;
  constexpr std::size_t kAccumulators = std::is_base_of_v<xsimd::avx512f, A> ? 16 : 8;
  constexpr std::size_t kPerLine = kLine / sizeof(B);  // vectors per line (sizeof(B) divides 64)
  volatile float one = 1.0f;
  const B multiplier(one);
  float total = 0.0f;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const auto n_threads = static_cast<std::size_t>(omp_get_num_threads());
    const auto me = static_cast<std::size_t>(omp_get_thread_num());
    const std::size_t share = (bytes / n_threads + kLine - 1) / kLine * kLine;
    const std::size_t begin = me * share < bytes ? me * share : bytes;
    const std::size_t end = begin + share < bytes ? begin + share : bytes;
    const std::size_t half = (end - begin) / 2 / kLine * kLine;
    B acc[kAccumulators];
    for (B& a : acc) a = B(0.0f);
    const auto line = [&](const std::byte* at) {
#pragma GCC unroll 4
      for (std::size_t v = 0; v < kPerLine; ++v) {
        const B x = B::load_unaligned(reinterpret_cast<const float*>(at + v * sizeof(B)));
        if constexpr (F == 0) {
          acc[v % kAccumulators] += x;
        } else {
#pragma GCC unroll 16
          for (std::size_t j = 0; j < static_cast<std::size_t>(F); ++j) {
            const std::size_t a = (v * F + j) % kAccumulators;
            acc[a] = xsimd::fma(x, multiplier, acc[a]);
          }
        }
      }
    };
    for (std::size_t at = 0; at < half; at += kBlock) {
      const std::size_t n = std::min(kBlock, half - at);
      const std::size_t ahead = at + kBlock < half ? std::min(kBlock, half - at - kBlock) : 0;
      for (std::size_t h = 0; h < 2; ++h) {  // a key block, then a value block
        const std::byte* block = data + begin + h * half + at;
        for (std::size_t i = 0; i < n; i += kLine) {
          if (i < ahead) __builtin_prefetch(block + kBlock + i, 0, 3);  // the half's next block
          line(block + i);
        }
      }
    }
    // The share's last bytes past the two halves' whole lines: whole floats, one at a time.
    float rest = 0.0f;
    for (std::size_t i = begin + 2 * half; i + sizeof(float) <= end; i += sizeof(float)) {
      float x;
      std::memcpy(&x, data + i, sizeof x);
      rest += F == 0 ? x : static_cast<float>(F) * x;
    }
    B sum(0.0f);
    for (const B& a : acc) sum += a;
    total += xsimd::hadd(sum) + rest;
  }
  return total;
}

template <class A>
float read_with_fmas_arch(const std::byte* data, std::size_t bytes, int fmas_per_float,
                          int threads) {
  switch (fmas_per_float) {
    case 0:
      return read_with_fmas_for<A, 0>(data, bytes, threads);
    case 1:
      return read_with_fmas_for<A, 1>(data, bytes, threads);
    case 2:
      return read_with_fmas_for<A, 2>(data, bytes, threads);
    case 4:
      return read_with_fmas_for<A, 4>(data, bytes, threads);
    case 8:
      return read_with_fmas_for<A, 8>(data, bytes, threads);
    default:
      return read_with_fmas_for<A, 16>(data, bytes, threads);
  }
}

// Independent FMA chains per thread, `iterations` rounds each: 16 with 32 vector registers
// (AVX-512), 12 with 16 (SSE2, AVX2: 16 chains plus the two constants would spill). Either
// covers FMA latency × throughput on current x86 cores (4 cycles × 2 pipes). Returns
// FLOPs = 2 · lanes · chains · iterations · threads, and the chains' final values summed
// in chain order (lane 0, thread 0) through `chains_sum` when it is not null.
template <class A>
double fma_burn_arch(std::size_t iterations, int threads, float* chains_sum) {
  using B = xsimd::batch<float, A>;
  constexpr std::size_t kChains = std::is_base_of_v<xsimd::avx512f, A> ? 16 : 12;
  double flops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  {
    B x[kChains];
    for (std::size_t c = 0; c < kChains; ++c) x[c] = B(1.0f + static_cast<float>(c) * 1e-3f);
    const B m(0.999999f), b(1e-7f);
    for (std::size_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
      for (std::size_t c = 0; c < kChains; ++c) x[c] = xsimd::fma(x[c], m, b);
    }
    B sum(0.0f);
    for (const B& v : x) sum += v;
    alignas(64) float lanes[B::size];
    sum.store_aligned(lanes);
    volatile float sink = lanes[0];
    if (chains_sum != nullptr && omp_get_thread_num() == 0) *chains_sum = sink;
    flops += 2.0 * B::size * kChains * static_cast<double>(iterations);
  }
  return flops;
}

}  // namespace kvscope::simd
