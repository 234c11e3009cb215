#pragma once
// Matrix-vector product for one token's projection: the decode step's matmul.
#include <cstddef>

#include "kernels/isa.hpp"

namespace kvscope {

// y[n] = W[n × k] · x[k], W row-major (a Hugging Face [out × in] weight), rows split over
// `threads` OpenMP threads. Isa::scalar runs matmul_ref; the others their xsimd kernel.
// Throws std::invalid_argument if this CPU lacks `isa`.
void gemv(const float* x, const float* w, std::size_t k, std::size_t n, float* y, Isa isa,
          int threads);

}  // namespace kvscope
