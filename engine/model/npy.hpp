#pragma once
// NumPy .npy files of float32
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
//   "\x93NUMPY" major minor, header length (u16 for v1, u32 for v2/v3), a Python dict
//   literal {'descr': '<f4', 'fortran_order': False, 'shape': (n, d), }, then the data.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace kvscope {

// A little-endian float32 array in C order.
struct NpyArray {
  std::vector<std::uint64_t> shape;
  std::vector<float> data;  // product(shape) elements
};

// Parses the bytes of a .npy file. Throws std::runtime_error starting with `label` and
// naming the problem for: a truncated file, a bad magic string or version, a header that is
// not the dict above, a dtype other than '<f4', Fortran order, or a data size that differs
// from shape × 4 bytes.
NpyArray parse_npy(std::span<const std::byte> file, std::string_view label);

// Reads and parses `path` (errors name the path).
NpyArray read_npy(const std::filesystem::path& path);

// Writes `data` as a v1.0 '<f4' C-order .npy of `shape`. The bytes go to a temporary file
// beside `path` that is renamed over it only when complete, so a failure leaves any
// existing file untouched. Throws std::runtime_error naming the path.
void write_npy(const std::filesystem::path& path, std::span<const std::uint64_t> shape,
               std::span<const float> data);

}  // namespace kvscope
