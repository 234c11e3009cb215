#pragma once
// How a decoder layer runs its projections: the scalar reference, oneDNN, or our GEMV.
#include <cstddef>

#include "engine/dnnl_matmul.hpp"
#include "kernels/isa.hpp"

namespace kvscope {

// y[m × n] = x[m × k] · Wᵀ, W [n × k] row-major (Hugging Face layout).
//   Isa::scalar: matmul_ref, so the scalar layer stays a plain reference end to end.
//   m > 1 (prefill): oneDNN matmul, one cached primitive per (m, k, n).
//   m = 1 (decode): kDecodeUsesGemv picks our xsimd GEMV (kernels/gemv.hpp) or oneDNN,
//   whichever bench/projection_bench measured faster (see the numbers there).
class Projector {
 public:
  Projector(Isa isa, int threads) : isa_(isa), threads_(threads) {}

  void operator()(const float* x, const float* w, std::size_t m, std::size_t k, std::size_t n,
                  float* y);

  const DnnlMatmul& dnnl() const { return dnnl_; }

 private:
  Isa isa_;
  int threads_;
  DnnlMatmul dnnl_;
};

}  // namespace kvscope
