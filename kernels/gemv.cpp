#include "kernels/gemv.hpp"

#include <stdexcept>
#include <string>

#include "kernels/gemv_simd.hpp"
#include "kernels/ref/layer_ops_ref.hpp"

namespace kvscope {

void gemv(const float* x, const float* w, std::size_t k, std::size_t n, float* y, Isa isa,
          int threads) {
  if (!cpu_supports(isa)) {
    throw std::invalid_argument("gemv: this CPU cannot run ISA " + std::string(to_string(isa)));
  }
  switch (isa) {
    case Isa::scalar:
      return matmul_ref(x, w, 1, k, n, y, threads);
    case Isa::sse2:
      return gemv_kernel<xsimd::sse2>(x, w, k, n, y, threads);
    case Isa::avx2:
      return gemv_kernel<xsimd::fma3<xsimd::avx2>>(x, w, k, n, y, threads);
    case Isa::avx512:
      return gemv_kernel<xsimd::avx512bw>(x, w, k, n, y, threads);
  }
}

}  // namespace kvscope
