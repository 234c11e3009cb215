#include "engine/weight_matrix.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/memory.hpp"
#include "kernels/number_formats.hpp"

namespace kvscope {

WeightMatrix::WeightMatrix(const std::vector<float>& values, std::size_t rows, std::size_t cols,
                           WeightDtype dtype)
    : dtype_(dtype), rows_(rows), cols_(cols) {
  if (values.size() != rows * cols) {
    throw std::invalid_argument("weight matrix of " + std::to_string(values.size()) +
                                " elements is not " + std::to_string(rows) + " × " +
                                std::to_string(cols));
  }
  // Our own copy in an AlignedBuffer: from 2 MiB on, huge pages (engine/memory.cpp), as the
  // caches and the read loop they are measured against. From a std::vector the matrices of
  // the report's synthetic layer sat on 4 KiB pages, each new page a walk that held up its
  // reads. The report's layer step (MHA f32 cache, 2,000 tokens; Zen 5, 2 threads), memory in
  // its fast state: bf16 weights read at 76.0 against 65.8 GB/s, f32 at 81.4 against 68.2;
  // memory slow, level (50.8 against 49.8, 50.6 against 51.7).
  auto owned = std::make_shared<AlignedBuffer>(values.size() * weight_element_bytes(dtype),
                                               "a weight matrix");
  if (dtype == WeightDtype::f32) {
    if (!values.empty()) std::memcpy(owned->data(), values.data(), values.size() * sizeof(float));
  } else {
    auto* bits = owned->as<std::uint16_t>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      bits[i] =
          dtype == WeightDtype::bf16 ? f32_to_bf16_bits(values[i]) : f32_to_f16_bits(values[i]);
    }
  }
  data_ = owned->data();
  owner_ = std::move(owned);
}

WeightMatrix WeightMatrix::borrowed(const void* data, WeightDtype dtype, std::size_t rows,
                                    std::size_t cols, std::shared_ptr<const void> owner) {
  WeightMatrix m;
  m.dtype_ = dtype;
  m.rows_ = rows;
  m.cols_ = cols;
  const std::size_t element = weight_element_bytes(dtype);
  if (reinterpret_cast<std::uintptr_t>(data) % element == 0) {
    m.data_ = data;
    m.owner_ = std::move(owner);
    m.borrowed_ = true;
    return m;
  }
  // safetensors aligns nothing by itself: an odd offset gets an aligned copy.
  auto copy = std::make_shared<AlignedBuffer>(rows * cols * element, "a weight matrix");
  if (rows * cols > 0) std::memcpy(copy->data(), data, rows * cols * element);
  m.data_ = copy->data();
  m.owner_ = std::move(copy);
  return m;
}

std::vector<float> WeightMatrix::to_f32() const {
  std::vector<float> out(rows_ * cols_);
  if (dtype_ == WeightDtype::f32) {
    if (!out.empty()) std::memcpy(out.data(), data_, out.size() * sizeof(float));  // empty: null
    return out;
  }
  const auto* bits = static_cast<const std::uint16_t*>(data_);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = dtype_ == WeightDtype::bf16 ? bf16_bits_to_f32(bits[i]) : f16_bits_to_f32(bits[i]);
  }
  return out;
}

}  // namespace kvscope
