#include "kernels/roofline.hpp"

#include <cstdint>
#include <cstring>

namespace kvscope {

// Scalar placeholders with the final contract; the SIMD versions replace them per ISA.
float read_sweep(const std::byte* data, std::size_t bytes, Isa isa, int threads) {
  (void)isa;
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

double fma_burn(std::size_t iterations, Isa isa, int threads) {
  (void)isa;
  double flops = 0.0;
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  {
    float a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    const float m = 0.999999f, b = 1e-7f;
    for (std::size_t i = 0; i < iterations; ++i) {
      for (float& x : a) x = x * m + b;
    }
    volatile float sink = a[0] + a[7];
    (void)sink;
    flops += 2.0 * 8.0 * static_cast<double>(iterations);
  }
  return flops;
}

}  // namespace kvscope
