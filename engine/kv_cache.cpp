#include "engine/kv_cache.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"
#include "engine/layer_config.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_encode.hpp"

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

KvCache::KvCache(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity, KvTypes types,
                 std::shared_ptr<KvPagePool> pool)
    : n_kv_heads_(n_kv_heads),
      head_dim_(head_dim),
      capacity_(capacity),
      types_(types),
      k_head_stride_bytes_(0),
      v_head_stride_bytes_(0),
      pages_(std::move(pool)) {
  if (!paged()) throw std::invalid_argument("a paged KV cache needs a page pool");
  const KvPageGeometry& g = pages_.pool()->geometry();
  if (capacity == 0) throw std::invalid_argument("KV cache capacity must be at least 1");
  if (g.n_kv_heads != n_kv_heads || g.head_dim != head_dim || g.types != types) {
    throw std::invalid_argument("KV page pool made for " + std::to_string(g.n_kv_heads) +
                                " kv heads × head_dim " + std::to_string(g.head_dim) + " " +
                                to_string(g.types) + ", not " + std::to_string(n_kv_heads) + " × " +
                                std::to_string(head_dim) + " " + to_string(types));
  }
  k_head_stride_bytes_ = g.k_head_stride;
  v_head_stride_bytes_ = g.v_head_stride;
  pages_.reserve((capacity + g.page_tokens - 1) / g.page_tokens);
}

KvCache::KvCache(const LayerConfig& config, KvTypes types, std::shared_ptr<KvPagePool> pool)
    : KvCache(config.n_kv_heads(), config.head_dim(), config.cache_rows(), types, std::move(pool)) {
}

KvCache KvCache::clone() const {
  if (paged()) {
    KvCache copy(n_kv_heads_, head_dim_, capacity_, types_, pages_.pool());
    copy.pages_.hold_rows(pages_.size() * page_tokens());
    for (std::size_t i = 0; i < pages_.size(); ++i) {
      std::memcpy(copy.pages_[i], pages_[i], pages_.pool()->geometry().page_bytes);
    }
    copy.size_ = size_;
    copy.written_ = written_;
    return copy;
  }
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
  if (paged()) return pages_.size() * pages_.pool()->geometry().page_bytes;
  return k_.bytes() + v_.bytes() + k_scale_.bytes() + v_scale_.bytes();
}

std::vector<std::pair<const std::byte*, std::size_t>> KvCache::memory_regions() const {
  std::vector<std::pair<const std::byte*, std::size_t>> regions;
  if (paged()) {
    for (std::size_t i = 0; i < pages_.size(); ++i)
      regions.emplace_back(pages_[i], pages_.pool()->geometry().page_bytes);
    return regions;
  }
  for (const AlignedBuffer* b : {&k_, &v_, &k_scale_, &v_scale_}) {
    if (b->bytes() > 0) regions.emplace_back(b->data(), b->bytes());
  }
  return regions;
}

void KvCache::append(const float* k, const float* v, std::size_t n, int threads) {
  if (n > capacity_ - size_) {
    throw std::length_error("KV cache full: it holds " + std::to_string(size_) + " of " +
                            std::to_string(capacity_) + " tokens, cannot append " +
                            std::to_string(n) + " more");
  }
  if (paged()) pages_.hold_rows(size_ + n);
  store(k, v, n, size_, threads);
  size_ += n;
  written_ = size_;
}

void KvCache::append_ring(const float* k, const float* v, std::size_t n, int threads) {
  if (paged()) pages_.hold_rows(written_ + n < capacity_ ? written_ + n : capacity_);
  // More tokens than rows: only the last capacity() of them stay.
  const std::size_t skipped = n > capacity_ ? n - capacity_ : 0;
  const std::size_t width = n_kv_heads_ * head_dim_;
  store(k + skipped * width, v + skipped * width, n - skipped, written_ + skipped, threads);
  written_ += n;
  size_ = written_ < capacity_ ? written_ : capacity_;
}

void KvCache::store(const float* k, const float* v, std::size_t n, std::size_t first, int threads) {
  // The view's row and scale addresses, for either layout, made writable: they point into
  // this cache's own buffers or pages.
  const KvView place = view();
  static const EncodeRowFn encode = encode_row_for(best_isa());
  // Threads for a prefill's rows; a decode step's one token (64 rows at 32 kv heads, about
  // 1 µs of int8 encoding on one thread) stays on the calling thread.
  constexpr std::size_t kRowsPerRegion = 256;
  const bool split = threads > 1 && n * n_kv_heads_ * 2 >= kRowsPerRegion;
#pragma omp parallel for num_threads(threads) if (split) schedule(static)
  for (long token = 0; token < static_cast<long>(n); ++token) {
    const auto i = static_cast<std::size_t>(token);
    const std::size_t slot = (first + i) % capacity_;
    for (std::size_t h = 0; h < n_kv_heads_; ++h) {
      const std::size_t src = (i * n_kv_heads_ + h) * head_dim_;
      auto* k_dst = const_cast<std::byte*>(place.k_row(h, slot));
      auto* v_dst = const_cast<std::byte*>(place.v_row(h, slot));
      const float k_scale = encode(types_.k, k + src, head_dim_, k_dst);
      const float v_scale = encode(types_.v, v + src, head_dim_, v_dst);
      if (kv_has_scales(types_.k)) *const_cast<float*>(place.k_scales(h, slot)) = k_scale;
      if (kv_has_scales(types_.v)) *const_cast<float*>(place.v_scales(h, slot)) = v_scale;
    }
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
  if (paged()) {
    const KvPageGeometry& g = pages_.pool()->geometry();
    view.page_tokens = g.page_tokens;
    view.pages = pages_.table();
    view.v_offset = g.v_offset;
    view.k_scale_offset = g.k_scale_offset;
    view.v_scale_offset = g.v_scale_offset;
    return view;
  }
  view.k = k_.data();
  view.v = v_.data();
  if (kv_has_scales(types_.k)) view.k_scale = k_scale_.as<float>();
  if (kv_has_scales(types_.v)) view.v_scale = v_scale_.as<float>();
  return view;
}

}  // namespace kvscope
