#pragma once
// One projection's weights in the type the checkpoint stores (f32, bf16, f16): owned, or
// borrowed from a memory-mapped file, so a bf16 checkpoint is never copied to f32.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

class WeightMatrix {
 public:
  WeightMatrix() = default;

  // Owns `values` [rows × cols] rounded to `dtype` (to nearest, ties to even). Throws
  // std::invalid_argument if values.size() is not rows × cols.
  WeightMatrix(const std::vector<float>& values, std::size_t rows, std::size_t cols,
               WeightDtype dtype = WeightDtype::f32);

  // Reads [rows × cols] `dtype` elements at `data` in place; `owner` keeps them alive (a
  // mapping). Data not aligned to its element size is copied once instead.
  static WeightMatrix borrowed(const void* data, WeightDtype dtype, std::size_t rows,
                               std::size_t cols, std::shared_ptr<const void> owner);

  WeightsView view() const { return {data_, dtype_, rows_, cols_}; }
  WeightDtype dtype() const { return dtype_; }
  std::size_t rows() const { return rows_; }
  std::size_t cols() const { return cols_; }
  std::uint64_t bytes() const {
    return static_cast<std::uint64_t>(rows_) * cols_ * weight_element_bytes(dtype_);
  }
  // Whether the elements live in a borrowed mapping rather than in memory of our own.
  bool is_borrowed() const { return borrowed_; }

  // Every element widened to f32 (exact), row-major.
  std::vector<float> to_f32() const;

 private:
  std::shared_ptr<const void> owner_;  // keeps data_ alive
  const void* data_ = nullptr;
  WeightDtype dtype_ = WeightDtype::f32;
  std::size_t rows_ = 0, cols_ = 0;
  bool borrowed_ = false;
};

}  // namespace kvscope
