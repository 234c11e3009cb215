#pragma once
// Reading tensors from safetensors files (https://github.com/huggingface/safetensors):
//   [u64 little-endian N][N bytes JSON header][data]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]},
// offsets relative to the start of the data; an optional "__metadata__" maps strings to
// strings. Every offset is checked against the file before any tensor is read.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/model/mapped_file.hpp"

namespace kvscope {

// Where one tensor lies in a safetensors file.
struct TensorEntry {
  std::string dtype;              // as written, e.g. "F32", "BF16", "I64"
  std::size_t element_bytes = 0;  // of `dtype`
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range within the data section
};

// The parsed header of a safetensors file: tensor entries by name and where data begins.
struct SafetensorsHeader {
  std::map<std::string, TensorEntry, std::less<>> tensors;
  std::uint64_t data_begin = 0;  // file offset of the data section (8 + N)
  std::uint64_t data_bytes = 0;
};

// Parses and validates the header of the safetensors bytes `file`. Throws
// std::runtime_error starting with `label` (the file name) and naming the tensor or field
// for: a file shorter than 8 bytes, a header length past the end of the file, a header
// that is not a JSON object, an unknown dtype, a shape that is not a list of non-negative
// integers, data_offsets outside the data or not equal to shape × dtype bytes.
SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file, std::string_view label);

// Decodes `count` elements of a F32, F16 or BF16 tensor stored little-endian at `bytes`
// (any alignment) to f32. Throws std::runtime_error for any other dtype.
void decode_to_f32(std::span<const std::byte> bytes, std::string_view dtype, float* out,
                   std::string_view label);

// One memory-mapped safetensors file. Only the tensors read are paged in.
class SafetensorsFile {
 public:
  // Throws std::runtime_error naming the file on any problem parse_safetensors_header finds.
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  const SafetensorsHeader& header() const { return header_; }
  bool contains(std::string_view name) const { return header_.tensors.contains(name); }

  // The entry of `name`; throws std::runtime_error naming the file and tensor if absent.
  const TensorEntry& entry(std::string_view name) const;

  // Tensor `name` converted to f32 (row-major, as stored). Throws naming the file and
  // tensor if it is missing, its shape differs from `expected_shape`, or its dtype is not
  // F32, F16 or BF16.
  std::vector<float> read_f32(std::string_view name,
                              std::span<const std::uint64_t> expected_shape) const;

  // The stored bytes of tensor `name` in the mapping (no copy, any alignment), after the
  // same checks as read_f32.
  std::span<const std::byte> tensor_bytes(std::string_view name,
                                          std::span<const std::uint64_t> expected_shape) const;

 private:
  MappedFile file_;
  SafetensorsHeader header_;
};

// "[a, b, c]" for error messages.
std::string shape_to_string(std::span<const std::uint64_t> shape);

}  // namespace kvscope
