#include "engine/kv_cache.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"
#include "engine/layer_config.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {
namespace {

std::size_t checked_head_stride(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity,
                                KvDtype dtype) {
  if (n_kv_heads == 0 || head_dim == 0 || capacity == 0) {
    throw std::invalid_argument(
        "KV cache sizes must be at least 1 (kv heads " + std::to_string(n_kv_heads) +
        ", head_dim " + std::to_string(head_dim) + ", capacity " + std::to_string(capacity) + ")");
  }
  const std::uint64_t block = checked_mul(checked_mul(capacity, head_dim, "KV cache block"),
                                          kv_element_bytes(dtype), "KV cache block");
  const std::uint64_t stride = round_up_to_cache_line(block);
  if (stride < block) throw std::overflow_error("KV cache block overflows 64 bits");
  // K and V each take n_kv_heads blocks: check the whole cache fits before allocating any.
  require_memory(checked_mul(checked_mul(stride, n_kv_heads, "KV cache"), 2, "KV cache"),
                 "KV cache");
  return stride;
}

}  // namespace

KvCache::KvCache(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity, KvDtype dtype)
    : n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      capacity_(capacity),
      dtype_(dtype),
      head_stride_bytes_(checked_head_stride(n_kv_heads, head_dim, capacity, dtype)),
      k_(head_stride_bytes_ * n_kv_heads, "KV cache K"),
      v_(head_stride_bytes_ * n_kv_heads, "KV cache V") {
  if (kv_has_scales(dtype)) {
    k_scale_ = AlignedBuffer(n_kv_heads * capacity * sizeof(float), "KV cache K scales");
    v_scale_ = AlignedBuffer(n_kv_heads * capacity * sizeof(float), "KV cache V scales");
  }
}

KvCache::KvCache(const LayerConfig& config, KvDtype dtype)
    : KvCache(config.n_kv_heads(), config.head_dim(), config.cache_rows(), dtype) {}

KvCache KvCache::clone() const {
  KvCache copy(n_kv_heads_, head_dim_, capacity_, dtype_);
  std::memcpy(copy.k_.data(), k_.data(), k_.bytes());
  std::memcpy(copy.v_.data(), v_.data(), v_.bytes());
  if (k_scale_.bytes() > 0) {
    std::memcpy(copy.k_scale_.data(), k_scale_.data(), k_scale_.bytes());
    std::memcpy(copy.v_scale_.data(), v_scale_.data(), v_scale_.bytes());
  }
  copy.size_ = size_;
  copy.written_ = written_;
  return copy;
}

std::size_t KvCache::bytes() const {
  return k_.bytes() + v_.bytes() + k_scale_.bytes() + v_scale_.bytes();
}

void KvCache::append(const float* k, const float* v, std::size_t n) {
  if (n > capacity_ - size_) {
    throw std::length_error("KV cache full: it holds " + std::to_string(size_) + " of " +
                            std::to_string(capacity_) + " tokens, cannot append " +
                            std::to_string(n) + " more");
  }
  for (std::size_t i = 0; i < n; ++i) store(k, v, i, size_ + i);
  size_ += n;
  written_ = size_;
}

void KvCache::append_ring(const float* k, const float* v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i, ++written_) store(k, v, i, written_ % capacity_);
  size_ = written_ < capacity_ ? written_ : capacity_;
}

void KvCache::store(const float* k, const float* v, std::size_t i, std::size_t slot) {
  const std::size_t row_bytes = head_dim_ * kv_element_bytes(dtype_);
  for (std::size_t h = 0; h < n_kv_heads_; ++h) {
    const std::size_t src = (i * n_kv_heads_ + h) * head_dim_;
    const std::size_t dst = h * head_stride_bytes_ + slot * row_bytes;
    const float k_scale = encode_row_ref(dtype_, k + src, head_dim_, k_.data() + dst);
    const float v_scale = encode_row_ref(dtype_, v + src, head_dim_, v_.data() + dst);
    if (kv_has_scales(dtype_)) {
      k_scale_.as<float>()[h * capacity_ + slot] = k_scale;
      v_scale_.as<float>()[h * capacity_ + slot] = v_scale;
    }
  }
}

KvView KvCache::view() const {
  KvView view;
  view.dtype = dtype_;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  view.capacity = capacity_;
  view.head_stride_bytes = head_stride_bytes_;
  view.k = k_.data();
  view.v = v_.data();
  if (kv_has_scales(dtype_)) {
    view.k_scale = k_scale_.as<float>();
    view.v_scale = v_scale_.as<float>();
  }
  return view;
}

}  // namespace kvscope
