#include "kernels/ref/kv_row_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/number_formats.hpp"

namespace kvscope {

float encode_row_ref(KvDtype dtype, const float* src, std::size_t n, std::byte* dst) {
  switch (dtype) {
    case KvDtype::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return 1.0f;
    case KvDtype::f16:
    case KvDtype::bf16: {
      auto* out = reinterpret_cast<std::uint16_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) {
        out[i] = dtype == KvDtype::f16 ? f32_to_f16_bits(src[i]) : f32_to_bf16_bits(src[i]);
      }
      return 1.0f;
    }
    case KvDtype::int8: {
      // Symmetric per-row quantization: q = round(x / scale), scale = absmax / 127.
      float absmax = 0.0f;
      for (std::size_t i = 0; i < n; ++i) absmax = std::max(absmax, std::fabs(src[i]));
      const float scale = absmax / 127.0f;
      const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;  // zero guard: all-zero row
      auto* out = reinterpret_cast<std::int8_t*>(dst);
      for (std::size_t i = 0; i < n; ++i) {
        const float q = std::nearbyint(src[i] * inverse);
        out[i] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
      }
      return scale;
    }
  }
  return 1.0f;
}

void decode_row_ref(KvDtype dtype, const std::byte* src, float scale, std::size_t n, float* dst) {
  switch (dtype) {
    case KvDtype::f32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case KvDtype::f16:
    case KvDtype::bf16: {
      const auto* in = reinterpret_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) {
        dst[i] = dtype == KvDtype::f16 ? f16_bits_to_f32(in[i]) : bf16_bits_to_f32(in[i]);
      }
      return;
    }
    case KvDtype::int8: {
      const auto* in = reinterpret_cast<const std::int8_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(in[i]) * scale;
      return;
    }
  }
}

}  // namespace kvscope
