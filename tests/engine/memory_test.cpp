// AlignedBuffer: zero-filled, 64-byte aligned, writable storage of small and large sizes,
// movable, and refused before allocation when the machine cannot hold it.
#include "engine/memory.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <utility>

namespace kvscope {
namespace {

bool all_zero(const AlignedBuffer& b) {
  for (std::size_t i = 0; i < b.bytes(); ++i) {
    if (b.data()[i] != std::byte{0}) return false;
  }
  return true;
}

TEST(AlignedBuffer, SmallAndLargeAreZeroedAlignedAndWritable) {
  constexpr std::size_t kLarge = std::size_t{4} << 20;  // past malloc's mmap threshold
  for (std::size_t bytes : {std::size_t{1}, std::size_t{100}, kLarge - 1, kLarge, kLarge + 4097}) {
    AlignedBuffer b(bytes, "test buffer");
    EXPECT_EQ(b.bytes(), round_up_to_cache_line(bytes));
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kCacheLineBytes, 0u) << bytes;
    EXPECT_TRUE(all_zero(b)) << bytes;
    b.data()[0] = std::byte{1};
    b.data()[b.bytes() - 1] = std::byte{2};
    EXPECT_EQ(b.data()[b.bytes() - 1], std::byte{2});
  }
}

// Buffers of 4 MiB and more, and those that fill their 2 MiB pages to within a sixteenth (a
// paged cache's slabs), are mapped on their own at a 2 MiB boundary, so that the kernel can
// back them with huge pages (memory.cpp says why); smaller ones stay 64-byte aligned.
TEST(AlignedBuffer, LargeOnesStartOnA2MiBBoundary) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  for (std::size_t bytes : {2 * kHuge, 2 * kHuge + 1, 5 * kHuge + 4097, 2 * kHuge - 4096, kHuge}) {
    AlignedBuffer b(bytes, "test buffer");
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % kHuge, 0u) << bytes;
    EXPECT_TRUE(all_zero(b)) << bytes;
  }
}

TEST(AlignedBuffer, MovesOwnership) {
  AlignedBuffer a(std::size_t{8} << 20, "test buffer");
  a.data()[123] = std::byte{7};
  AlignedBuffer b = std::move(a);
  EXPECT_EQ(b.data()[123], std::byte{7});
  AlignedBuffer c(64, "test buffer");
  c = std::move(b);  // frees the small buffer, takes the large one
  EXPECT_EQ(c.data()[123], std::byte{7});
  EXPECT_EQ(c.bytes(), std::size_t{8} << 20);
}

TEST(AlignedBuffer, ZeroBytesHoldsNothing) {
  AlignedBuffer b(0, "test buffer");
  EXPECT_EQ(b.bytes(), 0u);
  EXPECT_EQ(b.data(), nullptr);
}

TEST(AlignedBuffer, RefusesMoreThanTheMachineHas) {
  EXPECT_THROW(AlignedBuffer(physical_memory_bytes() + 4096, "huge buffer"), std::length_error);
}

}  // namespace
}  // namespace kvscope
