#pragma once
// Element types a KV cache can hold, and their sizes.
#include <cstddef>
#include <string>
#include <string_view>

namespace kvscope {

enum class KvDtype { f32, f16, bf16, int8 };

// Bytes of one stored K or V element (int8 scales are counted separately).
constexpr std::size_t kv_element_bytes(KvDtype t) {
  switch (t) {
    case KvDtype::f32:
      return 4;
    case KvDtype::f16:
      return 2;
    case KvDtype::bf16:
      return 2;
    case KvDtype::int8:
      return 1;
  }
  return 0;
}

// int8 caches keep one f32 scale per (token, kv head) for K and one for V.
constexpr bool kv_has_scales(KvDtype t) { return t == KvDtype::int8; }

std::string_view to_string(KvDtype t);

// Parses "f32", "f16", "bf16" or "int8"; throws std::invalid_argument naming the value.
KvDtype parse_kv_dtype(std::string_view name);

}  // namespace kvscope
