#include "kernels/weights/weight_dtype.hpp"

#include <stdexcept>
#include <string>

namespace kvscope {

std::string_view to_string(WeightDtype t) {
  switch (t) {
    case WeightDtype::f32:
      return "f32";
    case WeightDtype::bf16:
      return "bf16";
    case WeightDtype::f16:
      return "f16";
  }
  return "?";
}

WeightDtype parse_weight_dtype(std::string_view name) {
  for (WeightDtype t : {WeightDtype::f32, WeightDtype::bf16, WeightDtype::f16}) {
    if (name == to_string(t)) return t;
  }
  throw std::invalid_argument("unknown weights dtype '" + std::string(name) +
                              "' (expected f32, bf16 or f16)");
}

}  // namespace kvscope
