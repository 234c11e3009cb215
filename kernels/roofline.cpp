#include "kernels/roofline.hpp"

#include <omp.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/roofline_kernels.hpp"

namespace kvscope {

float read_sweep(const std::byte* data, std::size_t bytes, Isa isa, int threads) {
  if (threads < 1) threads = 1;
  require_cpu_supports(isa);
  switch (isa) {
    case Isa::avx512:
      return simd::read_sweep_arch<xsimd::avx512bw>(data, bytes, threads);
    case Isa::avx2:
      return simd::read_sweep_arch<xsimd::fma3<xsimd::avx2>>(data, bytes, threads);
    case Isa::sse2:
      return simd::read_sweep_arch<xsimd::sse2>(data, bytes, threads);
    case Isa::scalar:
      break;
  }
  // Scalar: 8-byte words.
  std::uint64_t total = 0;
  const std::size_t words = bytes / sizeof(std::uint64_t);
#pragma omp parallel for num_threads(threads) reduction(+ : total)
  for (std::size_t i = 0; i < words; ++i) {
    std::uint64_t w;
    std::memcpy(&w, data + i * sizeof w, sizeof w);
    total += w;
  }
  return static_cast<float>(total);
}

float read_with_fmas(const std::byte* data, std::size_t bytes, int fmas_per_float, Isa isa,
                     int threads) {
  if (fmas_per_float != 0 && fmas_per_float != 1 && fmas_per_float != 2 && fmas_per_float != 4 &&
      fmas_per_float != 8 && fmas_per_float != 16) {
    throw std::invalid_argument("read_with_fmas: fmas_per_float must be 0, 1, 2, 4, 8 or 16, got " +
                                std::to_string(fmas_per_float));
  }
  if (threads < 1) threads = 1;
  require_cpu_supports(isa);
  switch (isa) {
    case Isa::avx512:
      return simd::read_with_fmas_arch<xsimd::avx512bw>(data, bytes, fmas_per_float, threads);
    case Isa::avx2:
      return simd::read_with_fmas_arch<xsimd::fma3<xsimd::avx2>>(data, bytes, fmas_per_float,
                                                                 threads);
    case Isa::sse2:
      return simd::read_with_fmas_arch<xsimd::sse2>(data, bytes, fmas_per_float, threads);
    case Isa::scalar:
      break;
  }
  // Scalar: element by element, the multiply-adds not fused.
  const std::size_t floats = bytes / sizeof(float);
  volatile float one = 1.0f;
  const float m = one;
  float total = 0.0f;
#pragma omp parallel for num_threads(threads) reduction(+ : total)
  for (std::size_t i = 0; i < floats; ++i) {
    float x;
    std::memcpy(&x, data + i * sizeof x, sizeof x);
    float a = 0.0f;
    if (fmas_per_float == 0) a = x;
    for (int j = 0; j < fmas_per_float; ++j) a += x * m;
    total += a;
  }
  return total;
}

double fma_burn(std::size_t iterations, Isa isa, int threads, float* chains_sum) {
  if (threads < 1) threads = 1;
  require_cpu_supports(isa);
  switch (isa) {
    case Isa::avx512:
      return simd::fma_burn_arch<xsimd::avx512bw>(iterations, threads, chains_sum);
    case Isa::avx2:
      return simd::fma_burn_arch<xsimd::fma3<xsimd::avx2>>(iterations, threads, chains_sum);
    case Isa::sse2:
      return simd::fma_burn_arch<xsimd::sse2>(iterations, threads, chains_sum);
    case Isa::scalar:
      break;
  }
  // Scalar: 8 independent multiply-add chains (not fused: no FMA without ISA flags).
  double flops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  {
    float a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const float m = 0.999999f, b = 1e-7f;
    for (std::size_t i = 0; i < iterations; ++i) {
      for (float& x : a) x = x * m + b;
    }
    float sum = 0.0f;
    for (float x : a) sum += x;
    volatile float sink = sum;
    if (chains_sum != nullptr && omp_get_thread_num() == 0) *chains_sum = sink;
    flops += 2.0 * 8.0 * static_cast<double>(iterations);
  }
  return flops;
}

}  // namespace kvscope
