#include "engine/weight_matrix.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

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
  if (dtype == WeightDtype::f32) {
    auto owned = std::make_shared<std::vector<float>>(values);
    data_ = owned->data();
    owner_ = std::move(owned);
    return;
  }
  auto owned = std::make_shared<std::vector<std::uint16_t>>(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    (*owned)[i] =
        dtype == WeightDtype::bf16 ? f32_to_bf16_bits(values[i]) : f32_to_f16_bits(values[i]);
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
  auto copy = std::make_shared<std::vector<std::uint32_t>>((rows * cols * element + 3) / 4);
  std::memcpy(copy->data(), data, rows * cols * element);
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
