// How fast this machine streams memory while its cores also compute, with no kernel of ours in
// the way: the read loop with arithmetic beside it (read_with_fmas in kernels/roofline.hpp) at
// 0 to 16 multiply-adds per f32 element read, over cold memory, against the plain read loop
// (read_sweep) over the same bytes in the same iterations. The speed of light of a decode row
// assumes that reading and computing overlap completely (max of the two times); this shows how
// much of that the machine itself gives. GQA-8 decode does 4 multiply-adds per f32 element of
// its cache (8 per 16-bit element, 2 bytes), MQA 32.
//
// Names: ReadWithFmas/<multiply-adds per element>/<isa>. Each iteration reads one cold copy of
// a 128 MiB buffer with the read loop and the next copy with read_with_fmas, timed apart; the
// benchmark's time is read_with_fmas's. Counters:
//   bytes/s          read_with_fmas's rate;
//   read_loop_GB/s   the read loop's, in the same iterations;
//   of_read_loop     the read loop's time ÷ read_with_fmas's, pair by pair (median);
//   of_overlap       the larger of the read loop's time and the multiply-adds' time at the
//                    FMA peak (measured once in this process) ÷ read_with_fmas's time, pair by
//                    pair (median): 1 where memory and arithmetic overlap completely, as low
//                    as ½ where they add up.
//
//   build/release/bench/overlap_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench/bench_util.hpp"
#include "engine/measure/cache_info.hpp"
#include "engine/measure/cold_caches.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/memory.hpp"
#include "kernels/roofline.hpp"

namespace kvscope::bench {
namespace {

constexpr std::size_t kBytes = std::size_t{128} << 20;

void read_with_fmas_bench(benchmark::State& state, int fmas, Isa isa, std::uint64_t llc_bytes) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  // Two reads an iteration, each of its own copy: the plan's copies, at least two.
  const CachePlan plan = plan_caches(kBytes, 1, CacheState::cold, ColdMethod::automatic, llc_bytes,
                                     physical_memory_bytes(), last_level_caches_reached(kThreads));
  const bool flush = plan.method == ColdMethod::flush;
  const std::size_t copies = std::max<std::size_t>(plan.caches, 2);
  static AlignedBuffer buffer;
  if (buffer.bytes() < kBytes * copies) {
    buffer = AlignedBuffer(0, "");
    require_plan_memory(plan, "the overlap probe");
    buffer = AlignedBuffer(kBytes * copies, "overlap probe buffer");
    for (std::size_t i = 0; i < buffer.bytes(); i += 4096) buffer.data()[i] = std::byte{0};
  }
  std::size_t cursor = 0;
  const auto next_copy = [&] {
    std::byte* copy = buffer.data() + cursor * kBytes;
    cursor = (cursor + 1) % copies;
    return copy;
  };
  const auto timed = [&](auto&& read) {
    std::byte* copy = next_copy();
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read(copy));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (flush) flush_from_caches(copy, kBytes, kThreads);
    return seconds;
  };
  const auto plain = [&](const std::byte* at) { return read_sweep(at, kBytes, isa, kThreads); };
  const auto probe = [&](const std::byte* at) {
    return read_with_fmas(at, kBytes, fmas, isa, kThreads);
  };
  const double compute_seconds =
      2.0 * fmas * static_cast<double>(kBytes / sizeof(float)) / fma_peak(isa, kThreads);
  timed(plain), timed(probe);  // warm-up
  std::vector<double> of_read_loop, of_overlap, read_loop_seconds;
  for (auto _ : state) {
    const double read_loop = timed(plain);
    const double seconds = timed(probe);
    state.SetIterationTime(seconds);
    read_loop_seconds.push_back(read_loop);
    of_read_loop.push_back(read_loop / seconds);
    of_overlap.push_back(std::max(read_loop, compute_seconds) / seconds);
  }
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(kBytes),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["read_loop_GB/s"] = kBytes / median(read_loop_seconds) / 1e9;
  state.counters["of_read_loop"] = median(of_read_loop);
  state.counters["of_overlap"] = median(of_overlap);
}

}  // namespace
}  // namespace kvscope::bench

int main(int argc, char** argv) {
  using namespace kvscope;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  LastLevelCache llc;
  try {
    llc = detect_llc();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap_bench: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "cache state cold; last-level cache %s\n", describe(llc).c_str());
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    for (int fmas : {0, 1, 2, 4, 8, 16}) {
      const std::string name = "ReadWithFmas/" + std::to_string(fmas) + "/" + bench::name_of(isa);
      benchmark::RegisterBenchmark(name.c_str(), bench::read_with_fmas_bench, fmas, isa, llc.bytes)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
