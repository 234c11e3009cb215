#pragma once
// The machine's own limits, measured in the same run as the kernels they bound: a plain
// read loop (memory bandwidth) and independent FMA chains (FP32 compute peak).
#include <cstddef>

#include "kernels/isa.hpp"

namespace kvscope {

// Reads `bytes` at `data` once, split evenly over `threads` OpenMP threads, with the
// widest loads of `isa`. Returns a value derived from every byte so the loop stays live.
float read_sweep(const std::byte* data, std::size_t bytes, Isa isa, int threads);

// The read loop with arithmetic beside it: how fast this machine streams memory while its cores
// also compute, the question decode's GQA and MQA rows ask, with no kernel of ours in the way.
// Reads [data, data + bytes) once as f32 elements, each of `threads` OpenMP threads its share as
// two halves taken 16 KiB at a time in turn (decode's key and value blocks), requesting each
// half's next block into L1 a line per line read (as the GQA kernels request theirs), and does
// `fmas_per_float` multiply-adds with every element read (fused where `isa` has FMA; 0: one
// addition instead), into independent accumulators (Isa::scalar: element by element over the
// threads' shares, no blocks, nothing requested ahead). fmas_per_float: 0, 1, 2, 4, 8 or 16 (GQA-8
// decode does 4 per f32 element read, 8 per 16-bit one; MQA 32 per f32 element). Returns the
// sum of every element read times fmas_per_float (times 1 for 0); bytes past the last whole
// float are not read. Throws std::invalid_argument for another fmas_per_float, and if this CPU
// lacks `isa`.
float read_with_fmas(const std::byte* data, std::size_t bytes, int fmas_per_float, Isa isa,
                     int threads);

// Runs `iterations` rounds of independent fused multiply-add chains on each of `threads`
// threads. Returns the FP32 FLOPs performed (2 per lane per FMA), for FLOP/s = result / time.
// `chains_sum`, when given, receives thread 0's final chain values summed in chain order:
// the proof that every round ran (chain c starts at 1 + c/1000 on the vector ISAs, at 1 on
// scalar; each round is x = x · 0.999999 + 1e-7, fused on AVX2 and AVX-512).
double fma_burn(std::size_t iterations, Isa isa, int threads, float* chains_sum = nullptr);

}  // namespace kvscope
