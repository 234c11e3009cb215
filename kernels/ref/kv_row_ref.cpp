#include "kernels/ref/kv_row_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/number_formats.hpp"

namespace kvscope {
namespace {

// int4 (q4_0's block layout, symmetric levels): per group of up to 32 elements,
// scale = f16(absmax / 7) (clamped to the largest finite half), q = round(x / scale) clamped
// to [−7, 7], stored as the nibble q + 8. Block: the f16 scale (2 bytes), then 16 bytes whose
// byte j holds element j in its low nibble and element j + 16 in its high nibble. Elements
// past head_dim in a shorter last group are stored as 0 (nibble 8). An all-zero group gets
// scale 0 and decodes to 0.
void encode_int4_ref(const float* src, std::size_t n, std::byte* dst) {
  for (std::size_t g0 = 0; g0 < n; g0 += kInt4Group) {
    const std::size_t len = std::min(kInt4Group, n - g0);
    float absmax = 0.0f;
    for (std::size_t i = 0; i < len; ++i) absmax = std::max(absmax, std::fabs(src[g0 + i]));
    const std::uint16_t bits = f32_to_f16_bits(std::min(absmax / 7.0f, 65504.0f));
    const float scale = f16_bits_to_f32(bits);
    const float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;  // zero guard: all-zero group
    std::byte* block = dst + g0 / kInt4Group * kInt4GroupBytes;
    std::memcpy(block, &bits, 2);
    std::uint8_t nibbles[kInt4Group];
    for (std::size_t i = 0; i < kInt4Group; ++i) {
      const float q = i < len ? std::nearbyint(src[g0 + i] * inverse) : 0.0f;
      nibbles[i] = static_cast<std::uint8_t>(std::clamp(q, -7.0f, 7.0f) + 8.0f);
    }
    for (std::size_t j = 0; j < 16; ++j) {
      block[2 + j] = static_cast<std::byte>(nibbles[j] | (nibbles[j + 16] << 4));
    }
  }
}

void decode_int4_ref(const std::byte* src, std::size_t n, float* dst) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::byte* block = src + i / kInt4Group * kInt4GroupBytes;
    std::uint16_t bits;
    std::memcpy(&bits, block, 2);
    const std::size_t j = i % kInt4Group;
    const auto byte = static_cast<std::uint8_t>(block[2 + j % 16]);
    const int nibble = j < 16 ? byte & 0x0f : byte >> 4;
    dst[i] = static_cast<float>(nibble - 8) * f16_bits_to_f32(bits);
  }
}

}  // namespace

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
    case KvDtype::int4:
      encode_int4_ref(src, n, dst);
      return 1.0f;
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
    case KvDtype::int4:
      decode_int4_ref(src, n, dst);
      return;
  }
}

}  // namespace kvscope
