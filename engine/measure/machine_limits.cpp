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

// Under the sanitizers (the CI's sanitize build) a probe's figure means nothing and its
// instrumented loop runs ~50× slower: the probes then run 1/50 of their iterations, which
// keeps each report in the sanitize suite from spending ~20 s in the FMA probe alone.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t kProbeDivisor = 50;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr std::size_t kProbeDivisor = 50;
#else
constexpr std::size_t kProbeDivisor = 1;
#endif
#else
constexpr std::size_t kProbeDivisor = 1;
#endif

}  // namespace

double measure_read_bandwidth_gbps(std::uint64_t bytes, Isa isa, int threads, int repeats) {
  // AlignedBuffer's pages are written when allocated, so each is its own physical page
  // (none reads the shared zero page) and mapped into the process before the timing.
  AlignedBuffer buffer(bytes, "read-bandwidth buffer");
  volatile float sink = read_sweep(buffer.data(), buffer.bytes(), isa, threads);  // warm-up
  const std::vector<double> seconds = time_repeats(
      repeats, [&] { sink = read_sweep(buffer.data(), buffer.bytes(), isa, threads); });
  (void)sink;
  return static_cast<double>(buffer.bytes()) / median(seconds) / 1e9;
}

double measure_read_bandwidth_gbps(const CachePlan& plan, Isa isa, int threads, int repeats,
                                   double warmup_s) {
  require_plan_memory(plan, "the read-loop ceiling");
  // Each copy starts on its own page, like a separately allocated cache.
  const std::size_t stride = (plan.cache_bytes + 4095) / 4096 * 4096;
  AlignedBuffer buffer(stride * plan.caches, "read-bandwidth buffers");
  std::size_t cursor = 0;
  volatile float sink = 0;
  const bool flush = plan.state == CacheState::cold && plan.method == ColdMethod::flush;
  const auto sweep_step = [&] {
    for (std::size_t l = 0; l < plan.layers; ++l) {
      sink = read_sweep(buffer.data() + cursor * stride, plan.cache_bytes, isa, threads);
      cursor = (cursor + 1) % plan.caches;
    }
  };
  const auto flush_step = [&] {
    if (flush) flush_from_caches(buffer.data(), buffer.bytes(), threads);
  };
  warm_up(1, warmup_s, [&] {
    sweep_step();
    flush_step();
  });
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    sweep_step();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    flush_step();
  }
  (void)sink;
  return static_cast<double>(plan.cache_bytes) * static_cast<double>(plan.layers) /
         median(seconds) / 1e9;
}

double measure_fma_peak_gflops(Isa isa, int threads, int repeats) {
  const std::size_t iterations = 4'000'000 / kProbeDivisor;
  double flops = fma_burn(iterations / 10, isa, threads);  // warm-up, clocks up
  const std::vector<double> seconds =
      time_repeats(repeats, [&] { flops = fma_burn(iterations, isa, threads); });
  return flops / median(seconds) / 1e9;
}

double measure_unit_peak_gops(ComputeUnit unit, Isa isa, int threads, int repeats) {
  if (unit == ComputeUnit::fp32_fma) return measure_fma_peak_gflops(isa, threads, repeats);
  const std::size_t iterations = 1'000'000 / kProbeDivisor;
  double ops = dot_burn(unit, iterations / 10, threads);  // warm-up
  const std::vector<double> seconds =
      time_repeats(repeats, [&] { ops = dot_burn(unit, iterations, threads); });
  return ops / median(seconds) / 1e9;
}

}  // namespace kvscope
