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
#include <stdexcept>
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

// The read loop with arithmetic reads every element of every thread's two halves, blocks and
// tail, and does its multiply-adds with each: over ones the result is (elements + what was
// planted) × fmas_per_float, exactly (every partial sum is a whole number under 2^24). A 2 planted
// anywhere adds one more times the count (0: one addition a element). Bytes past the last
// whole float are not read.
void expect_read_with_fmas_reads_everything(Isa isa) {
  const std::size_t floats = 250007;  // blocks of 16 KiB, whole lines and a tail of single floats
  const std::size_t bytes = floats * sizeof(float) + 3;
  AlignedBuffer buffer(bytes, "test buffer");
  std::vector<float> ones(floats, 1.0f);
  std::memcpy(buffer.data(), ones.data(), floats * sizeof(float));
  std::memset(buffer.data() + floats * sizeof(float), 0x7f, 3);  // would show if read as a float
  const auto at = [&](std::size_t i) { return buffer.data() + i * sizeof(float); };
  for (int fmas : {0, 1, 2, 4, 8, 16}) {
    const double per = fmas == 0 ? 1.0 : fmas;
    for (int threads : {1, 2, 3}) {
      EXPECT_EQ(read_with_fmas(buffer.data(), bytes, fmas, isa, threads), per * floats)
          << fmas << " multiply-adds, " << threads << " threads";
      for (std::size_t mark = 0; mark <= 40; ++mark) {
        const std::size_t i = mark == 40 ? floats - 1 : mark * (floats / 40) + mark % 5;
        const float two = 2.0f;
        std::memcpy(at(i), &two, sizeof two);
        const float got = read_with_fmas(buffer.data(), bytes, fmas, isa, threads);
        std::memcpy(at(i), &ones[0], sizeof(float));
        EXPECT_EQ(got, per * (floats + 1))
            << fmas << " multiply-adds, " << threads << " threads: element " << i << " not read";
      }
    }
  }
  for (int fmas : {-1, 3, 32}) {
    EXPECT_THROW(read_with_fmas(buffer.data(), bytes, fmas, isa, 1), std::invalid_argument) << fmas;
  }
}

TEST_P(Roofline, ReadWithFmasReadsEveryElement) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  expect_read_with_fmas_reads_everything(isa);
}

TEST(ScalarRoofline, ReadWithFmasReadsEveryElement) {
  expect_read_with_fmas_reads_everything(Isa::scalar);
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
