#include "engine/model/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "kernels/number_formats.hpp"

namespace kvscope {
namespace {

using nlohmann::json;

// Headers larger than this are refused before parsing (the reference implementation's
// limit is 100 MB; real headers are a few hundred kB).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

[[noreturn]] void fail(std::string_view label, const std::string& message) {
  throw std::runtime_error(std::string(label) + ": " + message);
}

[[noreturn]] void fail_tensor(std::string_view label, std::string_view tensor,
                              const std::string& message) {
  throw std::runtime_error(std::string(label) + ": tensor '" + std::string(tensor) +
                           "': " + message);
}

// Bytes per element of each safetensors dtype; 0 for an unknown name.
std::size_t dtype_bytes(std::string_view dtype) {
  struct Size {
    std::string_view name;
    std::size_t bytes;
  };
  static constexpr Size kSizes[] = {{"F64", 8},  {"F32", 4},     {"F16", 2},    {"BF16", 2},
                                    {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
                                    {"U64", 8},  {"U32", 4},     {"U16", 2},    {"U8", 1},
                                    {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  for (const Size& s : kSizes) {
    if (s.name == dtype) return s.bytes;
  }
  return 0;
}

std::uint64_t read_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

std::uint64_t non_negative_integer(const json& value, std::string_view label,
                                   std::string_view tensor, const char* field) {
  if (!value.is_number_unsigned()) {
    fail_tensor(label, tensor,
                std::string(field) + " must hold non-negative integers, got " + value.dump());
  }
  return value.get<std::uint64_t>();
}

TensorEntry parse_entry(const std::string& name, const json& value, std::uint64_t data_bytes,
                        std::string_view label) {
  if (!value.is_object()) fail_tensor(label, name, "entry is not a JSON object");
  TensorEntry entry;

  const auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string()) {
    fail_tensor(label, name, "missing string field \"dtype\"");
  }
  entry.dtype = dtype->get<std::string>();
  entry.element_bytes = dtype_bytes(entry.dtype);
  if (entry.element_bytes == 0) fail_tensor(label, name, "unknown dtype \"" + entry.dtype + "\"");

  const auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array()) {
    fail_tensor(label, name, "missing list field \"shape\"");
  }
  // Element count in bytes, refusing shapes whose size overflows 64 bits.
  std::uint64_t bytes = entry.element_bytes;
  for (const json& d : *shape) {
    const std::uint64_t dim = non_negative_integer(d, label, name, "shape");
    entry.shape.push_back(dim);
    if (__builtin_mul_overflow(bytes, dim, &bytes)) {
      fail_tensor(label, name, "shape " + shape_to_string(entry.shape) + " overflows 64 bits");
    }
  }

  const auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2) {
    fail_tensor(label, name, "missing field \"data_offsets\": [begin, end]");
  }
  entry.begin = non_negative_integer((*offsets)[0], label, name, "data_offsets");
  entry.end = non_negative_integer((*offsets)[1], label, name, "data_offsets");
  const std::string range =
      "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) + "]";
  if (entry.begin > entry.end) fail_tensor(label, name, range + " end before begin");
  if (entry.end > data_bytes) {
    fail_tensor(label, name,
                range + " extend past the " + std::to_string(data_bytes) + " bytes of data");
  }
  if (entry.end - entry.begin != bytes) {
    fail_tensor(label, name,
                range + " hold " + std::to_string(entry.end - entry.begin) + " bytes but shape " +
                    shape_to_string(entry.shape) + " of " + entry.dtype + " needs " +
                    std::to_string(bytes));
  }
  return entry;
}

}  // namespace

std::string shape_to_string(std::span<const std::uint64_t> shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

SafetensorsHeader parse_safetensors_header(std::span<const std::byte> file,
                                           std::string_view label) {
  if (file.size() < 8) {
    fail(label, "truncated: " + std::to_string(file.size()) +
                    " bytes, a safetensors file starts with an 8-byte header length");
  }
  const std::uint64_t header_bytes = read_u64_le(file.data());
  if (header_bytes > file.size() - 8) {
    fail(label, "header length " + std::to_string(header_bytes) + " runs past the end of the " +
                    std::to_string(file.size()) + "-byte file");
  }
  if (header_bytes > kMaxHeaderBytes) {
    fail(label, "header length " + std::to_string(header_bytes) + " exceeds the limit of " +
                    std::to_string(kMaxHeaderBytes) + " bytes");
  }
  const auto* text = reinterpret_cast<const char*>(file.data() + 8);
  json header = json::parse(text, text + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail(label, "header is not valid JSON");
  if (!header.is_object()) fail(label, "header is not a JSON object");

  SafetensorsHeader result;
  result.data_begin = 8 + header_bytes;
  result.data_bytes = file.size() - result.data_begin;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(label, "__metadata__ is not a JSON object");
      continue;
    }
    result.tensors.emplace(name, parse_entry(name, value, result.data_bytes, label));
  }
  return result;
}

void decode_to_f32(std::span<const std::byte> bytes, std::string_view dtype, float* out,
                   std::string_view label) {
  // Little-endian host assumed (x86-64, the only target); memcpy tolerates any alignment.
  if (dtype == "F32") {
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());  // out may be null if empty
  } else if (dtype == "F16" || dtype == "BF16") {
    const bool is_bf16 = dtype == "BF16";
    const std::size_t count = bytes.size() / 2;
    for (std::size_t i = 0; i < count; ++i) {
      std::uint16_t bits;
      std::memcpy(&bits, bytes.data() + 2 * i, 2);
      out[i] = is_bf16 ? bf16_bits_to_f32(bits) : f16_bits_to_f32(bits);
    }
  } else {
    fail(label, "dtype " + std::string(dtype) + " is not supported (F32, F16 or BF16)");
  }
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path)
    : file_(path), header_(parse_safetensors_header(file_.bytes(), path.string())) {}

const TensorEntry& SafetensorsFile::entry(std::string_view name) const {
  const auto it = header_.tensors.find(name);
  if (it == header_.tensors.end()) fail_tensor(path().string(), name, "not found in the file");
  return it->second;
}

std::span<const std::byte> SafetensorsFile::tensor_bytes(
    std::string_view name, std::span<const std::uint64_t> expected_shape) const {
  const TensorEntry& e = entry(name);
  if (!std::ranges::equal(e.shape, expected_shape)) {
    fail_tensor(path().string(), name,
                "shape " + shape_to_string(e.shape) + " does not match the expected " +
                    shape_to_string(expected_shape));
  }
  return file_.bytes().subspan(header_.data_begin + e.begin, e.end - e.begin);
}

std::vector<float> SafetensorsFile::read_f32(std::string_view name,
                                             std::span<const std::uint64_t> expected_shape) const {
  const auto bytes = tensor_bytes(name, expected_shape);
  std::vector<float> out(bytes.size() / entry(name).element_bytes);
  decode_to_f32(bytes, entry(name).dtype, out.data(),
                path().string() + ": tensor '" + std::string(name) + "'");
  return out;
}

}  // namespace kvscope
