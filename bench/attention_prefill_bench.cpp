// Prefill attention of 2000 tokens from an empty cache (causal), 32 query heads × head_dim
// 128 over kv heads 32 / 8 / 1, every cache type (f32, f16, bf16, int8, int4) and ISA, on 2
// threads, and on every compute unit the CPU has (".../avx512/vnni-int8", "avx512-bf16",
// "amx-int8", "amx-bf16", each called directly, whichever attend() would pick). Counters: FLOP/s (4
// · head_dim FLOPs per (query, head, visible key): q·k and p·v, one multiply-add each counted as 2)
// and the fraction of the peak of the unit used (the ISA's FP32 FMA peak, or the dot unit's),
// measured in this process.
//
//   build/release/bench/attention_prefill_bench --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/bench_util.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_kernels.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope::bench {
namespace {

constexpr std::size_t kHeads = 32, kHeadDim = 128, kTokens = 2000;

// Peak of a dot unit in operations/s (2 per multiply-add), best of 5, once per unit.
double unit_peak(ComputeUnit unit, int threads) {
  static double peak[5] = {};
  double& p = peak[static_cast<int>(unit)];
  if (p == 0.0) {
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const double ops = dot_burn(unit, 2000000, threads);
      const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - t0;
      p = std::max(p, ops / seconds.count());
    }
  }
  return p;
}

void prefill(benchmark::State& state, std::size_t n_kv, KvDtype dtype, Isa isa, ComputeUnit unit) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  if (!cpu_has(unit)) return state.SkipWithError("CPU lacks this compute unit");
  const KvCache& cache = shared_cache({n_kv, kHeadDim, kTokens, dtype});
  std::vector<float> q(kTokens * kHeads * kHeadDim), out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 13) * 0.05f - 0.3f;
  const AttentionProblem p{.q = q.data(),
                           .n_queries = kTokens,
                           .first_pos = 0,
                           .n_heads = kHeads,
                           .kv = cache.view(),
                           .out = out.data()};
  const double peak =
      unit == ComputeUnit::fp32_fma ? fma_peak(isa, kThreads) : unit_peak(unit, kThreads);
  const auto run = [&] {
    if (unit == ComputeUnit::fp32_fma) return attend(p, isa, kThreads, ComputeMode::exact);
    simd::attend_dot_unit(p, unit, kThreads);
  };
  run();  // warm-up
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Query i sees i + 1 keys: Σ (i + 1) = n (n + 1) / 2 per head.
  const double flops = 4.0 * kHeadDim * kHeads * (kTokens * (kTokens + 1) / 2.0);
  state.counters["FLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_FLOP/s"] = peak;
  // Fraction of peak: FLOP/s ÷ peak, i.e. flops / (time · peak) per iteration.
  state.counters["of_peak"] =
      benchmark::Counter(flops / peak, benchmark::Counter::kIsIterationInvariantRate);
}

int register_all() {
  for (std::size_t kv : {32, 8, 1}) {
    for (KvDtype dtype :
         {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8, KvDtype::int4}) {
      for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
        const std::string name = "Prefill/kv" + std::to_string(kv) + "/tokens" +
                                 std::to_string(kTokens) + "/" + std::string(to_string(dtype)) +
                                 "/" + name_of(isa);
        benchmark::RegisterBenchmark(name.c_str(), prefill, kv, dtype, isa, ComputeUnit::fp32_fma)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
      for (ComputeUnit unit : units_for(dtype)) {
        const std::string name = "Prefill/kv" + std::to_string(kv) + "/tokens" +
                                 std::to_string(kTokens) + "/" + std::string(to_string(dtype)) +
                                 "/avx512/" + std::string(to_string(unit));
        benchmark::RegisterBenchmark(name.c_str(), prefill, kv, dtype, Isa::avx512, unit)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvscope::bench

BENCHMARK_MAIN();
