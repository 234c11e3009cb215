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

#include "bench/bench_util.hpp"
#include "engine/dnnl_matmul.hpp"
#include "engine/layer_weights.hpp"
#include "engine/measure/machine_limits.hpp"
#include "engine/projector.hpp"
#include "engine/weight_matrix.hpp"
#include "kernels/isa.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/ref/layer_ops_ref.hpp"
#include "kernels/roofline.hpp"
#include "kernels/units/compute_unit.hpp"
#include "kernels/units/cpu_features.hpp"
#include "kernels/weights/gemm_bf16_amx.hpp"
#include "kernels/weights/gemv.hpp"
#include "kernels/weights/gemv_bf16_dot.hpp"
#include "kernels/weights/weight_dtype.hpp"

namespace {

using namespace kvscope;

const int kThreads = bench::bench_threads();  // 2, or $KVSCOPE_BENCH_THREADS

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

// The same prefill with bf16 weights on oneDNN's bf16 matmul (AMX-BF16 where Linux grants
// it, `brg:avx512_core_amx_bf16`), x rounded to bf16 inside the timed loop as the Projector
// did before our blocked AMX kernel (BM_PrefillProjector, bf16 fast) took these shapes: the
// side-by-side for that choice.
void BM_PrefillDnnlBf16(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1)),
             n = static_cast<std::size_t>(state.range(2));
  if (!DnnlMatmul::has_bf16()) return state.SkipWithError("oneDNN has no bf16 matmul here");
  std::vector<float> x(m * k), y(m * n), values(n * k);
  fill_uniform(x, 1, -1.0f, 1.0f);
  fill_uniform(values, 2, -0.02f, 0.02f);
  const WeightMatrix w(values, n, k, WeightDtype::bf16);
  const auto* bits = static_cast<const std::uint16_t*>(w.view().data);
  std::vector<std::uint16_t> x_bf16(m * k);
  DnnlMatmul dnnl;
  const auto run = [&] {
    for (std::size_t i = 0; i < x_bf16.size(); ++i) x_bf16[i] = f32_to_bf16_bits(x[i]);
    dnnl.multiply_bf16(x_bf16.data(), bits, m, k, n, y.data(), kThreads);
  };
  run();  // warm-up: primitive creation
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    run();
    benchmark::DoNotOptimize(y.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const ComputeUnit unit =
      cpu_has(ComputeUnit::amx_bf16) ? ComputeUnit::amx_bf16 : ComputeUnit::avx512_bf16;
  state.SetLabel("peak of " + std::string(to_string(unit)));
  const double rate = 2.0 * m * k * n * static_cast<double>(state.iterations()) / seconds;
  state.counters["GFLOP/s"] = rate * 1e-9;
  state.counters["of_unit_peak"] =
      rate / (1e9 * measure_unit_peak_gops(unit, best_isa(), kThreads));
}
BENCHMARK(BM_PrefillDnnlBf16)
    ->Args({2000, 4096, 4096})
    ->Args({2000, 4096, 11008})
    ->Args({2000, 11008, 4096})
    ->Args({256, 4096, 4096})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Decode: one token through a [n × k] weight stored as `range(2)` (0 f32, 1 bf16, 2 f16).
struct DecodeProblem {
  std::vector<float> x, y;
  WeightMatrix w;
  explicit DecodeProblem(const benchmark::State& state)
      : x(static_cast<std::size_t>(state.range(0))), y(static_cast<std::size_t>(state.range(1))) {
    fill_uniform(x, 1, -1.0f, 1.0f);
    std::vector<float> values(x.size() * y.size());
    fill_uniform(values, 2, -0.02f, 0.02f);
    w = WeightMatrix(values, y.size(), x.size(), static_cast<WeightDtype>(state.range(2)));
  }
  void set_counters(benchmark::State& state) const {
    state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.bytes()) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  }
};

void BM_DecodeDnnl(benchmark::State& state) {
  DecodeProblem p(state);
  if (p.w.dtype() != WeightDtype::f32) return state.SkipWithError("oneDNN decode: f32 only");
  DnnlMatmul dnnl;
  const auto* w = static_cast<const float*>(p.w.view().data);
  dnnl.multiply(p.x.data(), w, 1, p.x.size(), p.y.size(), p.y.data(), kThreads);
  state.SetLabel(dnnl.implementation(1, p.x.size(), p.y.size()));
  for (auto _ : state) {
    dnnl.multiply(p.x.data(), w, 1, p.x.size(), p.y.size(), p.y.data(), kThreads);
    benchmark::DoNotOptimize(p.y.data());
  }
  p.set_counters(state);
}

// Our GEMV, with its time over a plain read loop of the same bytes timed alternately in the
// same run (of_read_loop = read-loop time / GEMV time: 1 is the bandwidth limit).
template <class Multiply>
void time_against_read_loop(benchmark::State& state, DecodeProblem& p, Multiply multiply) {
  const Isa isa = best_isa();
  const auto* bytes = static_cast<const std::byte*>(p.w.view().data);
  multiply();
  double gemv_s = 0, read_s = 0;
  for (auto _ : state) {
    auto start = std::chrono::steady_clock::now();
    multiply();
    benchmark::DoNotOptimize(p.y.data());
    auto mid = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(read_sweep(bytes, p.w.bytes(), isa, kThreads));
    auto end = std::chrono::steady_clock::now();
    gemv_s += std::chrono::duration<double>(mid - start).count();
    read_s += std::chrono::duration<double>(end - mid).count();
  }
  p.set_counters(state);
  state.counters["of_read_loop"] = read_s / gemv_s;
}

void BM_DecodeGemv(benchmark::State& state) {
  DecodeProblem p(state);
  const Isa isa = best_isa();
  state.SetLabel(std::string(to_string(isa)) + " " + std::string(to_string(p.w.dtype())));
  time_against_read_loop(state, p,
                         [&] { gemv(p.x.data(), p.w.view(), p.y.data(), isa, kThreads); });
}

// The `--compute fast` decode GEMV on bf16 weights: vdpbf16ps on x rounded to bf16.
void BM_DecodeGemvBf16Dot(benchmark::State& state) {
  if (!cpu_features().avx512_bf16) return state.SkipWithError("this CPU lacks avx512_bf16");
  DecodeProblem p(state);
  state.SetLabel("avx512-bf16 bf16");
  time_against_read_loop(state, p,
                         [&] { gemv_bf16_dot(p.x.data(), p.w.view(), p.y.data(), kThreads); });
}

void BM_DecodeRef(benchmark::State& state) {
  DecodeProblem p(state);
  for (auto _ : state) {
    matmul_ref(p.x.data(), p.w.view(), 1, p.y.data(), kThreads);
    benchmark::DoNotOptimize(p.y.data());
  }
  p.set_counters(state);
}

// (k, n, dtype): q/o_proj, gate/up_proj and down_proj of a 7B layer, f32 and bf16 weights.
#define DECODE_SHAPES(DTYPE) \
  ->Args({4096, 4096, DTYPE})->Args({4096, 11008, DTYPE})->Args({11008, 4096, DTYPE})
BENCHMARK(BM_DecodeDnnl) DECODE_SHAPES(0)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_DecodeGemv)
DECODE_SHAPES(0)
DECODE_SHAPES(1)->Args({4096, 4096, 2})->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_DecodeGemvBf16Dot) DECODE_SHAPES(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_DecodeRef)->Args({4096, 4096, 0})->Unit(benchmark::kMicrosecond)->UseRealTime();

// Prefill through the layer's Projector: [m × k] · W[n × k]ᵀ with W stored as range(3)
// (0 f32, 1 bf16, 2 f16) and range(4) the compute mode (0 exact: W widened to f32 a block at
// a time; 1 fast: bf16 × bf16 on the CPU's bf16 units: our blocked AMX kernel where Linux
// grants AMX-BF16, else oneDNN). of_unit_peak divides by the peak of the unit used, measured
// in this process (fp32 FMA; for bf16 fast, AMX-BF16 where granted, else AVX512-BF16).
void BM_PrefillProjector(benchmark::State& state) {
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1)),
             n = static_cast<std::size_t>(state.range(2));
  const auto dtype = static_cast<WeightDtype>(state.range(3));
  const ComputeMode mode = state.range(4) ? ComputeMode::fast : ComputeMode::exact;
  std::vector<float> x(m * k), y(m * n), values(n * k);
  fill_uniform(x, 1, -1.0f, 1.0f);
  fill_uniform(values, 2, -0.02f, 0.02f);
  const WeightMatrix w(values, n, k, dtype);
  Projector project(best_isa(), kThreads, mode);
  project(x.data(), w.view(), m, y.data());  // warm-up: primitive creation
  const bool on_bf16 = mode == ComputeMode::fast && dtype == WeightDtype::bf16;
  const ComputeUnit unit = !on_bf16                         ? ComputeUnit::fp32_fma
                           : cpu_has(ComputeUnit::amx_bf16) ? ComputeUnit::amx_bf16
                           : cpu_features().avx512_bf16     ? ComputeUnit::avx512_bf16
                                                            : ComputeUnit::fp32_fma;
  state.SetLabel(std::string(to_string(dtype)) + " " + std::string(to_string(mode)) + ", peak of " +
                 std::string(to_string(unit)));
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    project(x.data(), w.view(), m, y.data());
    benchmark::DoNotOptimize(y.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const double rate = 2.0 * m * k * n * static_cast<double>(state.iterations()) / seconds;
  state.counters["GFLOP/s"] = rate * 1e-9;
  state.counters["of_unit_peak"] =
      rate / (1e9 * measure_unit_peak_gops(unit, best_isa(), kThreads));
}
BENCHMARK(BM_PrefillProjector)
    ->Args({2000, 4096, 4096, 0, 0})
    ->Args({2000, 4096, 4096, 1, 0})
    ->Args({2000, 4096, 4096, 1, 1})
    ->Args({2000, 4096, 11008, 1, 1})
    ->Args({2000, 11008, 4096, 1, 1})
    ->Args({2000, 4096, 4096, 2, 0})
    ->Args({256, 4096, 4096, 1, 0})
    ->Args({256, 4096, 4096, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// A small batch's projection on bf16 weights (decode of B sequences, --compute fast): our
// AVX512-BF16 kernel (0), each line of W read once for all rows, against oneDNN's bf16
// matmul (1) on the same bf16-rounded rows. weight_GB/s: W's bytes ÷ time.
void BM_SmallBatch(benchmark::State& state) {
  if (!cpu_features().avx512_bf16) return state.SkipWithError("this CPU lacks avx512_bf16");
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1)),
             n = static_cast<std::size_t>(state.range(2));
  // 0: avx512-bf16 (gemm_bf16_dot), 1: oneDNN, 2: amx-bf16 (gemm_bf16_amx, 2–16 rows).
  const long path = state.range(3);
  const bool ours = path == 0;
  if (path == 2 && !cpu_has(ComputeUnit::amx_bf16)) {
    return state.SkipWithError("this CPU lacks amx_bf16 (or Linux did not grant tile data)");
  }
  std::vector<float> x(m * k), y(m * n), values(n * k);
  fill_uniform(x, 1, -1.0f, 1.0f);
  fill_uniform(values, 2, -0.02f, 0.02f);
  const WeightMatrix w(values, n, k, WeightDtype::bf16);
  std::vector<std::uint16_t> x_bf16(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x_bf16[i] = f32_to_bf16_bits(x[i]);
  DnnlMatmul dnnl;
  if (path == 2 && !gemm_bf16_amx_fits(m, w.view())) {
    return state.SkipWithError("amx-bf16 takes 2 to 16 rows");
  }
  const auto run = [&] {
    if (path == 2) return gemm_bf16_amx(x.data(), m, w.view(), y.data(), kThreads);
    if (ours) return gemm_bf16_dot(x.data(), m, w.view(), y.data(), kThreads);
    dnnl.multiply_bf16(x_bf16.data(), static_cast<const std::uint16_t*>(w.view().data), m, k, n,
                       y.data(), kThreads);
  };
  run();  // warm-up: primitive creation
  state.SetLabel(path == 2 ? "amx-bf16 (ours)"
                 : ours    ? "avx512-bf16 (ours)"
                           : "oneDNN bf16 matmul");
  for (auto _ : state) {
    run();
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["weight_GB/s"] = benchmark::Counter(2.0 * static_cast<double>(k * n),
                                                     benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SmallBatch)
    ->ArgsProduct({{1, 8, 16, 32, 64}, {4096}, {11008}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The batch kernel's arithmetic with W in cache (the same matrix every call): 96 rows of 4096
// (768 KiB, half in each core's L2) and 768 (6 MiB, in L3), against the unit's peak. Cold
// (BM_SmallBatch) 8 rows cost about memory's time plus this one's (AMD Zen 5), yet not because
// of the arithmetic: with its dot products switched off the kernel read W no faster (38-41
// GB/s against 39-40, the GEMV 53-55; 2026-12-07). Its order of reads, 2 KiB of each of a
// block's 3 adjacent rows at a time so that 8 rows of x stay in L1, is what memory serves slowly.
void BM_SmallBatchWarm(benchmark::State& state) {
  if (!cpu_features().avx512_bf16) return state.SkipWithError("this CPU lacks avx512_bf16");
  const auto m = static_cast<std::size_t>(state.range(0)),
             k = static_cast<std::size_t>(state.range(1)),
             n = static_cast<std::size_t>(state.range(2));
  std::vector<float> x(m * k), y(m * n), values(n * k);
  fill_uniform(x, 1, -1.0f, 1.0f);
  fill_uniform(values, 2, -0.02f, 0.02f);
  const WeightMatrix w(values, n, k, WeightDtype::bf16);
  gemm_bf16_dot(x.data(), m, w.view(), y.data(), kThreads);  // warm-up: W into the caches
  double seconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    gemm_bf16_dot(x.data(), m, w.view(), y.data(), kThreads);
    benchmark::DoNotOptimize(y.data());
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  state.SetLabel("avx512-bf16 (ours), peak of avx512-bf16");
  const double rate = 2.0 * m * k * n * static_cast<double>(state.iterations()) / seconds;
  state.counters["GFLOP/s"] = rate * 1e-9;
  state.counters["of_unit_peak"] =
      rate / (1e9 * measure_unit_peak_gops(ComputeUnit::avx512_bf16, best_isa(), kThreads));
}
BENCHMARK(BM_SmallBatchWarm)
    ->Args({8, 4096, 96})
    ->Args({8, 4096, 768})
    ->Unit(benchmark::kMicrosecond);

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
