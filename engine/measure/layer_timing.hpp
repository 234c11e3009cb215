#pragma once
// Times full decoder-layer decode steps (projections + attention + MLP) at a given context.
#include <cstdint>

#include "engine/layer_config.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

struct LayerTiming {
  double median_s = 0;
  double tokens_per_s = 0;
  std::uint64_t bytes_per_step = 0;  // f32 weights + the KV cache re-read
};

// Builds a layer with seeded random weights, fills its cache with `context` random rows,
// then times `steps` decode steps (after one warm-up) of the token at position `context`.
// config.capacity() must exceed `context` + steps.
LayerTiming time_layer_decode(const LayerConfig& config, std::int64_t context, KvTypes kv_dtype,
                              Isa isa, int threads, int steps,
                              ComputeMode compute = ComputeMode::exact);

}  // namespace kvscope
