#include "engine/measure/machine_limits.hpp"

#include <chrono>
#include <vector>

#include "engine/measure/decode_timing.hpp"
#include "engine/memory.hpp"
#include "kernels/roofline.hpp"

namespace kvscope {
namespace {

template <class Work>
std::vector<double> time_repeats(int repeats, Work&& work) {
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    work();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return seconds;
}

}  // namespace

double measure_read_bandwidth_gbps(std::uint64_t bytes, Isa isa, int threads, int repeats) {
  AlignedBuffer buffer(bytes, "read-bandwidth buffer");
  // Distinct, non-zero pages: zero pages could all map to one shared physical page.
  for (std::size_t i = 0; i < buffer.bytes(); i += 64) buffer.data()[i] = std::byte{1};
  volatile float sink = read_sweep(buffer.data(), buffer.bytes(), isa, threads);  // warm-up
  const std::vector<double> seconds = time_repeats(
      repeats, [&] { sink = read_sweep(buffer.data(), buffer.bytes(), isa, threads); });
  (void)sink;
  return static_cast<double>(buffer.bytes()) / median(seconds) / 1e9;
}

double measure_fma_peak_gflops(Isa isa, int threads, int repeats) {
  const std::size_t iterations = 4'000'000;
  double flops = fma_burn(iterations / 10, isa, threads);  // warm-up, clocks up
  const std::vector<double> seconds =
      time_repeats(repeats, [&] { flops = fma_burn(iterations, isa, threads); });
  return flops / median(seconds) / 1e9;
}

double measure_unit_peak_gops(ComputeUnit unit, Isa isa, int threads, int repeats) {
  if (unit == ComputeUnit::fp32_fma) return measure_fma_peak_gflops(isa, threads, repeats);
  const std::size_t iterations = 1'000'000;
  double ops = dot_burn(unit, iterations / 10, threads);  // warm-up
  const std::vector<double> seconds =
      time_repeats(repeats, [&] { ops = dot_burn(unit, iterations, threads); });
  return ops / median(seconds) / 1e9;
}

}  // namespace kvscope
