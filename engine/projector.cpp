#include "engine/projector.hpp"

#include "kernels/gemv.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {

// Decode-step choice, from bench/projection_bench on a 2-core Zen 4 (AVX-512), 2 threads,
// medians of 5, one run (a shared, loaded machine; both paths are bound by reading W):
//   weights k × n     oneDNN (brg:avx512_core)   xsimd GEMV (avx512)
//   4096 × 4096         11.98 ms                   12.16 ms    (equal within noise)
//   4096 × 11008        35.29 ms                   23.23 ms    (GEMV 1.52× faster)
//   11008 × 4096        25.78 ms                   23.19 ms    (GEMV 1.11× faster)
// GEMV is never slower, so the decode step uses it.
constexpr bool kDecodeUsesGemv = true;

void Projector::operator()(const float* x, const float* w, std::size_t m, std::size_t k,
                           std::size_t n, float* y) {
  if (isa_ == Isa::scalar) return matmul_ref(x, w, m, k, n, y, threads_);
  if (m == 1 && kDecodeUsesGemv) return gemv(x, w, k, n, y, isa_, threads_);
  dnnl_.multiply(x, w, m, k, n, y, threads_);
}

}  // namespace kvscope
