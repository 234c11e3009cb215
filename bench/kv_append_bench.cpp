// Appending a prefill's K and V to the cache: 2,000 tokens × 32 kv heads × d_head 128, f32 in,
// encoded to each element type. BM_AppendRef encodes row by row through the scalar reference
// (what KvCache::append did before kernels/kv_encode.hpp); BM_Append is KvCache::append (the
// SIMD encoder, tokens split over the threads). Counter: GB/s of f32 rows read.
//
//   build/release/bench/kv_append_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/bench_util.hpp"
#include "engine/kv_cache.hpp"
#include "engine/layer_weights.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope::bench {
namespace {

constexpr std::size_t kKvHeads = 32, kHeadDim = 128, kTokens = 2000;

const KvDtype kTypes[] = {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8, KvDtype::int4};

const std::vector<float>& rows(std::uint64_t seed) {
  static std::vector<float> k, v;
  std::vector<float>& x = seed == 1 ? k : v;
  if (x.empty()) {
    x.resize(kTokens * kKvHeads * kHeadDim);
    fill_uniform(x, seed, -2.0f, 2.0f);
  }
  return x;
}

void set_counters(benchmark::State& state) {
  const double bytes = 2.0 * kTokens * kKvHeads * kHeadDim * sizeof(float);
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate,
                                              benchmark::Counter::kIs1000);
}

void BM_Append(benchmark::State& state) {
  const KvDtype dtype = kTypes[state.range(0)];
  const int threads = static_cast<int>(state.range(1));
  const std::vector<float>&k = rows(1), &v = rows(2);
  KvCache cache(kKvHeads, kHeadDim, kTokens, dtype);
  for (auto _ : state) {
    cache.clear();
    cache.append(k.data(), v.data(), kTokens, threads);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(to_string(dtype)));
  set_counters(state);
}
BENCHMARK(BM_Append)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {1, kThreads}})
    ->ArgNames({"dtype", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_AppendRef(benchmark::State& state) {
  const KvDtype dtype = kTypes[state.range(0)];
  const std::vector<float>&k = rows(1), &v = rows(2);
  KvCache cache(kKvHeads, kHeadDim, kTokens, dtype);
  const KvView view = cache.view();
  std::vector<float> scales(2 * kKvHeads);
  for (auto _ : state) {
    for (std::size_t t = 0; t < kTokens; ++t) {
      for (std::size_t h = 0; h < kKvHeads; ++h) {
        const std::size_t src = (t * kKvHeads + h) * kHeadDim;
        scales[2 * h] = encode_row_ref(dtype, k.data() + src, kHeadDim,
                                       const_cast<std::byte*>(view.k_row(h, t)));
        scales[2 * h + 1] = encode_row_ref(dtype, v.data() + src, kHeadDim,
                                           const_cast<std::byte*>(view.v_row(h, t)));
      }
    }
    benchmark::DoNotOptimize(scales.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(to_string(dtype)));
  set_counters(state);
}
BENCHMARK(BM_AppendRef)
    ->DenseRange(0, 4)
    ->ArgName("dtype")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvscope::bench

BENCHMARK_MAIN();
