#pragma once
// Size arithmetic that throws instead of wrapping around 64 bits.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvscope {

// a × b; throws std::overflow_error naming `what` if the product does not fit in 64 bits.
inline std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const char* what) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw std::overflow_error(std::string(what) + " overflows 64 bits (" + std::to_string(a) +
                              " × " + std::to_string(b) + ")");
  }
  return r;
}

inline std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, const char* what) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    throw std::overflow_error(std::string(what) + " overflows 64 bits (" + std::to_string(a) +
                              " + " + std::to_string(b) + ")");
  }
  return r;
}

}  // namespace kvscope
