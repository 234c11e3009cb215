#include "engine/kv_cache.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"
#include "engine/layer_config.hpp"
#include "kernels/ref/kv_row_ref.hpp"

namespace kvscope {
namespace {

// Bytes from one kv head's block to the next for rows of `dtype`, after checking that the
// whole cache (K and V) fits.
std::size_t checked_head_stride(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity,
                                KvTypes types, KvDtype dtype) {
  if (n_kv_heads == 0 || head_dim == 0 || capacity == 0) {
    throw std::invalid_argument(
        "KV cache sizes must be at least 1 (kv heads " + std::to_string(n_kv_heads) +
        ", head_dim " + std::to_string(head_dim) + ", capacity " + std::to_string(capacity) + ")");
  }
  const auto stride_of = [&](KvDtype t) {
    const std::uint64_t block = checked_mul(capacity, kv_row_bytes(t, head_dim), "KV cache block");
    const std::uint64_t stride = round_up_to_cache_line(block);
    if (stride < block) throw std::overflow_error("KV cache block overflows 64 bits");
    return stride;
  };
  // K and V each take n_kv_heads blocks: check the whole cache fits before allocating any.
  require_memory(checked_add(checked_mul(stride_of(types.k), n_kv_heads, "KV cache"),
                             checked_mul(stride_of(types.v), n_kv_heads, "KV cache"), "KV cache"),
                 "KV cache");
  return stride_of(dtype);
}

}  // namespace

KvCache::KvCache(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity, KvTypes types)
    : n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      capacity_(capacity),
      types_(types),
      k_head_stride_bytes_(checked_head_stride(n_kv_heads, head_dim, capacity, types, types.k)),
      v_head_stride_bytes_(checked_head_stride(n_kv_heads, head_dim, capacity, types, types.v)),
      k_(k_head_stride_bytes_ * n_kv_heads, "KV cache K"),
      v_(v_head_stride_bytes_ * n_kv_heads, "KV cache V") {
  if (kv_has_scales(types.k)) {
    k_scale_ = AlignedBuffer(n_kv_heads * capacity * sizeof(float), "KV cache K scales");
  }
  if (kv_has_scales(types.v)) {
    v_scale_ = AlignedBuffer(n_kv_heads * capacity * sizeof(float), "KV cache V scales");
  }
}

KvCache::KvCache(const LayerConfig& config, KvTypes types)
    : KvCache(config.n_kv_heads(), config.head_dim(), config.cache_rows(), types) {}

KvCache KvCache::clone() const {
  KvCache copy(n_kv_heads_, head_dim_, capacity_, types_);
  std::memcpy(copy.k_.data(), k_.data(), k_.bytes());
  std::memcpy(copy.v_.data(), v_.data(), v_.bytes());
  if (k_scale_.bytes() > 0) std::memcpy(copy.k_scale_.data(), k_scale_.data(), k_scale_.bytes());
  if (v_scale_.bytes() > 0) std::memcpy(copy.v_scale_.data(), v_scale_.data(), v_scale_.bytes());
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
  const std::size_t k_row_bytes = kv_row_bytes(types_.k, head_dim_);
  const std::size_t v_row_bytes = kv_row_bytes(types_.v, head_dim_);
  for (std::size_t h = 0; h < n_kv_heads_; ++h) {
    const std::size_t src = (i * n_kv_heads_ + h) * head_dim_;
    std::byte* k_dst = k_.data() + h * k_head_stride_bytes_ + slot * k_row_bytes;
    std::byte* v_dst = v_.data() + h * v_head_stride_bytes_ + slot * v_row_bytes;
    const float k_scale = encode_row_ref(types_.k, k + src, head_dim_, k_dst);
    const float v_scale = encode_row_ref(types_.v, v + src, head_dim_, v_dst);
    if (kv_has_scales(types_.k)) k_scale_.as<float>()[h * capacity_ + slot] = k_scale;
    if (kv_has_scales(types_.v)) v_scale_.as<float>()[h * capacity_ + slot] = v_scale;
  }
}

KvView KvCache::view() const {
  KvView view;
  view.k_dtype = types_.k;
  view.v_dtype = types_.v;
  view.n_kv_heads = n_kv_heads_;
  view.head_dim = head_dim_;
  view.capacity = capacity_;
  view.k_head_stride_bytes = k_head_stride_bytes_;
  view.v_head_stride_bytes = v_head_stride_bytes_;
  view.k = k_.data();
  view.v = v_.data();
  if (kv_has_scales(types_.k)) view.k_scale = k_scale_.as<float>();
  if (kv_has_scales(types_.v)) view.v_scale = v_scale_.as<float>();
  return view;
}

}  // namespace kvscope
