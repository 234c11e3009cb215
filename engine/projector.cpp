#include "engine/projector.hpp"

#include "kernels/gemv.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {

// Decode-step choice, from bench/projection_bench (4096 × 4096 and 11008 × 4096 weights,
// 2 threads, Zen 4): see the medians recorded there.
constexpr bool kDecodeUsesGemv = true;

void Projector::operator()(const float* x, const float* w, std::size_t m, std::size_t k,
                           std::size_t n, float* y) {
  if (isa_ == Isa::scalar) return matmul_ref(x, w, m, k, n, y, threads_);
  if (m == 1 && kDecodeUsesGemv) return gemv(x, w, k, n, y, isa_, threads_);
  dnnl_.multiply(x, w, m, k, n, y, threads_);
}

}  // namespace kvscope
