#pragma once
// Element types a weight matrix can be stored in (as checkpoints ship them), and a
// read-only view of one matrix in its stored type.
#include <cstddef>
#include <string_view>

namespace kvscope {

enum class WeightDtype { f32, bf16, f16 };

constexpr std::size_t weight_element_bytes(WeightDtype t) { return t == WeightDtype::f32 ? 4 : 2; }

std::string_view to_string(WeightDtype t);

// Parses "f32", "bf16" or "f16"; throws std::invalid_argument naming the value.
WeightDtype parse_weight_dtype(std::string_view name);

// A row-major [rows × cols] matrix of `dtype` elements at `data` (f32: float, bf16/f16: raw
// 16-bit patterns), `data` aligned to its element size. Not owning.
struct WeightsView {
  const void* data = nullptr;
  WeightDtype dtype = WeightDtype::f32;
  std::size_t rows = 0, cols = 0;
};

}  // namespace kvscope
