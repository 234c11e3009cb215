#pragma once
// Scalar conversions between f32 and the 16-bit float formats (IEEE binary16, bfloat16).
// Both round to nearest, ties to even, and keep NaN a NaN.
#include <bit>
#include <cstdint>

namespace kvscope {

inline std::uint16_t f32_to_bf16_bits(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

inline float bf16_bits_to_f32(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

inline float f16_bits_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  if (exp != 0) return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return std::bit_cast<float>(sign);  // ±0
  // Subnormal half: value = mant × 2^-24, exact in f32.
  const float magnitude = static_cast<float>(mant) * 0x1p-24f;
  return sign ? -magnitude : magnitude;
}

inline std::uint16_t f32_to_f16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to ≥ 65520: inf
  if (abs < 0x38800000u) {                        // below 2^-14: subnormal half or 0
    // Adding 0.5 shifts the significand so the FPU rounds (ties to even) at 2^-24.
    const float shifted = std::bit_cast<float>(abs) + 0.5f;
    return sign | static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u);
  }
  // Normal half: rebias exponent and round the 13 dropped bits to nearest even.
  std::uint32_t r = abs - ((127u - 15u) << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<std::uint16_t>(r >> 13);
}

}  // namespace kvscope
