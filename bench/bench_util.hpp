#pragma once
// Shared pieces of the attention benchmarks: one filled KV cache at a time (rebuilt only when
// the shape changes, so ISAs of one shape share it), and the machine's ceilings measured in
// the same process (read loop, FMA peak).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/kv_cache.hpp"
#include "engine/measure/cold_caches.hpp"
#include "engine/memory.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/roofline.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope::bench {

// Threads of every benchmark: this machine's 2 cores, or $KVSCOPE_BENCH_THREADS (1 to 64).
// One thread gave the steadiest A/B timings on the shared Intel Xeon VM, where two threads
// moved 1.5–2.5× between runs; more serve a bigger machine's thread scaling.
inline int bench_threads() {
  const char* text = std::getenv("KVSCOPE_BENCH_THREADS");
  if (text == nullptr) return 2;
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || n < 1 || n > 64) {
    std::fprintf(stderr, "KVSCOPE_BENCH_THREADS must be a whole number from 1 to 64, got '%s'\n",
                 text);
    std::exit(2);
  }
  return static_cast<int>(n);
}
inline const int kThreads = bench_threads();

struct CacheKey {
  std::size_t n_kv_heads, head_dim, tokens;
  KvDtype dtype;
  bool operator==(const CacheKey&) const = default;
};

// Cache holding `tokens` random tokens (uniform in (−1, 1), xorshift) of the given shape.
inline KvCache filled_cache(const CacheKey& key) {
  KvCache cache(key.n_kv_heads, key.head_dim, key.tokens, key.dtype);
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  const auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return static_cast<float>(static_cast<double>(state >> 11) * 0x1p-52 - 1.0);
  };
  constexpr std::size_t kBatch = 256;
  std::vector<float> k(kBatch * key.n_kv_heads * key.head_dim), v(k.size());
  for (std::size_t t = 0; t < key.tokens; t += kBatch) {
    const std::size_t n = key.tokens - t < kBatch ? key.tokens - t : kBatch;
    for (std::size_t i = 0; i < n * key.n_kv_heads * key.head_dim; ++i) {
      k[i] = next(), v[i] = next();
    }
    cache.append(k.data(), v.data(), n);
  }
  return cache;
}

// filled_cache(key), for warm measurements. Every shape stays alive (a few GiB for the whole
// decode set), so that repetitions can be interleaved (--benchmark_enable_random_interleaving)
// without rebuilding caches.
inline const KvCache& shared_cache(const CacheKey& key) {
  static std::vector<std::pair<CacheKey, std::unique_ptr<KvCache>>> caches;
  for (const auto& [k, c] : caches) {
    if (k == key) return *c;
  }
  caches.emplace_back(key, std::make_unique<KvCache>(filled_cache(key)));
  return *caches.back().second;
}

// The caches of a cold measurement of one shape: copies of filled_cache(key) cycled so that
// more than 4 × every last-level cache the threads reach is read between two reads of one
// (or flushed where memory does not allow copies). Only the latest shape is kept: the copies
// take over 4 × the last-level caches the threads reach each.
inline CacheRotation& cold_rotation(const CacheKey& key, std::uint64_t llc_bytes) {
  static std::unique_ptr<CacheRotation> rotation;
  static CacheKey current{};
  if (!rotation || !(current == key)) {
    rotation.reset();
    KvCache first = filled_cache(key);
    const CachePlan plan =
        plan_caches(first.bytes(), 1, CacheState::cold, ColdMethod::automatic, llc_bytes,
                    physical_memory_bytes(), last_level_caches_reached(kThreads));
    rotation = std::make_unique<CacheRotation>(plan, std::move(first));
    current = key;
  }
  return *rotation;
}

// Bytes one decode step reads: every K and V row of every kv head (int4: nibbles and group
// scales), plus int8 row scales.
inline std::size_t decode_bytes(const CacheKey& key) {
  const std::size_t rows = 2 * key.n_kv_heads * key.tokens;
  return rows *
         (kv_row_bytes(key.dtype, key.head_dim) + (kv_has_scales(key.dtype) ? sizeof(float) : 0));
}

// FP32 FMA peak (FLOP/s) of `isa` with `threads` threads, measured once per process.
inline double fma_peak(Isa isa, int threads) {
  static double peak[4][9] = {};
  double& p = peak[static_cast<int>(isa)][threads];
  if (p == 0.0) {
    fma_burn(1000000, isa, threads);  // warm-up: clocks, thread pool
    double best = 0.0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      const double flops = fma_burn(20000000, isa, threads);
      const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - t0;
      const double rate = flops / seconds.count();
      best = rate > best ? rate : best;
    }
    p = best;
  }
  return p;
}

inline std::string name_of(Isa isa) { return std::string(to_string(isa)); }

// The dot and matrix units that serve a cache of `dtype` (registered on every CPU; a case
// whose unit this CPU lacks is skipped with that reason).
inline std::vector<ComputeUnit> units_for(KvDtype dtype) {
  if (dtype == KvDtype::int4) return {ComputeUnit::vnni_int8};
  if (dtype == KvDtype::int8) return {ComputeUnit::vnni_int8, ComputeUnit::amx_int8};
  if (dtype == KvDtype::bf16) return {ComputeUnit::avx512_bf16, ComputeUnit::amx_bf16};
  if (dtype == KvDtype::f16) return {ComputeUnit::amx_bf16};  // as hi and lo bf16 parts
  return {};
}

}  // namespace kvscope::bench
