#pragma once
// A batch's projection on AMX-BF16 tiles: the decode step of up to 16 sequences at once
// (`--compute fast`, bf16 weights). Each W row is streamed from memory once for the batch;
// the products cost next to nothing (a tile product does 16 × 16 × 32 multiply-adds), where
// AVX512-BF16 (gemm_bf16_dot) runs at half the FMA rate on some Intel cores and made the
// batch compute-bound.
#include <cstddef>

#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

// Rows of x one call takes: one B tile's columns.
inline constexpr std::size_t kAmxBatchRows = 16;

// Whether gemm_bf16_amx takes this product: bf16 weights, 2 to kAmxBatchRows rows of x, and
// rows of W made of whole 32-element tile steps (every Llama-family width is).
bool gemm_bf16_amx_fits(std::size_t m, const WeightsView& w);

// y[m × w.rows] = bf16(x[m × w.cols]) · Wᵀ, W bf16 row-major read in place as A tiles (16 of
// its rows × 32 elements), x rounded to bf16 (to nearest even, as gemm_bf16_dot rounds it)
// and packed once as B tiles; products exact, summed in f32 by tdpbf16ps. W's last rows
// short of 16 go through gemm_bf16_dot. Rows of W split over `threads` OpenMP threads. Call
// only where cpu_has(ComputeUnit::amx_bf16) (Linux granted tile data) and
// gemm_bf16_amx_fits(); throws std::invalid_argument otherwise.
void gemm_bf16_amx(const float* x, std::size_t m, const WeightsView& w, float* y, int threads);

}  // namespace kvscope
