// What AMX-BF16 reaches when its operands come from memory, on one thread. The unit's peak
// (dot_burn: products on operands held in tile registers) is what the prefill and projection
// kernels are measured against; their inner loops also load a tile for every product or so
// (a 2 × 2 block: four 1 KiB operand loads per four products; attention's P·V also reloads its
// accumulators once a block). Each iteration times, one right after the other:
//   product_ns       a tile product, operands in registers (16 × 16 × 32 bf16 multiply-adds);
//   fed_product_ns   a product of 2 × 2 blocks whose operands are loaded from L1 each round;
//   load_ns          a 1 KiB tile load from L1, alone.
// fed_of_peak = product_ns / fed_product_ns: what a kernel fed this way can reach at this
// moment, as a fraction of the peak the benchmarks quote. On the shared Intel Xeon VM it read
// 0.26-0.89 from one run to the next: compare it with a kernel's of_peak of the same run.
//
//   build/release/bench/amx_tile_bench --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <chrono>

#include "kernels/units/compute_unit.hpp"

namespace kvscope::bench {
namespace {

constexpr std::size_t kRounds = 200000;

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void amx_bf16_tile_feed(benchmark::State& state) {
  if (!cpu_has(ComputeUnit::amx_bf16)) return state.SkipWithError("CPU lacks amx-bf16");
  amx_bf16_fed_burn(1000, true);  // warm-up: the tile state and the unit's clock
  double product = 0, fed = 0, load = 0;
  for (auto _ : state) {
    // dot_burn: 4 products a round.
    const double p = seconds([] { dot_burn(ComputeUnit::amx_bf16, kRounds, 1); });
    const double f = seconds([] { amx_bf16_fed_burn(kRounds, true); });
    const double l = seconds([] { amx_bf16_fed_burn(kRounds, false); });
    state.SetIterationTime(p + f + l);
    product += p, fed += f, load += l;
  }
  const double n = 4.0 * kRounds * static_cast<double>(state.iterations());
  state.counters["product_ns"] = product / n * 1e9;
  state.counters["fed_product_ns"] = fed / n * 1e9;
  state.counters["load_ns"] = load / n * 1e9;
  state.counters["fed_of_peak"] = product / fed;
}
BENCHMARK(amx_bf16_tile_feed)->Name("AmxBf16TileFeed")->UseManualTime()->Iterations(5);

}  // namespace
}  // namespace kvscope::bench

BENCHMARK_MAIN();
