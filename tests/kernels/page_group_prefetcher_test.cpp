// PageGroupPrefetcher (kernels/attention_block.hpp): a paged cache read a page at a time, each
// page's heads in turn, requests every later group of heads' rows exactly once, during the
// group read before it, and nothing outside the work item.
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <utility>
#include <vector>

#include "kernels/attention_block.hpp"

namespace kvscope::simd {
namespace {

constexpr std::size_t kPageTokens = 16, kHeads = 12, kPages = 8;

// A paged view over addresses that are never read (prefetches do not fault): page p at
// p GiB + 1 GiB, a block per head holding its K rows, then its V rows (no int8 scales).
struct FakePages {
  KvView kv;
  std::vector<const std::byte*> table;

  FakePages(KvDtype dtype, std::size_t head_dim) {
    kv.k_dtype = kv.v_dtype = dtype;
    kv.n_kv_heads = kHeads, kv.head_dim = head_dim, kv.capacity = kPages * kPageTokens;
    kv.page_tokens = kPageTokens;
    kv.v_offset = kPageTokens * kv.k_row_bytes();
    kv.k_head_stride_bytes = kv.v_head_stride_bytes = kv.v_offset + kPageTokens * kv.v_row_bytes();
    for (std::size_t p = 0; p < kPages; ++p)
      table.push_back(reinterpret_cast<const std::byte*>((p + 1) << 30));
    kv.pages = table.data();
  }
};

// Walks an item (heads [kvh0, kvh0 + heads), keys [t0, t1)) as decode does: at_part, then a
// line per line read, keys before values. For each requested line: the (page, head) part
// being read when it was requested.
struct Walk {
  std::map<const char*, std::pair<std::size_t, std::size_t>> requested_during;
  std::size_t duplicates = 0;
  // The (page, head) parts that start a group, and whether the next group's rows were all
  // requested at once there (a part of a page: its heads' rows are not back to back).
  std::map<std::pair<std::size_t, std::size_t>, bool> at_once;
};
Walk walk(const KvView& kv, std::size_t kvh0, std::size_t heads, std::size_t t0, std::size_t t1,
          std::size_t* group_heads) {
  PageGroupPrefetcher group(kv, heads);
  *group_heads = group.group_heads();
  Walk w;
  const auto take = [&](PageRunPrefetcher& pf, std::size_t lines, std::size_t page,
                        std::size_t head) {
    for (std::size_t i = 0; i < lines && !pf.done(); ++i) {
      w.duplicates += w.requested_during.count(pf.upcoming());
      w.requested_during[pf.upcoming()] = {page, head};
      pf.next();
    }
  };
  for_page_parts(kv, kvh0, heads, t0, t1, 0,
                 [&](std::size_t i, std::size_t b0, std::size_t b1, const NextBlock&) {
                   group.at_part(kv, kvh0, i, b0, b1, t1);
                   const std::size_t page = kv.page_of(b0);
                   if (i % group.group_heads() == 0) {
                     w.at_once[{page, i}] = group.key_lines().done() && group.value_lines().done();
                   }
                   take(group.key_lines(), (b1 - b0) * kv.k_row_bytes() / 64, page, i);
                   take(group.value_lines(), (b1 - b0) * kv.v_row_bytes() / 64, page, i);
                 });
  return w;
}

TEST(PageGroupPrefetcher, RequestsEachLaterGroupOnceDuringTheGroupBefore) {
  // f32 rows of 128 (pages of 8 KiB a head): groups of 4 heads; an item of 8 heads from kv head
  // 4 over 5 pages, the last one cut at 6 of its 16 keys. The whole pages' rows are requested a
  // line per line read; the last page's at once, by the groups before its two.
  const FakePages fake(KvDtype::f32, 128);
  const KvView& kv = fake.kv;
  const std::size_t kvh0 = 4, heads = 8, t0 = 16, t1 = 16 + 4 * kPageTokens + 6;
  std::size_t g = 0;
  const Walk w = walk(kv, kvh0, heads, t0, t1, &g);
  ASSERT_EQ(g, 4u);
  EXPECT_EQ(w.duplicates, 0u);
  std::size_t expected = 0;
  const std::size_t last_page = (t1 - 1) / kPageTokens;
  for (const auto& [part, at_once] : w.at_once) {
    const bool before_last_page = (part.first == last_page - 1 && part.second == g) ||
                                  (part.first == last_page && part.second == 0);
    const bool nothing_after = part.first == last_page && part.second == g;
    EXPECT_EQ(at_once, before_last_page || nothing_after) << part.first << " " << part.second;
  }
  EXPECT_EQ(w.at_once.size(), 5u * 2);
  for (std::size_t page = t0 / kPageTokens; page < last_page; ++page) {
    for (std::size_t i = 0; i < heads; ++i) {
      const std::size_t group = i / g;
      if (page == t0 / kPageTokens && group == 0) continue;  // the item's first group: no one
      // The group before: this page's previous group, or the previous page's last group.
      const std::pair<std::size_t, std::size_t> before =
          group > 0 ? std::pair{page, (group - 1) * g} : std::pair{page - 1, heads - g};
      for (std::size_t row = 0; row < kPageTokens; ++row) {
        const std::size_t pos = page * kPageTokens + row;
        for (std::size_t line = 0; line < kv.k_row_bytes() / 64; ++line) {
          for (const auto* at : {reinterpret_cast<const char*>(kv.k_row(kvh0 + i, pos)),
                                 reinterpret_cast<const char*>(kv.v_row(kvh0 + i, pos))}) {
            const auto found = w.requested_during.find(at + 64 * line);
            ASSERT_NE(found, w.requested_during.end()) << "page " << page << " head " << i;
            EXPECT_EQ(found->second.first, before.first) << "page " << page << " head " << i;
            EXPECT_GE(found->second.second, before.second) << "page " << page << " head " << i;
            EXPECT_LT(found->second.second, before.second + g) << "page " << page << " head " << i;
            ++expected;
          }
        }
      }
    }
  }
  EXPECT_EQ(w.requested_during.size(), expected);
  for (const auto& [line, during] : w.requested_during) {
    const std::size_t page = (reinterpret_cast<std::size_t>(line) >> 30) - 1;
    EXPECT_GE(page, t0 / kPageTokens);
    EXPECT_LE(page, (t1 - 1) / kPageTokens);
    const std::size_t in_page = reinterpret_cast<std::size_t>(line) - ((page + 1) << 30);
    const std::size_t head = in_page / kv.k_head_stride_bytes;
    EXPECT_GE(head, kvh0);
    EXPECT_LT(head, kvh0 + heads);
  }
}

TEST(PageGroupPrefetcher, GroupsHoldAbout32KiBOfAPagesRows) {
  const auto group_of = [](KvDtype dtype, std::size_t heads) {
    return PageGroupPrefetcher(FakePages(dtype, 128).kv, heads).group_heads();
  };
  EXPECT_EQ(group_of(KvDtype::f32, 8), 4u);   // 8 KiB a head
  EXPECT_EQ(group_of(KvDtype::bf16, 8), 8u);  // 4 KiB
  EXPECT_EQ(group_of(KvDtype::int8, 8), 8u);  // 2 KiB: 16, but an item has only 8 heads
  EXPECT_EQ(group_of(KvDtype::int8, 12), 12u);
}

}  // namespace
}  // namespace kvscope::simd
