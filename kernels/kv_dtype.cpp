#include "kernels/kv_dtype.hpp"

#include <stdexcept>

namespace kvscope {

std::string_view to_string(KvDtype t) {
  switch (t) {
    case KvDtype::f32:
      return "f32";
    case KvDtype::f16:
      return "f16";
    case KvDtype::bf16:
      return "bf16";
    case KvDtype::int8:
      return "int8";
  }
  return "?";
}

KvDtype parse_kv_dtype(std::string_view name) {
  for (KvDtype t : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8}) {
    if (name == to_string(t)) return t;
  }
  throw std::invalid_argument("unknown KV cache dtype '" + std::string(name) +
                              "' (expected f32, f16, bf16 or int8)");
}

}  // namespace kvscope
