#pragma once
// Times full decoder-layer decode steps (projections + attention + MLP) at a given context.
#include <cstdint>
#include <vector>

#include "engine/kv_layout.hpp"
#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

struct LayerTiming {
  double median_s = 0;
  double tokens_per_s = 0;
  std::uint64_t weight_bytes = 0;    // in their dtype: every step reads them all once
  std::uint64_t bytes_per_step = 0;  // weights + the KV cache re-read
  // Of the timed steps' wall time: in the projections (reading the weights), in attention
  // (reading the cache), and the rest (norms, RoPE, SwiGLU, residuals, allocation).
  double projection_share = 0, attention_share = 0, other_share = 0;
  std::vector<double> step_seconds;  // every timed step, in order
};

// Builds a layer over `weights` (shared, not copied: LayerWeights::random(config, …) once
// serves every cache type of a shape), fills its cache with `context` random rows, then
// times `steps` decode steps (after one warm-up) of the token at position `context`.
// config.capacity() must exceed `context` + steps. With batch B > 1, B sequences, each with
// its own cache of `context` rows, advance together: a step is one decode_batch of B tokens
// (tokens_per_s counts all B) and bytes_per_step counts the weights once and B caches.
// Under the config's sliding window W each cache is a ring of the last min(context, W) rows,
// and bytes_per_step counts those.
LayerTiming time_layer_decode(const LayerConfig& config, const LayerWeights& weights,
                              std::int64_t context, KvTypes kv_dtype, Isa isa, int threads,
                              int steps, ComputeMode compute = ComputeMode::exact,
                              std::int64_t batch = 1, KvLayout layout = {});

// time_layer_decode for several batch sizes at once: one layer each, their steps taken in
// turn (a step of each, `steps` times), one timing per entry of `batches`.
std::vector<LayerTiming> time_layer_decode_batches(const LayerConfig& config,
                                                   const LayerWeights& weights,
                                                   std::int64_t context, KvTypes kv_dtype, Isa isa,
                                                   int threads, int steps, ComputeMode compute,
                                                   const std::vector<std::int64_t>& batches,
                                                   KvLayout layout = {});

// One layer of time_layer_decode_runs: its weights (shared, not copied) and batch size.
struct LayerRun {
  const LayerWeights* weights = nullptr;
  std::int64_t batch = 1;
};
// The same for layers that may differ in their weights too (f32 against bf16: the same values
// rounded to each type), their steps taken in turn, one timing per run. The step_seconds of
// two runs pair up: step i of each was taken within one round.
std::vector<LayerTiming> time_layer_decode_runs(const LayerConfig& config,
                                                const std::vector<LayerRun>& runs,
                                                std::int64_t context, KvTypes kv_dtype, Isa isa,
                                                int threads, int steps, ComputeMode compute,
                                                KvLayout layout = {});

// Bytes a prefill of `tokens` holds at once: weights, the cache and the activations
// (x, normed x, q, k, v, attention output, residual, gate, up, output: [tokens × width] f32).
std::uint64_t layer_prefill_bytes(const LayerConfig& config, std::int64_t tokens, KvTypes kv_dtype,
                                  WeightDtype weights_dtype);

struct LayerPrefillTiming {
  double seconds = 0;  // the whole prefill: the time to first token at this context
  double tokens_per_s = 0;
  double attention_share = 0;  // of `seconds`, spent in attention
};

// Builds a layer as time_layer_decode does (capacity ≥ tokens) and times one prefill of
// `tokens` random rows from an empty cache, as a server's first request meets it: its
// activations allocated and touched beforehand (DecoderLayer::reserve_rows), no warm-up
// run (oneDNN's primitives take milliseconds to create against seconds of matmul).
LayerPrefillTiming time_layer_prefill(const LayerConfig& config, const LayerWeights& weights,
                                      std::int64_t tokens, KvTypes kv_dtype, Isa isa, int threads,
                                      ComputeMode compute, KvLayout layout = {});

}  // namespace kvscope
