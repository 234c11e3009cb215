#pragma once
// Times decode-step attention over a filled KV cache: the measurement behind `kvscope decode`.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/kv_layout.hpp"
#include "engine/measure/cold_caches.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

struct DecodeTimingRequest {
  std::int64_t n_heads = 32;
  std::int64_t n_kv_heads = 32;
  std::int64_t head_dim = 128;
  std::int64_t tokens = 2000;       // cache length; the query sits at the last position
  KvTypes kv_dtype = KvDtype::f32;  // keys and values
  Isa isa = Isa::scalar;
  ComputeMode compute = ComputeMode::exact;
  int threads = 1;
  int warmup_steps = 2;              // run first, not timed
  double warmup_s = kWarmupSeconds;  // and untimed steps continue until this many seconds
  int steps = 20;                    // timed steps (at least this many)
  double duration_s = 0.0;           // if > 0, keep stepping until this many seconds have passed
  std::uint64_t seed = 1;
  std::int64_t layers = 1;  // a model's step reads this many layers' caches, in order
  CacheState cache_state = CacheState::cold;
  ColdMethod cold_method = ColdMethod::automatic;
  std::uint64_t llc_bytes = 0;  // 0: detect_llc()
  KvLayout kv_layout;           // paged: the caches (and their cold copies) share one pool
  // Also step the read loop (ReadLoop, machine_limits.hpp) over as many bytes as a step
  // reads, on buffers of its own kept as cold as the caches, a sweep in turn with every step
  // (warm-up included): DecodeTiming::read_seconds.
  bool read_loop_beside = false;
};

struct DecodeTiming {
  std::vector<double> step_seconds;  // every timed step (all layers), in order
  double median_s = 0, min_s = 0, max_s = 0;
  std::uint64_t bytes_read_per_step = 0;     // K, V (and int8 scales) of every token, all layers
  std::uint64_t bytes_read_per_layer = 0;    // one layer's share
  double layer_median_s = 0;                 // median_s / layers
  double tokens_per_s = 0;                   // 1 / median: decode steps of the model's attention
  double gbps = 0;                           // bytes_read_per_step / median / 1e9
  CachePlan plan;                            // the caches allocated and how they were kept cold
  std::string llc_source;                    // where plan.llc_bytes came from
  ComputeUnit unit = ComputeUnit::fp32_fma;  // the unit the kernel ran on
  int warmup_steps = 0;                      // untimed steps run before the timed ones
  // With read_loop_beside: the read loop's step taken in turn with each timed step, in
  // order (read_seconds[i] beside step_seconds[i]); empty otherwise.
  std::vector<double> read_seconds;
};

// Fills a cache of `tokens` random K/V rows (seeded) and clones it into the caches of
// plan_caches() (the `layers` of a model, and for a cold measurement enough copies to pass
// 4 × every last-level cache the threads reach between two reads of one), then, after
// kWarmupSeconds of untimed steps, times steps: one step runs one-query attention (all heads;
// scores over the whole cache, softmax, AV) over `layers` caches in order. Throws
// std::invalid_argument for sizes below 1, heads that do not divide, or steps < 1;
// std::length_error, before allocating, when the caches cannot fit in memory.
DecodeTiming time_attention_decode(const DecodeTimingRequest& request);

// The ratios of paired steps, b's time ÷ a's: their median and the middle half (quartiles by
// nearest rank).
struct RatioSummary {
  double median = 0, low = 0, high = 0;
  std::size_t pairs = 0;
};
// Throws std::invalid_argument for no ratios.
RatioSummary summarize_ratios(std::vector<double> ratios);
// b[i] ÷ a[i] for steps taken in pairs, summarized. Throws std::invalid_argument where the
// counts differ or there are none.
RatioSummary summarize_pairs(const std::vector<double>& a, const std::vector<double>& b);

// Two decode measurements stepped in turn (a, b, a, b, …), each over its own caches: the two
// steps of a pair see the same machine, so their ratio holds where separately timed runs
// drift apart (memory switching between speeds, other tenants of the host).
struct PairedDecodeTiming {
  DecodeTiming a, b;
  std::vector<double> ratios;  // b's step ÷ a's, pair by pair
  RatioSummary ratio;
};

// Times a and b as time_attention_decode does, their steps alternated; both follow a's
// warm-up, steps, duration and read_loop_beside (b's are ignored; with it, one read-loop
// step over a's bytes follows each pair, and both timings' read_seconds hold it). Throws as
// time_attention_decode does for either request, and std::length_error when both sets of caches
// cannot fit in memory.
PairedDecodeTiming time_attention_decode_pair(const DecodeTimingRequest& a, DecodeTimingRequest b);

// Appends `tokens` rows of seeded random K and V (uniform in ±1, [n × kv_width] each) through
// append(k, v, n), 256 tokens at a time so the f32 staging stays small at any context length.
void append_random_context(
    std::size_t tokens, std::size_t kv_width, std::uint64_t seed,
    const std::function<void(const float* k, const float* v, std::size_t n)>& append);

// Median of a non-empty sample (mean of the middle two for even sizes).
double median(std::vector<double> values);

}  // namespace kvscope
