// Projection throughput: the prefill matmul through oneDNN against the FP32 FMA peak, and
// the decode GEMV (one token) through oneDNN, our xsimd GEMV and the scalar reference.
//
//   build/release/bench/projection_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
//
// Counters: GFLOP/s (2·m·k·n per call), GB/s (weight bytes per call; decode is bound by
// reading W once), of_fma_burn / of_avx512_probe (achieved FLOP/s over the FMA peak measured
// in the same process).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <chrono>
#include <vector>

#include "engine/dnnl_matmul.hpp"
#include "engine/layer_weights.hpp"
#include "kernels/gemv.hpp"
#include "kernels/isa.hpp"
#include "kernels/ref/layer_ops_ref.hpp"
#include "kernels/roofline.hpp"

namespace {

using namespace kvscope;

constexpr int kThreads = 2;

// FLOP/s of `burn(iterations)` (which returns the FLOPs it performed).
template <class Burn>
double flops_per_second(Burn burn, std::size_t iterations) {
  burn(iterations / 10);  // warm-up: clocks up, threads started
  const auto start = std::chrono::steady_clock::now();
  const double flops = burn(iterations);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return flops / elapsed.count();
}

// FP32 FMA peak in FLOP/s from kernels/roofline.hpp fma_burn on the best ISA, measured
// once per process. (Until the kernels branch lands its SIMD fma_burn, this is the scalar
// placeholder's rate; see BM_FmaPeakAvx512Probe.)
double fma_peak_flops() {
  static const double peak = flops_per_second(
      [](std::size_t n) { return fma_burn(n, best_isa(), kThreads); }, 400'000'000);
  return peak;
}

// A direct AVX-512 FMA probe: 12 independent zmm chains (latency 4 × 2 pipes covered),
// 2·16·12 FLOPs per iteration per thread. A cross-check of fma_burn, bench-only.
__attribute__((target("avx512f"))) double avx512_fma_chains(std::size_t iterations) {
  __m512 a[12];
  for (__m512& v : a) v = _mm512_set1_ps(1.0f);
  const __m512 m = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (std::size_t i = 0; i < iterations; ++i) {
    for (__m512& v : a) v = _mm512_fmadd_ps(v, m, b);
  }
  float lanes[16];
  __m512 sum = a[0];
  for (int j = 1; j < 12; ++j) sum = _mm512_add_ps(sum, a[j]);
  _mm512_storeu_ps(lanes, sum);
  benchmark::DoNotOptimize(lanes[0]);
  return 2.0 * 16 * 12 * static_cast<double>(iterations);
}

double avx512_probe_flops() {
  static const double peak = flops_per_second(
      [](std::size_t n) {
        double flops = 0;
#pragma omp parallel num_threads(kThreads) reduction(+ : flops)
        flops += avx512_fma_chains(n);
        return flops;
      },
      100'000'000);
  return peak;
}

struct Problem {
  std::size_t m, k, n;
  std::vector<float> x, w, y;
  Problem(std::size_t m_, std::size_t k_, std::size_t n_)
      : m(m_), k(k_), n(n_), x(m_ * k_), w(n_ * k_), y(m_ * n_) {
    fill_uniform(x, 1, -1.0f, 1.0f);
    fill_uniform(w, 2, -0.02f, 0.02f);
  }
  void set_counters(benchmark::State& state) const {
    const double flops = 2.0 * m * k * n, weight_bytes = 4.0 * n * k;
    state.counters["GFLOP/s"] =
        benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["GB/s"] =
        benchmark::Counter(weight_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
};

// Prefill: 2000 tokens × 4096 → 4096 (q_proj/o_proj of a 7B model), oneDNN.
void BM_PrefillDnnl(benchmark::State& state) {
  Problem p(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)),
            static_cast<std::size_t>(state.range(2)));
  DnnlMatmul dnnl;
  dnnl.multiply(p.x.data(), p.w.data(), p.m, p.k, p.n, p.y.data(), kThreads);  // warm-up
  state.SetLabel(dnnl.implementation(p.m, p.k, p.n));
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    dnnl.multiply(p.x.data(), p.w.data(), p.m, p.k, p.n, p.y.data(), kThreads);
    benchmark::DoNotOptimize(p.y.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  p.set_counters(state);
  const double rate = 2.0 * p.m * p.k * p.n * static_cast<double>(state.iterations()) / seconds;
  state.counters["of_fma_burn"] = rate / fma_peak_flops();
  if (cpu_supports(Isa::avx512)) state.counters["of_avx512_probe"] = rate / avx512_probe_flops();
}
BENCHMARK(BM_PrefillDnnl)->Args({2000, 4096, 4096})->Unit(benchmark::kMillisecond)->UseRealTime();

// Decode: one token through a [n × k] weight.
void BM_DecodeDnnl(benchmark::State& state) {
  Problem p(1, static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
  DnnlMatmul dnnl;
  dnnl.multiply(p.x.data(), p.w.data(), 1, p.k, p.n, p.y.data(), kThreads);
  state.SetLabel(dnnl.implementation(1, p.k, p.n));
  for (auto _ : state) {
    dnnl.multiply(p.x.data(), p.w.data(), 1, p.k, p.n, p.y.data(), kThreads);
    benchmark::DoNotOptimize(p.y.data());
  }
  p.set_counters(state);
}

void BM_DecodeGemv(benchmark::State& state) {
  Problem p(1, static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
  const Isa isa = best_isa();
  state.SetLabel(std::string(to_string(isa)));
  gemv(p.x.data(), p.w.data(), p.k, p.n, p.y.data(), isa, kThreads);
  for (auto _ : state) {
    gemv(p.x.data(), p.w.data(), p.k, p.n, p.y.data(), isa, kThreads);
    benchmark::DoNotOptimize(p.y.data());
  }
  p.set_counters(state);
}

void BM_DecodeRef(benchmark::State& state) {
  Problem p(1, static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)));
  for (auto _ : state) {
    matmul_ref(p.x.data(), p.w.data(), 1, p.k, p.n, p.y.data(), kThreads);
    benchmark::DoNotOptimize(p.y.data());
  }
  p.set_counters(state);
}

// (k, n): q/o_proj, gate/up_proj and down_proj of a 7B layer.
#define DECODE_SHAPES ->Args({4096, 4096})->Args({4096, 11008})->Args({11008, 4096})
BENCHMARK(BM_DecodeDnnl) DECODE_SHAPES->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_DecodeGemv) DECODE_SHAPES->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_DecodeRef)->Args({4096, 4096})->Unit(benchmark::kMicrosecond)->UseRealTime();

// The FMA peak the peak_fraction divides by (kernels/roofline.hpp fma_burn).
void BM_FmaPeak(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(fma_peak_flops());
  state.counters["GFLOP/s"] = fma_peak_flops() * 1e-9;
  state.SetLabel(std::string(to_string(best_isa())) + ", " + std::to_string(kThreads) + " threads");
}
BENCHMARK(BM_FmaPeak)->Iterations(1);

void BM_FmaPeakAvx512Probe(benchmark::State& state) {
  if (!cpu_supports(Isa::avx512)) return state.SkipWithError("no AVX-512");
  for (auto _ : state) benchmark::DoNotOptimize(avx512_probe_flops());
  state.counters["GFLOP/s"] = avx512_probe_flops() * 1e-9;
}
BENCHMARK(BM_FmaPeakAvx512Probe)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
