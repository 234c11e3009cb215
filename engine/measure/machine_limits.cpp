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

ReadLoop::ReadLoop(const CachePlan& plan, Isa isa, int threads)
    : plan_(plan),
      isa_(isa),
      threads_(threads),
      // Each copy starts on its own page, like a separately allocated cache.
      stride_((plan.cache_bytes + 4095) / 4096 * 4096),
      buffer_(stride_ * plan.caches, "read-bandwidth buffers") {}

double ReadLoop::step() {
  const auto start = std::chrono::steady_clock::now();
  volatile float sink = 0;
  for (std::size_t l = 0; l < plan_.layers; ++l) {
    sink = read_sweep(buffer_.data() + cursor_ * stride_, plan_.cache_bytes, isa_, threads_);
    cursor_ = (cursor_ + 1) % plan_.caches;
  }
  (void)sink;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (plan_.state == CacheState::cold && plan_.method == ColdMethod::flush) {
    flush_from_caches(buffer_.data(), buffer_.bytes(), threads_);
  }
  return seconds;
}

double measure_read_bandwidth_gbps(const CachePlan& plan, Isa isa, int threads, int repeats,
                                   double warmup_s) {
  require_plan_memory(plan, "the read-loop ceiling");
  ReadLoop loop(plan, isa, threads);
  warm_up(1, warmup_s, [&] { loop.step(); });
  std::vector<double> seconds;
  for (int i = 0; i < repeats; ++i) seconds.push_back(loop.step());
  return static_cast<double>(loop.step_bytes()) / median(seconds) / 1e9;
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
