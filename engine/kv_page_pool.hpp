#pragma once
// The shared pool of a paged KV cache: fixed-size pages handed to sequences as they grow.
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/memory.hpp"
#include "kernels/kv_dtype.hpp"

namespace kvscope {

// Where the parts of one page lie (KvView's paged layout): a block per head, head h's at
// h * k_head_stride (v_head_stride is the same), holding its K rows, its V rows at v_offset,
// and int8 scales at the scale offsets; every part starts on a 64-byte line.
struct KvPageGeometry {
  std::size_t n_kv_heads = 0, head_dim = 0, page_tokens = 0;
  KvTypes types;
  std::size_t k_head_stride = 0, v_head_stride = 0;
  std::size_t v_offset = 0, k_scale_offset = 0, v_scale_offset = 0;
  std::size_t page_bytes = 0;

  // Throws std::invalid_argument for zero sizes, std::overflow_error for a page that does not
  // fit in 64 bits.
  KvPageGeometry(std::size_t n_kv_heads, std::size_t head_dim, std::size_t page_tokens,
                 KvTypes types);
};

// Pages of one geometry for the sequences of a layer. Memory is taken in slabs of about
// 4 MiB (at least one page) as pages are needed and kept until the pool goes; freed pages are
// reused. Each new slab's pages are handed out in a shuffled (seeded) order, so a sequence's
// pages are scattered as in a serving pool where many sequences grow at once: the measured
// cost of paging includes that, not only the table lookups. take() and give_back() may be
// called from several threads.
class KvPagePool {
 public:
  explicit KvPagePool(const KvPageGeometry& geometry);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvPageGeometry& geometry() const { return geometry_; }
  // A free page (its bytes are what the last user left). Throws std::bad_alloc (naming the
  // bytes) when a new slab cannot be had.
  std::byte* take();
  void give_back(std::byte* page);
  std::size_t pages_in_use() const;
  std::size_t bytes_allocated() const;  // all slabs

 private:
  KvPageGeometry geometry_;
  std::size_t pages_per_slab_;
  mutable std::mutex mutex_;
  std::vector<AlignedBuffer> slabs_;
  std::vector<std::byte*> free_;
  std::size_t in_use_ = 0;
};

// One sequence's page table: the pages it holds, in position order, given back to their pool
// when released or destroyed (moves hand the pages over).
class KvPages {
 public:
  KvPages() = default;
  explicit KvPages(std::shared_ptr<KvPagePool> pool) : pool_(std::move(pool)) {}
  ~KvPages() { release(); }
  KvPages(KvPages&& other) noexcept
      : pool_(std::move(other.pool_)), pages_(std::exchange(other.pages_, {})) {}
  KvPages& operator=(KvPages&& other) noexcept {
    if (this != &other) {
      release();
      pool_ = std::move(other.pool_);
      pages_ = std::exchange(other.pages_, {});
    }
    return *this;
  }

  const std::shared_ptr<KvPagePool>& pool() const { return pool_; }
  std::byte* const* table() const { return pages_.data(); }
  std::size_t size() const { return pages_.size(); }
  std::byte* operator[](std::size_t i) const { return pages_[i]; }
  void reserve(std::size_t pages) { pages_.reserve(pages); }
  // Takes pages from the pool until rows [0, rows) have one.
  void hold_rows(std::size_t rows) {
    while (pages_.size() * pool_->geometry().page_tokens < rows) pages_.push_back(pool_->take());
  }
  void release() {
    for (std::byte* page : pages_) pool_->give_back(page);
    pages_.clear();
  }

 private:
  std::shared_ptr<KvPagePool> pool_;
  std::vector<std::byte*> pages_;
};

}  // namespace kvscope
