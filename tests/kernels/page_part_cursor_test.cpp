// PagePartCursor (kernels/attention_decode.hpp): the parts of a paged cache in reading order —
// each page's heads in turn, a partial first and last page included — at the addresses the
// page table gives, and none for no heads.
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "kernels/attention_decode.hpp"

namespace kvscope::simd {
namespace {

constexpr std::size_t kPageTokens = 16, kHeads = 6, kPages = 5, kHeadDim = 64;

// A paged int8 view over addresses that are never read: page p's table entry out of order, so
// that a cursor stepping pages by address instead of by the table would go wrong.
struct FakePages {
  KvView kv;
  std::vector<const std::byte*> table;

  FakePages() {
    kv.k_dtype = kv.v_dtype = KvDtype::int8;
    kv.n_kv_heads = kHeads, kv.head_dim = kHeadDim, kv.capacity = kPages * kPageTokens;
    kv.page_tokens = kPageTokens;
    kv.v_offset = kPageTokens * kv.k_row_bytes();
    kv.k_scale_offset = kv.v_offset + kPageTokens * kv.v_row_bytes();
    kv.v_scale_offset = kv.k_scale_offset + kPageTokens * sizeof(float);
    kv.k_head_stride_bytes = kv.v_head_stride_bytes = kv.v_scale_offset + kPageTokens * 4;
    for (std::size_t p = 0; p < kPages; ++p)
      table.push_back(reinterpret_cast<const std::byte*>((kPages - p) << 30));
    kv.pages = table.data();
  }
};

TEST(PagePartCursor, VisitsEachPagesHeadsInTurnThroughTheTable) {
  const FakePages f;
  const std::size_t kvh0 = 2, heads = 3, t0 = 5, t1 = 70;  // partial first and last pages
  PagePartCursor cur(f.kv, kvh0, heads, t0, t1);
  std::size_t visited = 0;
  for (std::size_t b0 = t0; b0 < t1; b0 = (b0 / kPageTokens + 1) * kPageTokens) {
    const std::size_t rows = std::min((b0 / kPageTokens + 1) * kPageTokens, t1) - b0;
    for (std::size_t i = 0; i < heads; ++i, ++visited) {
      ASSERT_FALSE(cur.done());
      EXPECT_EQ(cur.head(), i);
      EXPECT_EQ(cur.first_key(), b0);
      EXPECT_EQ(cur.rows(), rows);
      const NextBlock part = cur.part();
      EXPECT_EQ(part.k, f.kv.k_row(kvh0 + i, b0));
      EXPECT_EQ(part.v, f.kv.v_row(kvh0 + i, b0));
      EXPECT_EQ(part.k_scale, f.kv.k_scales(kvh0 + i, b0));
      EXPECT_EQ(part.v_scale, f.kv.v_scales(kvh0 + i, b0));
      cur.advance();
    }
  }
  EXPECT_EQ(visited, 5u * heads);  // pages 0 to 4, the first and last partial
  EXPECT_TRUE(cur.done());
  EXPECT_EQ(cur.rows(), 0u);
  EXPECT_EQ(cur.part().k, nullptr);
}

TEST(PagePartCursor, NoHeadsNoParts) {
  const FakePages f;
  const PagePartCursor cur(f.kv, 0, 0, 0, 40);
  EXPECT_TRUE(cur.done());
  EXPECT_EQ(cur.rows(), 0u);
}

}  // namespace
}  // namespace kvscope::simd
