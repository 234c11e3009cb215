#pragma once
// Element types a KV cache can hold, and their sizes.
#include <cstddef>
#include <string>
#include <string_view>

namespace kvscope {

// int4: q4_0-style blocks of 32 elements along head_dim (kernels/formats/int4_format.hpp).
enum class KvDtype { f32, f16, bf16, int8, int4 };

// Bytes of one stored K or V element (int8 scales are counted separately). int4 packs two
// elements per byte plus group scales: use kv_row_bytes.
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
    case KvDtype::int4:
      return 0;
  }
  return 0;
}

// int4 groups: 32 elements, 16 bytes of nibbles and one f16 scale (18 bytes, q4_0's block).
inline constexpr std::size_t kInt4Group = 32;
inline constexpr std::size_t kInt4GroupBytes = 18;
constexpr std::size_t int4_groups(std::size_t head_dim) {
  return (head_dim + kInt4Group - 1) / kInt4Group;
}

// Bytes of one stored row of head_dim elements in the K or V block. int4 rows hold their
// group scales inline; int8 row scales live beside the block (kv_has_scales).
constexpr std::size_t kv_row_bytes(KvDtype t, std::size_t head_dim) {
  return t == KvDtype::int4 ? int4_groups(head_dim) * kInt4GroupBytes
                            : head_dim * kv_element_bytes(t);
}

// Of those, or of the f32 scale beside them, the bytes that are scales: int8 one f32 per row,
// int4 one f16 per group. The rest are element bytes (nibbles for int4).
constexpr std::size_t kv_row_scale_bytes(KvDtype t, std::size_t head_dim) {
  if (t == KvDtype::int8) return sizeof(float);
  if (t == KvDtype::int4) return int4_groups(head_dim) * 2;
  return 0;
}

// int8 caches keep one f32 scale per (token, kv head) beside the rows, for K and for V.
constexpr bool kv_has_scales(KvDtype t) { return t == KvDtype::int8; }

std::string_view to_string(KvDtype t);

// Parses "f32", "f16", "bf16", "int8" or "int4"; throws std::invalid_argument naming the value.
KvDtype parse_kv_dtype(std::string_view name);

// The element types of a cache's keys and of its values, which may differ (llama.cpp's
// -ctk/-ctv). Converts from one KvDtype (both the same).
struct KvTypes {
  KvDtype k = KvDtype::f32;
  KvDtype v = KvDtype::f32;
  constexpr KvTypes() = default;
  constexpr KvTypes(KvDtype both) : k(both), v(both) {}  // NOLINT: implicit by design
  constexpr KvTypes(KvDtype k_type, KvDtype v_type) : k(k_type), v(v_type) {}
  constexpr bool same() const { return k == v; }
  constexpr bool operator==(const KvTypes&) const = default;
};

// "int8" when both are int8, "int8:f16" for int8 keys and f16 values.
std::string to_string(KvTypes t);

// Parses "T" (both) or "K:V"; throws std::invalid_argument naming the value.
KvTypes parse_kv_types(std::string_view name);

}  // namespace kvscope
