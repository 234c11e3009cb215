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
    case KvDtype::int4:
      return "int4";
  }
  return "?";
}

KvDtype parse_kv_dtype(std::string_view name) {
  for (KvDtype t : {KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8, KvDtype::int4}) {
    if (name == to_string(t)) return t;
  }
  throw std::invalid_argument("unknown KV cache dtype '" + std::string(name) +
                              "' (expected f32, f16, bf16, int8 or int4)");
}

std::string to_string(KvTypes t) {
  if (t.same()) return std::string(to_string(t.k));
  return std::string(to_string(t.k)) + ":" + std::string(to_string(t.v));
}

KvTypes parse_kv_types(std::string_view name) {
  const std::size_t colon = name.find(':');
  if (colon == std::string_view::npos) return parse_kv_dtype(name);
  return {parse_kv_dtype(name.substr(0, colon)), parse_kv_dtype(name.substr(colon + 1))};
}

}  // namespace kvscope
