// The kernels' per-thread scratch pool (kernels/scratch_pool.hpp): a block given back is what
// the next take of its size gets, blocks held at once are distinct, and the pool keeps no more
// than its limits.
#include "kernels/scratch_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace kvscope::simd {
namespace {

bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

TEST(ScratchPool, TheNextTakeOfASizeGetsTheBlockGivenBack) {
  if (!scratch_pool_keeps()) GTEST_SKIP() << "AddressSanitizer build: every block is fresh";
  void* first = take_scratch(4096 + 64);
  give_back_scratch(first, 4096 + 64);
  void* other_size = take_scratch(8192);
  EXPECT_NE(first, other_size);  // the kept block is not handed out for another size
  void* again = take_scratch(4096 + 64);
  EXPECT_EQ(first, again);
  give_back_scratch(again, 4096 + 64);
  give_back_scratch(other_size, 8192);
}

TEST(ScratchPool, BlocksHeldAtOnceAreDistinctAlignedAndWritable) {
  std::vector<void*> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(take_scratch(1024));
    ASSERT_TRUE(aligned64(held.back()));
    std::memset(held.back(), i, 1024);
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) EXPECT_NE(held[i], held[j]);
    EXPECT_EQ(i, static_cast<const unsigned char*>(held[i])[1023]);
  }
  for (void* p : held) give_back_scratch(p, 1024);
  give_back_scratch(nullptr, 64);  // nothing to keep
}

TEST(ScratchPool, KeepsAtMost32BlocksAnd16MiB) {
  if (!scratch_pool_keeps()) GTEST_SKIP() << "AddressSanitizer build: every block is fresh";
  // On a thread of its own, whose pool starts empty.
  std::thread([] {
    std::vector<void*> held;
    for (int i = 0; i < 40; ++i) held.push_back(take_scratch(64));
    for (void* p : held) give_back_scratch(p, 64);
    EXPECT_EQ(std::size_t{32} * 64, scratch_kept_bytes());  // the 8 oldest freed
    // 20 blocks of 1 MiB: the oldest go (the 64-byte ones, then 4 of these) to keep 16 MiB.
    held.clear();
    for (int i = 0; i < 20; ++i) held.push_back(take_scratch(std::size_t{1} << 20));
    for (void* p : held) give_back_scratch(p, std::size_t{1} << 20);
    EXPECT_EQ(std::size_t{16} << 20, scratch_kept_bytes());
    // A block larger than the whole pool is freed at once.
    void* huge = take_scratch(std::size_t{17} << 20);
    give_back_scratch(huge, std::size_t{17} << 20);
    EXPECT_EQ(std::size_t{16} << 20, scratch_kept_bytes());
  }).join();
}

}  // namespace
}  // namespace kvscope::simd
