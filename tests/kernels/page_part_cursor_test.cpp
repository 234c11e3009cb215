// PagePartCursor (kernels/attention_decode.hpp): the parts of a paged cache in reading order —
// each page's heads in turn, a partial first and last page included — at the addresses the
// page table gives, and none for no heads; parts of several pages (runs), whole pages but the
// last.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
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

TEST(PagePartCursor, PartsOfSeveralPagesRunWholePagesButTheLast) {
  const FakePages f;
  struct Part {
    std::size_t first_key;
    std::vector<std::size_t> runs;  // rows of each
  };
  struct Case {
    std::size_t pages, t0, t1;
    std::vector<Part> parts;
  };
  const Case cases[] = {
      // A page's tail ends its part; the range's end cuts the last.
      {2, 5, 70, {{5, {11}}, {16, {16, 16}}, {48, {16, 6}}}},
      {4, 0, 70, {{0, {16, 16, 16, 16}}, {64, {6}}}},
      {4, 16, 40, {{16, {16, 8}}}},
      {1, 0, 20, {{0, {16}}, {16, {4}}}},
  };
  const std::size_t kvh0 = 1, heads = 2;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.pages) + " pages a part over [" + std::to_string(c.t0) + ", " +
                 std::to_string(c.t1) + ")");
    PagePartCursor cur(f.kv, kvh0, heads, c.t0, c.t1, c.pages);
    for (const Part& part : c.parts) {
      for (std::size_t i = 0; i < heads; ++i) {
        ASSERT_FALSE(cur.done());
        EXPECT_EQ(cur.head(), i);
        EXPECT_EQ(cur.first_key(), part.first_key);
        ASSERT_EQ(cur.runs(), part.runs.size());
        std::size_t pos = part.first_key, rows = 0;
        for (std::size_t j = 0; j < part.runs.size(); ++j) {
          const NextBlock run = cur.run(j);
          EXPECT_EQ(run.rows, part.runs[j]);
          EXPECT_EQ(run.pos, pos);
          EXPECT_EQ(run.kvh, kvh0 + i);
          EXPECT_EQ(run.k, f.kv.k_row(kvh0 + i, pos));
          EXPECT_EQ(run.v, f.kv.v_row(kvh0 + i, pos));
          EXPECT_EQ(run.k_scale, f.kv.k_scales(kvh0 + i, pos));
          EXPECT_EQ(run.v_scale, f.kv.v_scales(kvh0 + i, pos));
          pos += part.runs[j], rows += part.runs[j];
        }
        EXPECT_EQ(cur.rows(), rows);
        EXPECT_EQ(cur.run(part.runs.size()).rows, 0u);  // none past the part's runs
        cur.advance();
      }
    }
    EXPECT_TRUE(cur.done());
    EXPECT_EQ(cur.runs(), 0u);
  }
}

TEST(PagePartCursor, NoHeadsNoParts) {
  const FakePages f;
  const PagePartCursor cur(f.kv, 0, 0, 0, 40);
  EXPECT_TRUE(cur.done());
  EXPECT_EQ(cur.rows(), 0u);
}

}  // namespace
}  // namespace kvscope::simd
