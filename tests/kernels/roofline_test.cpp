// The roofline probes on every ISA: the read loop reads every one of its streams (a byte
// planted anywhere in the buffer shows in its result), and the FMA loop really runs: its
// time grows with the iterations asked for and is at least what the FMAs take at any
// plausible clock.
#include "kernels/roofline.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "engine/memory.hpp"
#include "kernels/isa.hpp"

namespace kvscope {
namespace {

class Roofline : public ::testing::TestWithParam<Isa> {};

TEST_P(Roofline, ReadSweepReadsEveryStreamOfEveryThread) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  // A zero buffer XORs to 0. One non-zero byte planted at a time, at 97 places spread over
  // the buffer (every one of the 8 streams of each of 1–3 threads holds several, and the
  // bytewise tail holds the last), must show: 0x5a shifted by its place in its 32-bit word.
  const std::size_t bytes = 1000003;
  AlignedBuffer buffer(bytes, "test buffer");
  std::memset(buffer.data(), 0, bytes);
  for (int threads : {1, 2, 3}) {
    ASSERT_EQ(read_sweep(buffer.data(), bytes, isa, threads), 0.0f);
    for (std::size_t mark = 0; mark <= 96; ++mark) {
      const std::size_t at = mark == 96 ? bytes - 1 : mark * (bytes / 96) + mark % 7;
      buffer.data()[at] = std::byte{0x5a};
      const float got = read_sweep(buffer.data(), bytes, isa, threads);
      buffer.data()[at] = std::byte{0};
      const bool seen = got == 0x5a || got == 0x5a00 || got == 0x5a0000 || got == 0x5a000000u;
      EXPECT_TRUE(seen) << threads << " threads: byte " << at << " not read (result " << got << ")";
    }
  }
}

TEST_P(Roofline, FmaBurnRunsItsFmas) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const double lanes = isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : 4;
  const double chains = isa == Isa::avx512 ? 16 : 12;
  const std::size_t small = 200000, large = 8 * small;
  EXPECT_EQ(fma_burn(1000, isa, 2), 2.0 * lanes * chains * 1000 * 2);
  // Fastest of 3 runs each (other load on the machine only slows a run down).
  const auto seconds = [&](std::size_t iterations) {
    double best = 1e9;
    for (int run = 0; run < 3; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      fma_burn(iterations, isa, 1);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  const double t_small = seconds(small), t_large = seconds(large);
  // No x86 core retires more than 4 vector FMAs per cycle or runs above 6 GHz.
  const double floor = static_cast<double>(large) * chains / (4 * 6e9);
  EXPECT_GE(t_large, floor) << "the FMA loop ran faster than the FMAs can";
  // 8× the iterations: time must grow (≥ 4× leaves room for thread start-up and noise).
  EXPECT_GE(t_large, 4 * t_small) << "small " << t_small << " s, large " << t_large << " s";
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, Roofline, ::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kvscope
