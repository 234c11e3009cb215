#pragma once
// The machine's limits measured in the same run as the kernels: read bandwidth over a
// given number of bytes and the FP32 FMA peak, both with a given thread count.
#include <cstdint>

#include "engine/measure/cold_caches.hpp"
#include "engine/memory.hpp"
#include "kernels/isa.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope {

// Median GB/s (1e9 bytes/s) of `repeats` plain SIMD read sweeps over a fresh buffer of
// `bytes` (after one warm-up sweep). The buffer is freed before returning.
double measure_read_bandwidth_gbps(std::uint64_t bytes, Isa isa, int threads, int repeats = 7);

// The read loop under a decode measurement's plan, a step at a time: plan.caches buffers of
// plan.cache_bytes (one allocation, each on its own page), each step sweeping the next
// plan.layers of them in rotation, as a decode step reads its caches; with the flush method
// the buffers just read are flushed after the step (untimed). The constructor allocates
// (check memory first: require_plan_memory).
class ReadLoop {
 public:
  ReadLoop(const CachePlan& plan, Isa isa, int threads);
  // One step's sweeps; returns their seconds (the flush after them not counted).
  double step();
  // Bytes one step reads: plan.cache_bytes × plan.layers.
  std::uint64_t step_bytes() const { return plan_.cache_bytes * plan_.layers; }

 private:
  CachePlan plan_;
  Isa isa_;
  int threads_;
  std::size_t stride_;
  AlignedBuffer buffer_;
  std::size_t cursor_ = 0;
};

// ReadLoop's median GB/s over `repeats` steps, after untimed steps for at least one and
// `warmup_s` seconds (kWarmupSeconds, as the decode steps it is compared with). Checks memory
// before allocating.
double measure_read_bandwidth_gbps(const CachePlan& plan, Isa isa, int threads, int repeats = 7,
                                   double warmup_s = kWarmupSeconds);

// Median GFLOP/s of `repeats` runs of independent FMA chains on every thread.
double measure_fma_peak_gflops(Isa isa, int threads, int repeats = 5);

// Median peak of a compute unit in G operations/s (2 per multiply-add, as FLOPs count them):
// fp32-fma is measure_fma_peak_gflops on `isa`; the dot units run their own chains.
double measure_unit_peak_gops(ComputeUnit unit, Isa isa, int threads, int repeats = 5);

}  // namespace kvscope
