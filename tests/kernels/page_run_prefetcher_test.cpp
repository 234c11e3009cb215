// PageRunPrefetcher (kernels/attention_block.hpp): the order in which a block's lines are
// requested (4 KiB runs side by side, then the tail front to back) and that each line of the
// range is requested exactly once, whichever way the kernel calls it.
#include <gtest/gtest.h>

#include <cstddef>
#include <type_traits>
#include <vector>

#include "kernels/attention_block.hpp"

namespace kvscope::simd {
namespace {

// The byte offsets from `base` of the lines the prefetcher requests, one next() at a time.
std::vector<std::size_t> requested_offsets(PageRunPrefetcher pf, const char* base) {
  std::vector<std::size_t> offsets;
  while (const char* line = pf.upcoming()) {
    offsets.push_back(static_cast<std::size_t>(line - base));
    const std::size_t left = pf.lines_left();
    pf.next();
    EXPECT_EQ(pf.lines_left(), left - 1);
  }
  EXPECT_TRUE(pf.done());
  return offsets;
}

TEST(PageRunPrefetcher, WalksWholeRunsSideBySideThenTheTailFrontToBack) {
  constexpr std::size_t kRun = PageRunPrefetcher::kRunBytes, kLinesPerRun = kRun / 64;
  const char* base = reinterpret_cast<const char*>(std::size_t{1} << 20);  // never read
  const std::size_t bytes = 3 * kRun + 5 * 64 + 10;                        // 6 tail lines
  const std::vector<std::size_t> got =
      requested_offsets(PageRunPrefetcher(base, bytes, /*in_runs=*/true), base);

  std::vector<std::size_t> want;
  for (std::size_t line = 0; line < kLinesPerRun; ++line) {
    for (std::size_t run = 0; run < 3; ++run) want.push_back(run * kRun + line * 64);
  }
  for (std::size_t tail = 3 * kRun; tail < bytes; tail += 64) want.push_back(tail);
  EXPECT_EQ(got, want);
}

// Where the CPU streams better front to back (prefetch_in_page_runs(): AMD), every line in
// order; the default follows this CPU.
TEST(PageRunPrefetcher, FrontToBackWhereRunsDoNotPay) {
  const char* base = reinterpret_cast<const char*>(std::size_t{1} << 20);
  const std::size_t bytes = 3 * PageRunPrefetcher::kRunBytes + 5 * 64 + 10;
  std::vector<std::size_t> in_order;
  for (std::size_t at = 0; at < bytes; at += 64) in_order.push_back(at);
  EXPECT_EQ(requested_offsets(PageRunPrefetcher(base, bytes, /*in_runs=*/false), base), in_order);
  const bool default_in_order = requested_offsets(PageRunPrefetcher(base, bytes), base) == in_order;
  EXPECT_EQ(default_in_order, !prefetch_in_page_runs());
}

TEST(PageRunPrefetcher, UnderTwoRunsGoesFrontToBack) {
  const char* base = reinterpret_cast<const char*>(std::size_t{1} << 20);
  for (std::size_t bytes :
       {std::size_t{1}, std::size_t{64}, std::size_t{4096}, std::size_t{8191}}) {
    std::vector<std::size_t> want;
    for (std::size_t at = 0; at < bytes; at += 64) want.push_back(at);
    EXPECT_EQ(requested_offsets(PageRunPrefetcher(base, bytes), base), want) << bytes << " bytes";
  }
}

TEST(PageRunPrefetcher, NothingToRequestWithoutARange) {
  PageRunPrefetcher none(nullptr, 1 << 16);
  EXPECT_TRUE(none.done());
  EXPECT_EQ(none.lines_left(), 0u);
  EXPECT_EQ(none.upcoming(), nullptr);
  none.next(5);
  none.rest();
  EXPECT_TRUE(none.done());
}

// Kernels call next(lines of a row) per row read and rest() at the end: the same lines in the
// same order as one next() at a time, none twice, none beyond the range.
TEST(PageRunPrefetcher, RowStepsAndRestRequestTheSameLines) {
  const char* base = reinterpret_cast<const char*>(std::size_t{1} << 20);
  const std::size_t bytes = 64 * 512;  // 64 f32 rows of 128: 8 runs
  for (const bool in_runs : {true, false}) {
    SCOPED_TRACE(in_runs ? "in runs" : "front to back");
    const std::vector<std::size_t> one_by_one =
        requested_offsets(PageRunPrefetcher(base, bytes, in_runs), base);
    ASSERT_EQ(one_by_one.size(), bytes / 64);

    PageRunPrefetcher by_rows(base, bytes, in_runs);
    std::vector<std::size_t> got;
    for (std::size_t row = 0; row < 40; ++row) {
      for (std::size_t i = 0; i < lines_per_row(512); ++i) {
        got.push_back(static_cast<std::size_t>(by_rows.upcoming() - base));
        by_rows.next();
      }
    }
    EXPECT_EQ(by_rows.lines_left(), 24 * lines_per_row(512));
    const PageRunPrefetcher rest_from = by_rows;
    std::vector<std::size_t> rest = requested_offsets(rest_from, base);
    got.insert(got.end(), rest.begin(), rest.end());
    by_rows.rest();
    EXPECT_TRUE(by_rows.done());
    by_rows.next(3);  // past the end: nothing
    EXPECT_EQ(by_rows.upcoming(), nullptr);
    EXPECT_EQ(got, one_by_one);
  }
}

// A block several queries read is requested by the same walk, into L1 where the CPU's policy
// says so (prefetch_shared_blocks_to_l1(): AMD with an L1 of 48 KiB or more), else into L2 as
// every other block.
TEST(PageRunPrefetcher, SharedBlocksWalkTheSameLinesIntoTheLevelThePolicyNames) {
  const char* base = reinterpret_cast<const char*>(std::size_t{1} << 20);
  const std::size_t bytes = 3 * PageRunPrefetcher::kRunBytes + 5 * 64 + 10;
  std::vector<std::size_t> shared;
  SharedBlockPrefetcher pf(base, bytes);
  while (const char* line = pf.upcoming()) {
    shared.push_back(static_cast<std::size_t>(line - base));
    pf.next();
  }
  EXPECT_EQ(shared, requested_offsets(PageRunPrefetcher(base, bytes), base));
  int handed = 0;
  with_shared_block_prefetcher(base, bytes, [&](auto& chosen) {
    using Chosen = std::remove_reference_t<decltype(chosen)>;
    constexpr bool to_l1 = std::is_same_v<Chosen, SharedBlockPrefetcher>;
    EXPECT_EQ(to_l1, prefetch_shared_blocks_to_l1());
    EXPECT_EQ(chosen.lines_left(), shared.size());
    ++handed;
  });
  with_shared_block_prefetchers(base, bytes, base, 64, [&](auto& k, auto& v) {
    EXPECT_EQ(k.lines_left(), shared.size());
    EXPECT_EQ(v.lines_left(), 1u);
    ++handed;
  });
  EXPECT_EQ(handed, 2);
}

}  // namespace
}  // namespace kvscope::simd
