#pragma once
// Scalar reference operations of a Llama-style decoder layer, besides attention.
#include <cstddef>

#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

// y[n × w.rows] = x[n × w.cols] · Wᵀ with W stored [out × in] row-major (Hugging Face
// layout) in its own type; each element is widened to f32 (exact) and products summed in f32.
void matmul_ref(const float* x, const WeightsView& w, std::size_t n, float* y, int threads);

// y = x / sqrt(mean(x²) + eps) ⊙ weight, for each of n rows of `width`.
void rmsnorm_ref(const float* x, const float* weight, std::size_t n, std::size_t width, float eps,
                 float* y);

// Rotary position embedding, Hugging Face rotate-half convention, in place on n_heads
// vectors of head_dim at position `pos`: pairs (i, i + head_dim/2) are rotated by
// pos · theta^(−2i/head_dim).
void rope_ref(float* x, std::size_t n_heads, std::size_t head_dim, std::size_t pos, float theta);

// The same rotation with the frequencies given: pair i turns by pos · inv_freq[i]
// (inv_freq: head_dim / 2 values, e.g. Llama 3.1's scaled table).
void rope_table_ref(float* x, std::size_t n_heads, std::size_t head_dim, std::size_t pos,
                    const double* inv_freq);

// SwiGLU gate: gate[i] ← silu(gate[i]) · up[i], silu(z) = z / (1 + e^−z).
void swiglu_ref(float* gate, const float* up, std::size_t n);

}  // namespace kvscope
