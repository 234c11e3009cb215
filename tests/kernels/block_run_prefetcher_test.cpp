// BlockRunPrefetcher (kernels/attention_block.hpp): a block across pages requested in page
// runs over its chunks, line j of every run before line j + 1, each line once.
#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <vector>

#include "kernels/attention_block.hpp"

namespace kvscope::simd {
namespace {

// A block of n_rows rows of row_bytes each, its chunks of 16 rows in pages far apart (never
// read: prefetches do not fault), in the order a page table might give them.
BlockRows scattered_block(std::size_t row_bytes) {
  BlockRows rows{.row_bytes = row_bytes};
  const std::size_t page_at[] = {7, 2, 5, 3, 0, 6, 1, 4};
  for (std::size_t c = 0; c < BlockRows::kMaxChunks; ++c) {
    rows.chunk[c] =
        reinterpret_cast<const std::byte*>((std::size_t{1} << 30) + page_at[c] * (1 << 20));
  }
  return rows;
}

// Every line requested, in order, until done.
std::vector<const char*> requests(BlockRunPrefetcher pf) {
  std::vector<const char*> lines;
  while (!pf.done()) {
    lines.push_back(pf.upcoming());
    pf.next();
  }
  EXPECT_EQ(pf.upcoming(), nullptr);
  return lines;
}

const char* line_of(const BlockRows& rows, std::size_t row, std::size_t line) {
  return reinterpret_cast<const char*>(rows.row(row)) + 64 * line;
}

TEST(BlockRunPrefetcher, RequestsTheRunsOfAllChunksSideBySide) {
  // f32 rows of d_head 128 (512 bytes): 64 rows in 4 chunks of 8 KiB, 8 runs of 64 lines.
  const BlockRows rows = scattered_block(512);
  const std::vector<const char*> got = requests(BlockRunPrefetcher(rows, 64));
  ASSERT_EQ(got.size(), 64u * 512 / 64);
  EXPECT_EQ(std::set<const char*>(got.begin(), got.end()).size(), got.size()) << "a line twice";
  // The first 8 requests start the 8 runs (each chunk's two 4 KiB halves); then their second
  // lines, and so on.
  for (std::size_t line = 0; line < 64; ++line) {
    for (std::size_t run = 0; run < 8; ++run) {
      const std::size_t chunk = run / 2, half = run % 2;
      EXPECT_EQ(got[line * 8 + run], line_of(rows, chunk * 16 + half * 8, line))
          << "line " << line << " of run " << run;
    }
  }
}

TEST(BlockRunPrefetcher, ShortChunksAndAShortLastChunk) {
  // int8 rows of 128 bytes: chunks of 2 KiB (one run of 32 lines each); 50 rows leave a last
  // chunk of 2 rows (4 lines), passed over once its lines are out.
  const BlockRows rows = scattered_block(128);
  const std::vector<const char*> got = requests(BlockRunPrefetcher(rows, 50));
  ASSERT_EQ(got.size(), 50u * 128 / 64);
  EXPECT_EQ(std::set<const char*>(got.begin(), got.end()).size(), got.size()) << "a line twice";
  for (std::size_t line = 0; line < 4; ++line) {
    for (std::size_t chunk = 0; chunk < 4; ++chunk) {
      EXPECT_EQ(got[line * 4 + chunk], line_of(rows, chunk * 16, line)) << line << " " << chunk;
    }
  }
  for (std::size_t line = 4; line < 32; ++line) {
    for (std::size_t chunk = 0; chunk < 3; ++chunk) {
      EXPECT_EQ(got[16 + (line - 4) * 3 + chunk], line_of(rows, chunk * 16, line))
          << line << " " << chunk;
    }
  }
}

TEST(BlockRunPrefetcher, RestRequestsWhatIsLeftAndNothingIsEmpty) {
  BlockRunPrefetcher pf(scattered_block(256), 64);
  pf.next(10);
  EXPECT_FALSE(pf.done());
  pf.rest();
  EXPECT_TRUE(pf.done());
  EXPECT_TRUE(BlockRunPrefetcher(scattered_block(256), 0).done());
}

}  // namespace
}  // namespace kvscope::simd
