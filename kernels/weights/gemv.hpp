#pragma once
// Matrix-vector product for one token's projection: the decode step's matmul.
#include <cstddef>

#include "kernels/isa.hpp"
#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

// y[w.rows] = W · x[w.cols], W row-major in its stored type (a Hugging Face [out × in]
// weight, read in place: f16/bf16 are widened in registers, exactly), rows split over
// `threads` OpenMP threads. Isa::scalar runs matmul_ref; the others their xsimd kernel.
// Throws std::invalid_argument if this CPU lacks `isa`.
void gemv(const float* x, const WeightsView& w, float* y, Isa isa, int threads);

}  // namespace kvscope
