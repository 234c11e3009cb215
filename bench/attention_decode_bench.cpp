// Decode attention (one new token) for 32 query heads × head_dim 128 over kv heads 32 / 8 / 1
// (MHA, GQA-8, MQA), contexts 2000 / 8192 / 32768, every cache type and ISA, on 2 threads.
// Beside each shape: the read loop over the same number of bytes (the bandwidth ceiling).
// Counters: bytes/s of cache read (GB/s), tokens/s (decode steps of this layer per second).
// int8 and bf16 caches also run on the CPU's dot units (".../avx512/fast": VNNI, AVX512-BF16,
// where attention_compute_unit picks one), and each unit's peak is a benchmark of its own
// ("UnitPeak/<unit>", operations/s at 2 per multiply-add).
//
//   build/release/bench/attention_decode_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/bench_util.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope::bench {
namespace {

constexpr std::size_t kHeads = 32, kHeadDim = 128;

void decode(benchmark::State& state, CacheKey key, Isa isa, ComputeMode mode) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  const KvCache& cache = shared_cache(key);
  std::vector<float> q(kHeads * kHeadDim, 0.5f), out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  const AttentionProblem p{.q = q.data(),
                           .n_queries = 1,
                           .first_pos = key.tokens - 1,
                           .n_heads = kHeads,
                           .kv = cache.view(),
                           .out = out.data()};
  attend(p, isa, kThreads, mode);  // warm-up
  for (auto _ : state) {
    attend(p, isa, kThreads, mode);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(decode_bytes(key)),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}

void read_loop(benchmark::State& state, std::size_t bytes, Isa isa) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  static AlignedBuffer buffer;
  if (buffer.bytes() < bytes) {
    buffer = AlignedBuffer(0, "");
    buffer = AlignedBuffer(bytes, "read loop buffer");
    for (std::size_t i = 0; i < bytes; i += 4096) buffer.data()[i] = std::byte{1};
  }
  read_sweep(buffer.data(), bytes, isa, kThreads);  // warm-up
  for (auto _ : state) benchmark::DoNotOptimize(read_sweep(buffer.data(), bytes, isa, kThreads));
  state.counters["bytes/s"] =
      benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void fma_peak_bench(benchmark::State& state, Isa isa) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  double flops = 0.0;
  for (auto _ : state) flops += fma_burn(2000000, isa, kThreads);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
}

void unit_peak_bench(benchmark::State& state, ComputeUnit unit) {
  if (!cpu_has(unit)) return state.SkipWithError("CPU lacks this compute unit");
  double ops = 0.0;
  for (auto _ : state) ops += dot_burn(unit, 500000, kThreads);
  state.counters["OP/s"] = benchmark::Counter(ops, benchmark::Counter::kIsRate);
}

int register_all() {
  for (ComputeUnit unit : {ComputeUnit::vnni_int8, ComputeUnit::avx512_bf16}) {
    benchmark::RegisterBenchmark(("UnitPeak/" + std::string(to_string(unit))).c_str(),
                                 unit_peak_bench, unit)
        ->UseRealTime();
  }
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
    benchmark::RegisterBenchmark(("FmaPeak/" + name_of(isa)).c_str(), fma_peak_bench, isa)
        ->UseRealTime();
  }
  for (std::size_t kv : {32, 8, 1}) {
    for (std::size_t tokens : {2000, 8192, 32768}) {
      for (KvDtype dtype : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8}) {
        const CacheKey key{kv, kHeadDim, tokens, dtype};
        const std::string shape = "/kv" + std::to_string(kv) + "/tokens" + std::to_string(tokens) +
                                  "/" + std::string(to_string(dtype));
        benchmark::RegisterBenchmark(("ReadLoop" + shape + "/avx512").c_str(), read_loop,
                                     decode_bytes(key), Isa::avx512)
            ->UseRealTime();
        for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512}) {
          if (isa == Isa::scalar && tokens > 2000) continue;  // seconds per step: 2000 shows it
          benchmark::RegisterBenchmark(("Decode" + shape + "/" + name_of(isa)).c_str(), decode, key,
                                       isa, ComputeMode::exact)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
        if (dtype == KvDtype::int8 || dtype == KvDtype::bf16) {
          benchmark::RegisterBenchmark(("Decode" + shape + "/avx512/fast").c_str(), decode, key,
                                       Isa::avx512, ComputeMode::fast)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
      }
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvscope::bench

BENCHMARK_MAIN();
