#pragma once
// A read-only view of one layer's KV cache, as the attention kernels see it.
#include <bit>
#include <cstddef>
#include <cstdint>

#include "kernels/isa_neutral.hpp"
#include "kernels/kv_dtype.hpp"

namespace kvscope {

// A key block's K or V rows as kernels that load 16 rows at a time address them (the AMX
// tiles): one base per chunk of 16 rows, each chunk consecutive in memory. In a contiguous
// cache or inside one page the chunks follow each other; across pages of a multiple of 16
// tokens each chunk lies in its own page (KvView::chunked_block_rows).
struct BlockRows {
  static constexpr std::size_t kChunkRows = 16;
  static constexpr std::size_t kMaxChunks = 8;  // blocks of up to 128 rows
  const std::byte* chunk[kMaxChunks] = {};
  std::size_t row_bytes = 0;

  KVSCOPE_ISA_NEUTRAL const std::byte* row(std::size_t r) const {
    return chunk[r / kChunkRows] + r % kChunkRows * row_bytes;
  }
  // Whether the first `rows` rows are consecutive in memory (one page, or a contiguous cache).
  KVSCOPE_ISA_NEUTRAL bool consecutive(std::size_t rows) const {
    for (std::size_t c = 1; c * kChunkRows < rows; ++c) {
      if (chunk[c] != chunk[c - 1] + kChunkRows * row_bytes) return false;
    }
    return true;
  }
};

// Two layouts; kernels reach rows only through k_row/v_row/k_scales/v_scales and cut their
// key blocks with block_rows, so both read the same way.
//
// Contiguous (pages == nullptr): for every kv head h, one K block [capacity × k row] starting
// at k + h * k_head_stride_bytes (64-byte aligned), rows in position order; V likewise with
// its own type and stride. int8 keys carry scales k_scale[h * capacity + pos] (values
// v_scale): element = q * scale.
//
// Paged (vLLM's PagedAttention): position pos lives in page pages[pos / page_tokens], row
// pos % page_tokens. A page holds page_tokens rows of every kv head, a block per head: head
// h's at page + h * k_head_stride_bytes (v_head_stride_bytes is the same), with its K rows
// first, its V rows at v_offset in the block, int8 scales as floats at k_scale_offset
// (v_scale_offset). A head's keys and values of a page are then one run of memory, and a
// page's heads one after another: read a page at a time, a stream the hardware prefetchers
// follow alone (kv_page_pool.hpp; measured in attention_decode.hpp's decode_with).
//
// K and V types may differ (k_dtype, v_dtype). int4 rows hold their group scales inline
// (kernels/formats/int4_format.hpp).
struct KvView {
  KvDtype k_dtype = KvDtype::f32;
  KvDtype v_dtype = KvDtype::f32;
  std::size_t n_kv_heads = 0;
  std::size_t head_dim = 0;
  std::size_t capacity = 0;
  std::size_t k_head_stride_bytes = 0;  // contiguous: per head; paged: a head's block in a page
  std::size_t v_head_stride_bytes = 0;
  const std::byte* k = nullptr;
  const std::byte* v = nullptr;
  const float* k_scale = nullptr;  // contiguous int8 keys only: [n_kv_heads × capacity]
  const float* v_scale = nullptr;  // contiguous int8 values only
  // Paged layout only:
  std::size_t page_tokens = 0;
  const std::byte* const* pages = nullptr;
  std::size_t v_offset = 0;
  std::size_t k_scale_offset = 0;  // 0 when keys carry no per-row scales
  std::size_t v_scale_offset = 0;

  KVSCOPE_ISA_NEUTRAL KvTypes types() const { return {k_dtype, v_dtype}; }
  KVSCOPE_ISA_NEUTRAL bool paged() const { return pages != nullptr; }
  KVSCOPE_ISA_NEUTRAL std::size_t k_row_bytes() const { return kv_row_bytes(k_dtype, head_dim); }
  KVSCOPE_ISA_NEUTRAL std::size_t v_row_bytes() const { return kv_row_bytes(v_dtype, head_dim); }
  KVSCOPE_ISA_NEUTRAL const std::byte* k_row(std::size_t kv_head, std::size_t pos) const {
    if (!paged()) return k + kv_head * k_head_stride_bytes + pos * k_row_bytes();
    return pages[page_of(pos)] + kv_head * k_head_stride_bytes + row_in_page(pos) * k_row_bytes();
  }
  KVSCOPE_ISA_NEUTRAL const std::byte* v_row(std::size_t kv_head, std::size_t pos) const {
    if (!paged()) return v + kv_head * v_head_stride_bytes + pos * v_row_bytes();
    return pages[page_of(pos)] + v_offset + kv_head * v_head_stride_bytes +
           row_in_page(pos) * v_row_bytes();
  }
  // Paged: the page of position pos, and its row there. Pages of a power of two tokens (all
  // that serving engines use) take a shift and a mask: a division here ran several times per
  // block and cost MHA decode over pages of 16 a fifth of its time (Intel Xeon, int8).
  KVSCOPE_ISA_NEUTRAL std::size_t page_of(std::size_t pos) const {
    return std::has_single_bit(page_tokens) ? pos >> std::countr_zero(page_tokens)
                                            : pos / page_tokens;
  }
  KVSCOPE_ISA_NEUTRAL std::size_t row_in_page(std::size_t pos) const {
    return std::has_single_bit(page_tokens) ? pos & (page_tokens - 1) : pos % page_tokens;
  }
  // The per-row scales of kv head kv_head from pos on, contiguous up to block_rows(pos, …);
  // nullptr for a type without them.
  KVSCOPE_ISA_NEUTRAL const float* k_scales(std::size_t kv_head, std::size_t pos) const {
    if (!kv_has_scales(k_dtype)) return nullptr;
    if (!paged()) return k_scale + kv_head * capacity + pos;
    return page_scales(k_scale_offset, kv_head, pos);
  }
  KVSCOPE_ISA_NEUTRAL const float* v_scales(std::size_t kv_head, std::size_t pos) const {
    if (!kv_has_scales(v_dtype)) return nullptr;
    if (!paged()) return v_scale + kv_head * capacity + pos;
    return page_scales(v_scale_offset, kv_head, pos);
  }
  KVSCOPE_ISA_NEUTRAL float k_row_scale(std::size_t kv_head, std::size_t pos) const {
    const float* s = k_scales(kv_head, pos);
    return s ? *s : 1.0f;
  }
  KVSCOPE_ISA_NEUTRAL float v_row_scale(std::size_t kv_head, std::size_t pos) const {
    const float* s = v_scales(kv_head, pos);
    return s ? *s : 1.0f;
  }
  // Whether rows [pos, pos + rows) run on past the end of pos's page (never in a contiguous
  // cache): their block is then gathered or read chunk by chunk, page by page.
  KVSCOPE_ISA_NEUTRAL bool spans_pages(std::size_t pos, std::size_t rows) const {
    return paged() && row_in_page(pos) + rows > page_tokens;
  }
  // Rows of the key block that starts at b0 in a range ending at `end`: at most max_rows,
  // and never past the end of b0's page, so a block's rows are consecutive in memory.
  // 0 when b0 ≥ end.
  KVSCOPE_ISA_NEUTRAL std::size_t block_rows(std::size_t b0, std::size_t end,
                                             std::size_t max_rows) const {
    if (b0 >= end) return 0;
    std::size_t n = end - b0 < max_rows ? end - b0 : max_rows;
    if (paged()) {
      const std::size_t to_page_end = page_tokens - row_in_page(b0);
      if (to_page_end < n) n = to_page_end;
    }
    return n;
  }
  // As block_rows, but for kernels that address a block by BlockRows: the block may run on
  // across pages while each 16-row chunk stays in one page (pages of a multiple of 16 tokens,
  // b0 on a chunk boundary of its page). Over pages of 16 the AMX kernels then work in
  // blocks of 64 keys as over a contiguous cache, not of 16 (2-3x slower: the per-block
  // softmax, transposes and accumulator updates four times as often).
  KVSCOPE_ISA_NEUTRAL std::size_t chunked_block_rows(std::size_t b0, std::size_t end,
                                                     std::size_t max_rows) const {
    if (!paged() || page_tokens % BlockRows::kChunkRows != 0 ||
        row_in_page(b0) % BlockRows::kChunkRows != 0) {
      return block_rows(b0, end, max_rows);
    }
    if (b0 >= end) return 0;
    return end - b0 < max_rows ? end - b0 : max_rows;
  }
  // Rows [b0, b0 + nb) of kv head kv_head (nb at most 128, from chunked_block_rows) by chunk.
  KVSCOPE_ISA_NEUTRAL BlockRows k_block(std::size_t kv_head, std::size_t b0, std::size_t nb) const {
    BlockRows rows{.row_bytes = k_row_bytes()};
    for (std::size_t c = 0; c * BlockRows::kChunkRows < nb; ++c)
      rows.chunk[c] = k_row(kv_head, b0 + c * BlockRows::kChunkRows);
    return rows;
  }
  KVSCOPE_ISA_NEUTRAL BlockRows v_block(std::size_t kv_head, std::size_t b0, std::size_t nb) const {
    BlockRows rows{.row_bytes = v_row_bytes()};
    for (std::size_t c = 0; c * BlockRows::kChunkRows < nb; ++c)
      rows.chunk[c] = v_row(kv_head, b0 + c * BlockRows::kChunkRows);
    return rows;
  }

 private:
  KVSCOPE_ISA_NEUTRAL const float* page_scales(std::size_t offset, std::size_t kv_head,
                                               std::size_t pos) const {
    return reinterpret_cast<const float*>(pages[page_of(pos)] + kv_head * k_head_stride_bytes +
                                          offset) +
           row_in_page(pos);
  }
};

}  // namespace kvscope
