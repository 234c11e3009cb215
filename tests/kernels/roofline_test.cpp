// The roofline probes on every ISA: the read loop reads every one of its streams (a byte
// planted anywhere in the buffer shows in its result), and the FMA loop really runs: its
// chains end where the same roundings end, and it takes at least what the FMAs take at any
// plausible clock.
#include "kernels/roofline.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
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

// The chains' final values, emulated one rounding at a time: fused on AVX2 and AVX-512,
// a rounded product then a rounded sum on SSE2 and scalar (volatile keeps the compiler
// from fusing them here).
float expected_chains_sum(Isa isa, std::size_t iterations) {
  const bool fused = isa == Isa::avx512 || isa == Isa::avx2;
  const int chains = isa == Isa::avx512 ? 16 : isa == Isa::scalar ? 8 : 12;
  const float m = 0.999999f, b = 1e-7f;
  float sum = 0.0f;
  for (int c = 0; c < chains; ++c) {
    float x = isa == Isa::scalar ? 1.0f : 1.0f + static_cast<float>(c) * 1e-3f;
    for (std::size_t i = 0; i < iterations; ++i) {
      if (fused) {
        x = std::fma(x, m, b);
      } else {
        volatile float product = x * m;
        x = product + b;
      }
    }
    sum += x;
  }
  return sum;
}

// The FMA loop runs every round it counts: its chains end bit for bit where the same
// roundings, done one at a time, end (1,000 and 1,001 rounds end apart), on 1 and 2
// threads. And it takes at least what its FMAs take at any plausible clock: noise on a
// shared machine can only lengthen a run, so this bound cannot fail by chance.
void expect_fma_burn_runs_its_fmas(Isa isa) {
  const double lanes = isa == Isa::avx512 ? 16 : isa == Isa::avx2 ? 8 : isa == Isa::sse2 ? 4 : 1;
  const double chains = isa == Isa::avx512 ? 16 : isa == Isa::scalar ? 8 : 12;
  ASSERT_NE(expected_chains_sum(isa, 1000), expected_chains_sum(isa, 1001));
  for (int threads : {1, 2}) {
    for (std::size_t rounds : {std::size_t{0}, std::size_t{1000}, std::size_t{1001}}) {
      float sum = -1.0f;
      EXPECT_EQ(fma_burn(rounds, isa, threads, &sum),
                2.0 * lanes * chains * static_cast<double>(rounds) * threads);
      EXPECT_EQ(sum, expected_chains_sum(isa, rounds))
          << rounds << " rounds, " << threads << " threads";
    }
  }
  const std::size_t rounds = 1600000;
  const auto t0 = std::chrono::steady_clock::now();
  fma_burn(rounds, isa, 1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // No x86 core retires more than 4 vector FMAs per cycle or runs above 6 GHz.
  EXPECT_GE(seconds, static_cast<double>(rounds) * chains / (4 * 6e9))
      << "the FMA loop ran faster than the FMAs can";
}

TEST_P(Roofline, FmaBurnRunsItsFmas) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  expect_fma_burn_runs_its_fmas(isa);
}

TEST(ScalarRoofline, FmaBurnRunsItsMultiplyAdds) { expect_fma_burn_runs_its_fmas(Isa::scalar); }

INSTANTIATE_TEST_SUITE_P(EveryIsa, Roofline, ::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return std::string(to_string(info.param)); });

}  // namespace
}  // namespace kvscope
