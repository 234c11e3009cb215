#pragma once
// A read-only view of one layer's KV cache, as the attention kernels see it.
#include <cstddef>
#include <cstdint>

#include "kernels/kv_dtype.hpp"

namespace kvscope {

// Layout: for every kv head h, one K block [capacity × head_dim] starting at
// k + h * head_stride_bytes (64-byte aligned), rows in position order; V likewise.
// int8 caches carry scales k_scale[h * capacity + pos] (and v_scale): element = q * scale.
struct KvView {
  KvDtype dtype = KvDtype::f32;
  std::size_t n_kv_heads = 0;
  std::size_t head_dim = 0;
  std::size_t capacity = 0;
  std::size_t head_stride_bytes = 0;
  const std::byte* k = nullptr;
  const std::byte* v = nullptr;
  const float* k_scale = nullptr;  // int8 only: [n_kv_heads × capacity]
  const float* v_scale = nullptr;

  std::size_t row_bytes() const { return head_dim * kv_element_bytes(dtype); }
  const std::byte* k_row(std::size_t kv_head, std::size_t pos) const {
    return k + kv_head * head_stride_bytes + pos * row_bytes();
  }
  const std::byte* v_row(std::size_t kv_head, std::size_t pos) const {
    return v + kv_head * head_stride_bytes + pos * row_bytes();
  }
  float k_row_scale(std::size_t kv_head, std::size_t pos) const {
    return k_scale ? k_scale[kv_head * capacity + pos] : 1.0f;
  }
  float v_row_scale(std::size_t kv_head, std::size_t pos) const {
    return v_scale ? v_scale[kv_head * capacity + pos] : 1.0f;
  }
};

}  // namespace kvscope
