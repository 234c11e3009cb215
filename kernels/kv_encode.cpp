#include "kernels/kv_encode.hpp"

#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {

EncodeRowFn encode_row_for(Isa isa) {
  require_cpu_supports(isa);
  switch (isa) {
    case Isa::avx512:
      return simd::encode_row_arch<xsimd::avx512bw>;
    case Isa::avx2:
      return simd::encode_row_arch<xsimd::fma3<xsimd::avx2>>;
    case Isa::sse2:
      return simd::encode_row_arch<xsimd::sse2>;
    case Isa::scalar:
      break;
  }
  return encode_row_ref;
}

}  // namespace kvscope
