#pragma once
// The KV cache of one decoder layer: contiguous per kv head, 64-byte aligned.
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "engine/kv_page_pool.hpp"
#include "engine/memory.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/kv_view.hpp"

namespace kvscope {

class LayerConfig;

// Contiguous: for every kv head, one K block [capacity × head_dim] and one V block, rows in
// position order, allocated up front. Paged: pages of the pool's page_tokens tokens, taken from
// a pool (shared by the sequences of a batch) as tokens arrive and given back by clear() and
// the destructor; capacity() then only bounds the page table. Keys of types.k, values of
// types.v (a single KvDtype sets both). int8 rows carry one f32 scale each, int4 rows their
// group scales. See KvView for both layouts.
class KvCache {
 public:
  KvCache(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity, KvTypes types);
  KvCache(const LayerConfig& config, KvTypes types);
  // Paged, from `pool` (whose geometry must have this shape and types, else
  // std::invalid_argument).
  KvCache(std::size_t n_kv_heads, std::size_t head_dim, std::size_t capacity, KvTypes types,
          std::shared_ptr<KvPagePool> pool);
  KvCache(const LayerConfig& config, KvTypes types, std::shared_ptr<KvPagePool> pool);

  std::size_t size() const { return size_; }  // tokens stored
  std::size_t capacity() const { return capacity_; }
  std::size_t n_kv_heads() const { return n_kv_heads_; }
  std::size_t head_dim() const { return head_dim_; }
  KvTypes types() const { return types_; }
  std::size_t bytes() const;  // allocated bytes, K + V + scales (paged: the pages held)
  bool paged() const { return pages_.pool() != nullptr; }
  std::size_t page_tokens() const { return paged() ? pages_.pool()->geometry().page_tokens : 0; }
  // The memory the cache's bytes lie in (one region per buffer or page), e.g. to flush it.
  std::vector<std::pair<const std::byte*, std::size_t>> memory_regions() const;

  // Appends n tokens; k and v are [n × n_kv_heads × head_dim] f32, encoded to dtype() on
  // the best SIMD unit (the scalar reference's bytes; kernels/kv_encode.hpp), the tokens split
  // over `threads` where there are enough of them (a prefill's).
  // Throws std::length_error if size() + n > capacity(): nothing is stored then, and
  // the tokens already in the cache stay as they were (likewise std::bad_alloc when a paged
  // cache's pool cannot grow).
  void append(const float* k, const float* v, std::size_t n, int threads = 1);

  // A sliding-window cache: appends n tokens to a ring of capacity() rows, each overwriting
  // the oldest row once the ring is full, so it keeps the last capacity() tokens. Rows are
  // then not in position order; attention over them does not depend on the order (RoPE was
  // applied at each key's true position). size() stops growing at capacity().
  void append_ring(const float* k, const float* v, std::size_t n, int threads = 1);

  // A second cache with the same shape and the same stored bytes (a deep copy: a cold
  // measurement cycles through such copies; a paged one takes its pages from the same pool).
  KvCache clone() const;

  // Forgets the stored tokens (capacity stays; a paged cache gives its pages back).
  void clear() {
    size_ = written_ = 0;
    pages_.release();
  }

  KvView view() const;

 private:
  std::size_t n_kv_heads_, head_dim_, capacity_;
  KvTypes types_;
  std::size_t k_head_stride_bytes_, v_head_stride_bytes_;
  AlignedBuffer k_, v_, k_scale_, v_scale_;
  std::size_t size_ = 0;
  std::size_t written_ = 0;  // tokens ever appended: the ring's next row is written_ % capacity_
  KvPages pages_;            // paged only: rows [i·page_tokens, (i+1)·page_tokens) in page i

  // Encodes tokens [0, n) of k, v [n × n_kv_heads × head_dim] into rows (first + i) %
  // capacity() of every kv head; n ≤ capacity(), so no row is written twice.
  void store(const float* k, const float* v, std::size_t n, std::size_t first, int threads);
};

}  // namespace kvscope
