#pragma once
// The roofline probes written once over xsimd::batch<…, A>: a read loop with the ISA's
// widest loads (the bandwidth ceiling for decode) and independent FMA chains (the FP32
// compute ceiling for prefill). Include only from ISA-flagged units (kernels/arch/).
#include <omp.h>

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
