// libFuzzer target: the .npy reader. Malformed input must end in std::runtime_error,
// never a crash or another exception type.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "engine/model/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const kvscope::NpyArray array =
        kvscope::parse_npy(std::as_bytes(std::span(data, size)), "fuzz");
    std::uint64_t count = 1;
    for (std::uint64_t d : array.shape) count *= d;
    if (count != array.data.size()) __builtin_trap();  // shape and data must agree
  } catch (const std::runtime_error&) {
  }
  return 0;
}
