#pragma once
// A read-only view of one layer's KV cache, as the attention kernels see it.
#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.hpp"

namespace kvscope {

// Layout: for every kv head h, one K block [capacity × k row] starting at
// k + h * k_head_stride_bytes (64-byte aligned), rows in position order; V likewise with its
// own type and stride. K and V types may differ (k_dtype, v_dtype).
// int8 keys carry scales k_scale[h * capacity + pos] (values v_scale): element = q * scale.
// int4 rows hold their group scales inline (kernels/formats/int4_format.hpp).
struct KvView {
  KvDtype k_dtype = KvDtype::f32;
  KvDtype v_dtype = KvDtype::f32;
  std::size_t n_kv_heads = 0;
  std::size_t head_dim = 0;
  std::size_t capacity = 0;
  std::size_t k_head_stride_bytes = 0;
  std::size_t v_head_stride_bytes = 0;
  const std::byte* k = nullptr;
  const std::byte* v = nullptr;
  const float* k_scale = nullptr;  // int8 keys only: [n_kv_heads × capacity]
  const float* v_scale = nullptr;  // int8 values only

  KvTypes types() const { return {k_dtype, v_dtype}; }
  std::size_t k_row_bytes() const { return kv_row_bytes(k_dtype, head_dim); }
  std::size_t v_row_bytes() const { return kv_row_bytes(v_dtype, head_dim); }
  const std::byte* k_row(std::size_t kv_head, std::size_t pos) const {
    return k + kv_head * k_head_stride_bytes + pos * k_row_bytes();
  }
  const std::byte* v_row(std::size_t kv_head, std::size_t pos) const {
    return v + kv_head * v_head_stride_bytes + pos * v_row_bytes();
  }
  float k_row_scale(std::size_t kv_head, std::size_t pos) const {
    return k_scale ? k_scale[kv_head * capacity + pos] : 1.0f;
  }
  float v_row_scale(std::size_t kv_head, std::size_t pos) const {
    return v_scale ? v_scale[kv_head * capacity + pos] : 1.0f;
  }
};

}  // namespace kvscope
