// libFuzzer target: the safetensors header parser and the f32 decoding of every tensor it
// accepts. Malformed input must end in std::runtime_error, never a crash or another
// exception type.
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "engine/model/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = std::as_bytes(std::span(data, size));
  try {
    const kvscope::SafetensorsHeader header = kvscope::parse_safetensors_header(file, "fuzz");
    for (const auto& [name, entry] : header.tensors) {
      if (entry.dtype != "F32" && entry.dtype != "F16" && entry.dtype != "BF16") continue;
      // Offsets were validated: this slice lies inside the file.
      const auto bytes = file.subspan(header.data_begin + entry.begin, entry.end - entry.begin);
      std::vector<float> out(bytes.size() / entry.element_bytes);
      kvscope::decode_to_f32(bytes, entry.dtype, out.data(), name);
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
