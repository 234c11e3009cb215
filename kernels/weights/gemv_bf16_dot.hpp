#pragma once
// The decode GEMV of `--compute fast` on bf16 weights: AVX512-BF16's vdpbf16ps multiplies
// bf16 pairs and sums them into f32, one instruction per 64-byte line of weights where
// widening takes six (two each of convert, shift, FMA). x is rounded to bf16 first (to
// nearest even: at most 2^-8 relative per element, as the bf16 prefill path rounds
// activations); the products are exact in f32 and summed in f32.
#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

// y[w.rows] = W · bf16(x[w.cols]), W bf16 row-major, read in place; rows split over
// `threads` OpenMP threads. Call only where cpu_features().avx512_bf16 (the unit is compiled
// into kernels/arch/gemv_avx512_bf16.cpp alone). Throws std::invalid_argument unless
// w.dtype is bf16.
void gemv_bf16_dot(const float* x, const WeightsView& w, float* y, int threads);

// The same for the m rows of a small batch: y[m × w.rows] = bf16(x[m × w.cols]) · Wᵀ. Each
// 64-byte line of W is read from memory once for all m rows (in registers for up to 8 rows of
// x; a block of W's rows is re-read from L1 or L2 for each further tile of 8), where oneDNN's
// bf16 matmul read the weights at 19.5 of the GEMV's 45 GB/s at m = 8 (Zen 5). Row b of y is
// bit for bit gemv_bf16_dot of row b of x (the same sums in the same order).
void gemm_bf16_dot(const float* x, std::size_t m, const WeightsView& w, float* y, int threads);

}  // namespace kvscope
