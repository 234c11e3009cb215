// GroupPrefetcher (kernels/attention_block.hpp): which caches read their blocks in groups, and
// that a range walked block by block requests every row after its first block exactly once,
// ahead of the block that reads it, then the rows read after the range. Groups are asked for
// explicitly (in_groups): whether this CPU uses them is prefetch_in_groups()'s policy. And
// NextBlock::following, the block after next that the GQA quad kernel requests into L2.
#include <gtest/gtest.h>

#include <cstddef>
#include <map>
#include <vector>

#include "kernels/attention_block.hpp"

namespace kvscope::simd {
namespace {

constexpr std::size_t kBlock = 64;  // rows per block, as the decode kernels read them

// A contiguous cache view over addresses that are never read (prefetches do not fault).
KvView fake_cache(KvDtype k_dtype, KvDtype v_dtype, std::size_t head_dim, std::size_t capacity) {
  KvView kv;
  kv.k_dtype = k_dtype, kv.v_dtype = v_dtype;
  kv.n_kv_heads = 4, kv.head_dim = head_dim, kv.capacity = capacity;
  kv.k_head_stride_bytes = capacity * kv.k_row_bytes();
  kv.v_head_stride_bytes = capacity * kv.v_row_bytes();
  kv.k = reinterpret_cast<const std::byte*>(std::size_t{1} << 30);
  kv.v = reinterpret_cast<const std::byte*>(std::size_t{1} << 34);
  return kv;
}

TEST(GroupPrefetcher, GroupsOnlyBlocksUnder32KiBOfAContiguousCache) {
  const auto rows_of = [](const KvView& kv) {
    return GroupPrefetcher(kv, 0, 0, 4096, kBlock, NextBlock{}, true).group_rows();
  };
  // d_head 128: int8 rows of 128 bytes (8 KiB blocks), bf16 256, f32 512 (32 KiB: as before).
  EXPECT_EQ(rows_of(fake_cache(KvDtype::int8, KvDtype::int8, 128, 4096)), 256u);
  EXPECT_EQ(rows_of(fake_cache(KvDtype::bf16, KvDtype::bf16, 128, 4096)), 128u);
  EXPECT_EQ(rows_of(fake_cache(KvDtype::f32, KvDtype::f32, 128, 4096)), 0u);
  // Keys and values of different types: the wider rows set the group.
  EXPECT_EQ(rows_of(fake_cache(KvDtype::int8, KvDtype::bf16, 128, 4096)), 128u);
  // Rows of 96 bytes: whole blocks only, 320 rows (30 KiB).
  EXPECT_EQ(rows_of(fake_cache(KvDtype::int8, KvDtype::int8, 96, 4096)), 320u);

  KvView paged = fake_cache(KvDtype::int8, KvDtype::int8, 128, 4096);
  const std::byte* pages[1] = {paged.k};
  paged.pages = pages, paged.page_tokens = 4096;
  EXPECT_FALSE(GroupPrefetcher(paged, 0, 0, 4096, kBlock, NextBlock{}, true).grouped());
  // Without groups, every cache requests block by block.
  EXPECT_FALSE(GroupPrefetcher(fake_cache(KvDtype::int8, KvDtype::int8, 128, 4096), 0, 0, 4096,
                               kBlock, NextBlock{}, false)
                   .grouped());
}

// The block after next, whose keys the GQA quad kernel requests into L2
// (request_following_keys): the rows right after the next block in the same head and range, a
// short last block at the range's end, nothing after it or over pages.
TEST(NextBlock, FollowingIsTheBlockAfterItInTheSameRange) {
  const KvView kv = fake_cache(KvDtype::int8, KvDtype::int8, 128, 4096);
  const NextBlock next = NextBlock::within(kv, 2, 0, kBlock, 1000, kBlock, NextBlock{});
  ASSERT_EQ(next.pos, 64u);
  const NextBlock after = next.following(kv, 1000, kBlock);
  EXPECT_EQ(after.kvh, 2u);
  EXPECT_EQ(after.pos, 128u);
  EXPECT_EQ(after.rows, kBlock);
  EXPECT_EQ(after.k, kv.k_row(2, 128));
  EXPECT_EQ(after.v, kv.v_row(2, 128));

  const NextBlock short_last = NextBlock::at(kv, 2, 896, kBlock).following(kv, 1000, kBlock);
  EXPECT_EQ(short_last.pos, 960u);
  EXPECT_EQ(short_last.rows, 40u);  // the range ends at 1000
  EXPECT_EQ(short_last.k, kv.k_row(2, 960));
  const NextBlock past_end = short_last.following(kv, 1000, kBlock);
  EXPECT_EQ(past_end.rows, 0u);
  EXPECT_EQ(past_end.k, nullptr);

  KvView paged = kv;
  const std::byte* pages[1] = {kv.k};
  paged.pages = pages, paged.page_tokens = 4096;
  EXPECT_EQ(NextBlock::at(paged, 2, 64, kBlock).following(paged, 1000, kBlock).rows, 0u);
}

// Walks [t0, t1) of kv head kvh as the decode kernels do (at_block, then a line per line read,
// keys before values) and counts the lines of the group prefetchers' requests. Returns for
// each requested line the block that was being read when it was requested.
struct Walk {
  std::map<const char*, std::size_t> key_line_block, value_line_block;
  std::size_t duplicates = 0;
};
Walk walk(const KvView& kv, std::size_t kvh, std::size_t t0, std::size_t t1,
          const NextBlock& after) {
  GroupPrefetcher group(kv, kvh, t0, t1, kBlock, after, true);
  EXPECT_TRUE(group.grouped());
  Walk w;
  const auto take = [&](PageRunPrefetcher& pf, std::map<const char*, std::size_t>& seen,
                        std::size_t lines, std::size_t block) {
    for (std::size_t i = 0; i < lines && !pf.done(); ++i) {
      w.duplicates += seen.count(pf.upcoming());
      seen[pf.upcoming()] = block;
      pf.next();
    }
  };
  for (std::size_t b0 = t0, nb; b0 < t1; b0 += nb) {
    nb = kv.block_rows(b0, t1, kBlock);
    group.at_block(b0, nb);
    const std::size_t block = (b0 - t0) / kBlock;
    take(group.key_lines(), w.key_line_block, nb * kv.k_row_bytes() / 64, block);
    GroupPrefetcher::Share v_share = group.value_share();
    for (std::size_t line = 0; line < nb * kv.v_row_bytes() / 64; ++line) {
      if (!group.value_lines().done()) {
        w.duplicates += w.value_line_block.count(group.value_lines().upcoming());
        w.value_line_block[group.value_lines().upcoming()] = block;
      }
      v_share.next();
    }
    v_share.rest();  // leaves the group's other lines to its later blocks
  }
  return w;
}

TEST(GroupPrefetcher, RequestsEachLaterGroupOnceDuringTheGroupBefore) {
  const KvView kv = fake_cache(KvDtype::int8, KvDtype::int8, 128, 4096);
  const std::size_t kvh = 2, t0 = 100, t1 = 100 + 3 * 256 + 70;  // 3 groups, then 70 rows
  const NextBlock after = NextBlock::at(kv, 3, 0, 64);           // the next head's first block
  const Walk w = walk(kv, kvh, t0, t1, after);
  EXPECT_EQ(w.duplicates, 0u);

  // Rows of the range past its first group were requested by the group before theirs; the
  // first group's own rows (past the first block) at once, by no walked block.
  std::size_t requested = 0;
  for (std::size_t t = t0 + 256; t < t1; ++t) {
    const std::size_t wanted_during = ((t - t0) / 256 - 1) * 4;  // the group before: blocks
    for (std::size_t line = 0; line < 2; ++line) {
      const auto* k = reinterpret_cast<const char*>(kv.k_row(kvh, t)) + 64 * line;
      const auto* v = reinterpret_cast<const char*>(kv.v_row(kvh, t)) + 64 * line;
      ASSERT_EQ(w.key_line_block.count(k), 1u) << "key row " << t;
      ASSERT_EQ(w.value_line_block.count(v), 1u) << "value row " << t;
      EXPECT_GE(w.key_line_block.at(k), wanted_during) << t;
      EXPECT_LT(w.key_line_block.at(k), wanted_during + 4) << t;
      EXPECT_GE(w.value_line_block.at(v), wanted_during) << t;
      EXPECT_LT(w.value_line_block.at(v), wanted_during + 4) << t;
      requested += 2;
    }
  }
  // The range's last group requests the rows read after the range, and nothing else.
  for (std::size_t t = 0; t < after.rows; ++t) {
    for (std::size_t line = 0; line < 2; ++line) {
      const auto* k = reinterpret_cast<const char*>(kv.k_row(3, t)) + 64 * line;
      const auto* v = reinterpret_cast<const char*>(kv.v_row(3, t)) + 64 * line;
      EXPECT_EQ(w.key_line_block.count(k), 1u) << "after-range key row " << t;
      EXPECT_EQ(w.value_line_block.count(v), 1u) << "after-range value row " << t;
      requested += 2;
    }
  }
  EXPECT_EQ(w.key_line_block.size() + w.value_line_block.size(), requested);
}

TEST(GroupPrefetcher, AShortRangeRequestsOnlyWhatFollowsIt) {
  const KvView kv = fake_cache(KvDtype::bf16, KvDtype::bf16, 128, 4096);
  // One group of 128 rows holds the whole range: nothing of it is left to request in turn.
  const Walk alone = walk(kv, 0, 0, 100, NextBlock{});
  EXPECT_TRUE(alone.key_line_block.empty());
  EXPECT_TRUE(alone.value_line_block.empty());
  const NextBlock after = NextBlock::at(kv, 1, 0, 10);
  const Walk then = walk(kv, 0, 0, 100, after);
  EXPECT_EQ(then.key_line_block.size(), 10 * 256 / 64);
  EXPECT_EQ(then.value_line_block.size(), 10 * 256 / 64);
}

}  // namespace
}  // namespace kvscope::simd
