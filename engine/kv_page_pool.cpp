#include "engine/kv_page_pool.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"

namespace kvscope {

KvPageGeometry::KvPageGeometry(std::size_t n_kv_heads, std::size_t head_dim,
                               std::size_t page_tokens, KvTypes types)
    : n_kv_heads(n_kv_heads), head_dim(head_dim), page_tokens(page_tokens), types(types) {
  if (n_kv_heads == 0 || head_dim == 0 || page_tokens == 0) {
    throw std::invalid_argument(
        "KV page sizes must be at least 1 (kv heads " + std::to_string(n_kv_heads) + ", head_dim " +
        std::to_string(head_dim) + ", tokens per page " + std::to_string(page_tokens) + ")");
  }
  const auto part = [&](std::uint64_t bytes_per_token) {
    return round_up_to_cache_line(checked_mul(page_tokens, bytes_per_token, "KV page"));
  };
  // One block per head: its K rows, V rows, then int8 scales (KvView's paged layout).
  std::uint64_t head = part(kv_row_bytes(types.k, head_dim));
  v_offset = head;
  head = checked_add(head, part(kv_row_bytes(types.v, head_dim)), "KV page");
  if (kv_has_scales(types.k)) {
    k_scale_offset = head;
    head = checked_add(head, part(sizeof(float)), "KV page");
  }
  if (kv_has_scales(types.v)) {
    v_scale_offset = head;
    head = checked_add(head, part(sizeof(float)), "KV page");
  }
  k_head_stride = v_head_stride = head;
  page_bytes = checked_mul(n_kv_heads, head, "KV page");
}

KvPagePool::KvPagePool(const KvPageGeometry& geometry)
    : geometry_(geometry),
      pages_per_slab_(std::max<std::size_t>(1, (std::size_t{4} << 20) / geometry.page_bytes)) {}

std::byte* KvPagePool::take() {
  const std::lock_guard lock(mutex_);
  if (free_.empty()) {
    const std::size_t n = pages_per_slab_;
    slabs_.emplace_back(checked_mul(n, geometry_.page_bytes, "KV page slab"), "KV cache pages");
    std::byte* base = slabs_.back().data();
    const std::size_t first = free_.size();
    for (std::size_t i = 0; i < n; ++i) free_.push_back(base + i * geometry_.page_bytes);
    std::shuffle(free_.begin() + first, free_.end(), std::mt19937_64(slabs_.size()));
  }
  std::byte* page = free_.back();
  free_.pop_back();
  ++in_use_;
  return page;
}

void KvPagePool::give_back(std::byte* page) {
  const std::lock_guard lock(mutex_);
  free_.push_back(page);
  --in_use_;
}

std::size_t KvPagePool::pages_in_use() const {
  const std::lock_guard lock(mutex_);
  return in_use_;
}

std::size_t KvPagePool::bytes_allocated() const {
  const std::lock_guard lock(mutex_);
  return slabs_.size() * pages_per_slab_ * geometry_.page_bytes;
}

}  // namespace kvscope
