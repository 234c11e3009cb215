// Decode attention (one new token) for 32 query heads × head_dim 128 over kv heads 32 / 8 / 1
// (MHA, GQA-8, MQA), contexts 2000 / 8192 / 32768, every cache type (f32, f16, bf16, int8,
// int4) and ISA, on 2 threads.
// Beside each shape: the read loop over the same number of bytes (the bandwidth ceiling).
// Counters: bytes/s of cache read (GB/s), tokens/s (decode steps of this layer per second).
// int8, int4 and bf16 caches also run in fast mode (".../avx512/fast": the unit attend()
// picks) and on each unit of their type called directly (".../avx512/vnni-int8", "amx-int8",
// "avx512-bf16", "amx-bf16"), and each unit's peak is a benchmark of its own
// ("UnitPeak/<unit>", operations/s at 2 per multiply-add).
//
// --cache-state=cold (the default) reads, every iteration, K/V bytes that are in no cache
// level, as a model's step does (its other layers evict them): the decode and the read loop
// cycle through copies until more than 4 × every last-level cache the threads reach lies
// between two reads of one (flushing lines where memory does not allow copies).
// --cache-state=warm re-reads one cache, which at short contexts stays in the last-level
// cache. Names end in /cold or /warm.
//
//   build/release/bench/attention_decode_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "bench/bench_util.hpp"
#include "engine/measure/cache_info.hpp"
#include "engine/measure/cold_caches.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_kernels.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope::bench {
namespace {

constexpr std::size_t kHeads = 32, kHeadDim = 128;

struct Options {
  CacheState cache_state = CacheState::cold;
  ComputeMode compute = ComputeMode::exact;
  ComputeUnit unit = ComputeUnit::fp32_fma;  // other than fp32-fma: that unit, called directly
  std::uint64_t llc_bytes = 0;
};

void decode(benchmark::State& state, CacheKey key, Isa isa, Options options) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  if (!cpu_has(options.unit)) return state.SkipWithError("CPU lacks this compute unit");
  const bool cold = options.cache_state == CacheState::cold;
  CacheRotation* rotation = cold ? &cold_rotation(key, options.llc_bytes) : nullptr;
  const KvCache* warm = cold ? nullptr : &shared_cache(key);
  std::vector<float> q(kHeads * kHeadDim, 0.5f), out(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  AttentionProblem p{.q = q.data(),
                     .n_queries = 1,
                     .first_pos = key.tokens - 1,
                     .n_heads = kHeads,
                     .kv = {},
                     .out = out.data()};
  const auto step = [&] {
    p.kv = cold ? rotation->next().view() : warm->view();
    if (options.unit == ComputeUnit::fp32_fma) return attend(p, isa, kThreads, options.compute);
    simd::attend_dot_unit(p, options.unit, kThreads);
  };
  step();  // warm-up
  if (cold) rotation->end_step(kThreads);
  for (auto _ : state) {
    step();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
    if (cold && rotation->plan().method == ColdMethod::flush) {
      state.PauseTiming();
      rotation->end_step(kThreads);
      state.ResumeTiming();
    }
  }
  state.counters["bytes/s"] = benchmark::Counter(static_cast<double>(decode_bytes(key)),
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens/s"] =
      benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
}

// Cold: the buffer holds as many copies as a cold decode of `bytes` cycles through, and
// each iteration sweeps the next (flushed after each sweep where copies would not fit).
void read_loop(benchmark::State& state, std::size_t bytes, Isa isa, Options options) {
  if (!cpu_supports(isa)) return state.SkipWithError("CPU lacks this ISA");
  const CachePlan plan =
      plan_caches(bytes, 1, options.cache_state, ColdMethod::automatic, options.llc_bytes,
                  physical_memory_bytes(), last_level_caches_reached(kThreads));
  const std::size_t stride = (bytes + 4095) / 4096 * 4096;
  static AlignedBuffer buffer;
  if (buffer.bytes() < stride * plan.caches) {
    buffer = AlignedBuffer(0, "");
    require_plan_memory(plan, "the read loop");
    buffer = AlignedBuffer(stride * plan.caches, "read loop buffer");
    for (std::size_t i = 0; i < buffer.bytes(); i += 4096) buffer.data()[i] = std::byte{1};
  }
  const bool flush = plan.state == CacheState::cold && plan.method == ColdMethod::flush;
  std::size_t cursor = 0;
  const auto sweep = [&] {
    const float sum = read_sweep(buffer.data() + cursor * stride, bytes, isa, kThreads);
    cursor = (cursor + 1) % plan.caches;
    return sum;
  };
  sweep();  // warm-up
  for (auto _ : state) {
    benchmark::DoNotOptimize(sweep());
    if (flush) {
      state.PauseTiming();
      flush_from_caches(buffer.data(), stride, kThreads);
      state.ResumeTiming();
    }
  }
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

void register_all(Options options) {
  std::string suffix =
      "/";  // built in two steps: "/" + string drew a GCC 12 -Wrestrict false alarm
  suffix += to_string(options.cache_state);
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
    benchmark::RegisterBenchmark(("FmaPeak/" + name_of(isa)).c_str(), fma_peak_bench, isa)
        ->UseRealTime();
  }
  for (ComputeUnit unit : {ComputeUnit::vnni_int8, ComputeUnit::avx512_bf16, ComputeUnit::amx_int8,
                           ComputeUnit::amx_bf16}) {
    benchmark::RegisterBenchmark(("UnitPeak/" + std::string(to_string(unit))).c_str(),
                                 unit_peak_bench, unit)
        ->UseRealTime();
  }
  for (std::size_t kv : {32, 8, 1}) {
    for (std::size_t tokens : {2000, 8192, 32768}) {
      for (KvDtype dtype :
           {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8, KvDtype::int4}) {
        const CacheKey key{kv, kHeadDim, tokens, dtype};
        const std::string shape = "/kv" + std::to_string(kv) + "/tokens" + std::to_string(tokens) +
                                  "/" + std::string(to_string(dtype));
        benchmark::RegisterBenchmark(("ReadLoop" + shape + "/avx512" + suffix).c_str(), read_loop,
                                     decode_bytes(key), Isa::avx512, options)
            ->UseRealTime();
        for (Isa isa : {Isa::scalar, Isa::sse2, Isa::avx2, Isa::avx512}) {
          if (isa == Isa::scalar && tokens > 2000) continue;  // seconds per step: 2000 shows it
          benchmark::RegisterBenchmark(("Decode" + shape + "/" + name_of(isa) + suffix).c_str(),
                                       decode, key, isa, options)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
        }
        if (!units_for(dtype).empty()) {
          Options fast = options;
          fast.compute = ComputeMode::fast;
          benchmark::RegisterBenchmark(("Decode" + shape + "/avx512/fast" + suffix).c_str(), decode,
                                       key, Isa::avx512, fast)
              ->UseRealTime()
              ->Unit(benchmark::kMicrosecond);
          for (ComputeUnit unit : units_for(dtype)) {
            Options on_unit = options;
            on_unit.unit = unit;
            benchmark::RegisterBenchmark(
                ("Decode" + shape + "/avx512/" + std::string(to_string(unit)) + suffix).c_str(),
                decode, key, Isa::avx512, on_unit)
                ->UseRealTime()
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvscope::bench

// Takes --cache-state=cold|warm (and --cache-state cold|warm) out of argv before Google
// Benchmark sees it.
int main(int argc, char** argv) {
  using namespace kvscope;
  bench::Options options;
  std::vector<char*> args;
  try {
    for (int i = 0; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (arg.rfind("--cache-state=", 0) == 0) {
        options.cache_state = parse_cache_state(arg.substr(std::strlen("--cache-state=")));
      } else if (arg == "--cache-state" && i + 1 < argc) {
        options.cache_state = parse_cache_state(argv[++i]);
      } else {
        args.push_back(argv[i]);
      }
    }
    const LastLevelCache llc = detect_llc();
    options.llc_bytes = llc.bytes;
    std::fprintf(stderr, "cache state %s; last-level cache %s\n",
                 std::string(to_string(options.cache_state)).c_str(), describe(llc).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attention_decode_bench: %s\n", e.what());
    return 2;
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  bench::register_all(options);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
