// DecodePlan (kernels/attention_decode.hpp): how one decode step's keys are cut into chunks per
// kv head. Short contexts of few kv heads make enough items for the threads to share (4 where
// every chunk keeps short_chunk keys, else 2 of a block or more); no chunk is empty and none
// but the last is short; the cut never depends on the thread count.
#include <gtest/gtest.h>

#include <cstddef>
#include <xsimd/xsimd.hpp>

#include "kernels/attention_decode.hpp"

namespace kvscope::simd {
namespace {

using Plan = DecodePlan<xsimd::sse2>;
constexpr std::size_t kMin = 512, kLong = 8192, kShort = 256;

// Chunks per kv head; also checks the cut covers [0, n_keys) with non-empty chunks of whole
// blocks, the last one no shorter than `least`, for 1-16 threads alike.
std::size_t chunks_of(std::size_t n_keys, std::size_t n_kv_heads, std::size_t least,
                      std::size_t short_chunk = kShort) {
  const Plan plan(n_keys, n_kv_heads, 2, kMin, kLong, short_chunk);
  EXPECT_EQ(plan.chunk_len % kKeyBlock, 0u);
  EXPECT_LT((plan.chunks_per_head - 1) * plan.chunk_len, n_keys) << "an empty chunk";
  EXPECT_GE(plan.chunks_per_head * plan.chunk_len, n_keys) << "keys left out";
  if (plan.chunks_per_head > 1) {
    EXPECT_GE(n_keys - (plan.chunks_per_head - 1) * plan.chunk_len, least) << n_keys << " keys";
  }
  for (int threads : {1, 3, 16}) {
    const Plan other(n_keys, n_kv_heads, threads, kMin, kLong, short_chunk);
    EXPECT_EQ(other.chunks_per_head, plan.chunks_per_head) << threads << " threads";
    EXPECT_EQ(other.chunk_len, plan.chunk_len) << threads << " threads";
  }
  return plan.chunks_per_head;
}

TEST(DecodePlan, ShortContextsOfOneKvHeadMakeItemsForTheThreads) {
  EXPECT_EQ(chunks_of(100, 1, kKeyBlock), 1u);  // two chunks would leave one under a block
  EXPECT_EQ(chunks_of(200, 1, kKeyBlock), 2u);  // 128 + 72
  EXPECT_EQ(chunks_of(400, 1, kKeyBlock), 2u);
  EXPECT_EQ(chunks_of(512, 1, kShort), 2u);
  EXPECT_EQ(chunks_of(1000, 1, kShort), 2u);  // 4 would leave 232 keys in the last
  EXPECT_EQ(chunks_of(1300, 1, kShort), 3u);  // as before: 4 would leave 148
  EXPECT_EQ(chunks_of(1501, 1, kShort), 4u);  // 384 × 3 + 349 (was 3)
  EXPECT_EQ(chunks_of(2001, 1, kShort), 4u);  // unchanged: 4 of 512 already
  EXPECT_EQ(chunks_of(40000, 1, kShort), 16u);
}

TEST(DecodePlan, ManyKvHeadsOrLongMinimumsKeepTheirCut) {
  EXPECT_EQ(chunks_of(400, 8, kShort), 1u);  // 8 items already
  EXPECT_EQ(chunks_of(2001, 8, kShort), 2u);
  EXPECT_EQ(chunks_of(400, 2, kShort), 1u);  // 2 items: 4 would need chunks of 256
  EXPECT_EQ(chunks_of(600, 2, kShort), 2u);  // 4 items
  // A runner whose short chunk is its minimum (the AMX runners) is not cut shorter.
  EXPECT_EQ(chunks_of(400, 1, kShort, kMin), 1u);
  EXPECT_EQ(chunks_of(1501, 1, kShort, kMin), 3u);
}

// Items that read pages whole: chunks of whole pages where pages are whole blocks longer than
// one (so no page is split between two items), the cut as before otherwise, and still the
// same for any thread count.
TEST(DecodePlan, ChunksHoldWholePagesOfSeveralBlocks) {
  for (std::size_t page : {128u, 256u, 1024u}) {
    for (std::size_t n_keys : {100u, 2000u, 2001u, 5000u, 32768u}) {
      const Plan plan(n_keys, 1, 2, kKeyBlock, 2048, 0, page);
      EXPECT_EQ(plan.chunk_len % page, 0u) << n_keys << " keys, pages of " << page;
      EXPECT_LT((plan.chunks_per_head - 1) * plan.chunk_len, n_keys) << "an empty chunk";
      EXPECT_GE(plan.chunks_per_head * plan.chunk_len, n_keys) << "keys left out";
      for (int threads : {1, 3, 16}) {
        const Plan other(n_keys, 1, threads, kKeyBlock, 2048, 0, page);
        EXPECT_EQ(other.chunk_len, plan.chunk_len) << threads << " threads";
      }
    }
  }
  // 2,000 keys made 16 chunks of 128: pages of 256 now make 8 of 256.
  EXPECT_EQ(Plan(2000, 1, 2, kKeyBlock, 2048, 0, 0).chunk_len, 128u);
  EXPECT_EQ(Plan(2000, 1, 2, kKeyBlock, 2048, 0, 256).chunk_len, 256u);
  // Pages of a block or less, or not whole blocks, leave the cut as it was.
  for (std::size_t page : {16u, 64u, 100u}) {
    const Plan plain(2000, 1, 2, kKeyBlock, 2048, 0, 0);
    const Plan paged(2000, 1, 2, kKeyBlock, 2048, 0, page);
    EXPECT_EQ(paged.chunk_len, plain.chunk_len) << "pages of " << page;
    EXPECT_EQ(paged.chunks_per_head, plain.chunks_per_head) << "pages of " << page;
  }
}

}  // namespace
}  // namespace kvscope::simd
