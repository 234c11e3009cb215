// The roofline probes on every ISA: the read loop touches every byte (its XOR result is known
// exactly), and the FMA loop reports the FLOPs it was asked for.
#include "kernels/roofline.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/memory.hpp"
#include "kernels/isa.hpp"

namespace kvscope {
namespace {

TEST(Roofline, ReadSweepSeesEveryByte) {
  // 64-byte aligned words XOR together; a tail shorter than one unrolled step is read
  // bytewise. Marks: one word in the bulk, one in a thread's last step, and the final byte.
  const std::size_t bytes = 1000003;
  AlignedBuffer buffer(bytes, "test buffer");
  const std::uint32_t a = 0x1234u, b = 0x00ab0000u;
  std::memcpy(buffer.data() + 4096, &a, sizeof a);
  std::memcpy(buffer.data() + 500032, &b, sizeof b);
  buffer.data()[bytes - 1] = std::byte{0x5a};
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) continue;
    for (int threads : {1, 2, 3}) {
      const float got = read_sweep(buffer.data(), bytes, isa, threads);
      EXPECT_EQ(got, static_cast<float>(a ^ b ^ 0x5au)) << to_string(isa) << " " << threads;
    }
  }
}

TEST(Roofline, FmaBurnCountsFlops) {
  const struct {
    Isa isa;
    double lanes, chains;
  } cases[] = {{Isa::sse2, 4, 12}, {Isa::avx2, 8, 12}, {Isa::avx512, 16, 16}};
  for (const auto& c : cases) {
    if (!cpu_supports(c.isa)) continue;
    EXPECT_EQ(fma_burn(1000, c.isa, 2), 2.0 * c.lanes * c.chains * 1000 * 2) << to_string(c.isa);
  }
}

}  // namespace
}  // namespace kvscope
