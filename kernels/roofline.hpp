#pragma once
// The machine's own limits, measured in the same run as the kernels they bound: a plain
// read loop (memory bandwidth) and independent FMA chains (FP32 compute peak).
#include <cstddef>

#include "kernels/isa.hpp"

namespace kvscope {

// Reads `bytes` at `data` once, split evenly over `threads` OpenMP threads, with the
// widest loads of `isa`. Returns a value derived from every byte so the loop stays live.
float read_sweep(const std::byte* data, std::size_t bytes, Isa isa, int threads);

// Runs `iterations` rounds of independent fused multiply-add chains on each of `threads`
// threads. Returns the FP32 FLOPs performed (2 per lane per FMA), for FLOP/s = result / time.
// `chains_sum`, when given, receives thread 0's final chain values summed in chain order:
// the proof that every round ran (chain c starts at 1 + c/1000 on the vector ISAs, at 1 on
// scalar; each round is x = x · 0.999999 + 1e-7, fused on AVX2 and AVX-512).
double fma_burn(std::size_t iterations, Isa isa, int threads, float* chains_sum = nullptr);

}  // namespace kvscope
