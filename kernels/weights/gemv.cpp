#include "kernels/weights/gemv.hpp"

#include <stdexcept>
#include <string>

#include "kernels/ref/layer_ops_ref.hpp"
#include "kernels/weights/gemv_simd.hpp"

namespace kvscope {
namespace {

template <class Arch>
void gemv_on(const float* x, const WeightsView& w, float* y, int threads) {
  switch (w.dtype) {
    case WeightDtype::f32:
      return gemv_kernel<Arch, KvDtype::f32>(x, w.data, w.cols, w.rows, y, threads);
    case WeightDtype::bf16:
      return gemv_kernel<Arch, KvDtype::bf16>(x, w.data, w.cols, w.rows, y, threads);
    case WeightDtype::f16:
      if constexpr (std::is_same_v<Arch, xsimd::fma3<xsimd::avx2>>) {
        // The AVX2 f16 kernel uses F16C, which cpu_supports(Isa::avx2) does not check.
        if (!cpu_has_f16c()) return gemv_on<xsimd::sse2>(x, w, y, threads);
      }
      return gemv_kernel<Arch, KvDtype::f16>(x, w.data, w.cols, w.rows, y, threads);
  }
}

}  // namespace

void gemv(const float* x, const WeightsView& w, float* y, Isa isa, int threads) {
  if (!cpu_supports(isa)) {
    throw std::invalid_argument("gemv: this CPU cannot run ISA " + std::string(to_string(isa)));
  }
  switch (isa) {
    case Isa::scalar:
      return matmul_ref(x, w, 1, y, threads);
    case Isa::sse2:
      return gemv_on<xsimd::sse2>(x, w, y, threads);
    case Isa::avx2:
      return gemv_on<xsimd::fma3<xsimd::avx2>>(x, w, y, threads);
    case Isa::avx512:
      return gemv_on<xsimd::avx512bw>(x, w, y, threads);
  }
}

}  // namespace kvscope
