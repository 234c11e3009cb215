// The statistics of repeated timings, on numbers worked out by hand.
#include "engine/measure/repetitions.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace kvscope {
namespace {

TEST(Repetitions, SummarizeKnownNumbers) {
  // 1, 2, 3, 4: mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, ÷ (n − 1) = 5/3.
  const SampleStats s = summarize({4, 1, 3, 2});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(5.0 / 3.0));
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, sample stdev √(32/7).
  const SampleStats t = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(t.mean, 5);
  EXPECT_DOUBLE_EQ(t.median, 4.5);
  EXPECT_DOUBLE_EQ(t.stdev, std::sqrt(32.0 / 7.0));
  // An odd count takes the middle value; one value has no spread.
  EXPECT_DOUBLE_EQ(summarize({3e-3, 1e-3, 2e-3}).median, 2e-3);
  const SampleStats one = summarize({0.5});
  EXPECT_DOUBLE_EQ(one.stdev, 0);
  EXPECT_DOUBLE_EQ(one.mean, 0.5);
  EXPECT_THROW(summarize({}), std::invalid_argument);
}

TEST(Repetitions, SpreadIsSlowestOverFastest) {
  EXPECT_DOUBLE_EQ(spread({2e-3, 3.6e-3, 2.4e-3}), 1.8);
  EXPECT_DOUBLE_EQ(spread({5}), 1);
  EXPECT_DOUBLE_EQ(spread({}), 1);
  EXPECT_THROW(spread({1, 0}), std::invalid_argument);
  EXPECT_THROW(spread({1, std::nan("")}), std::invalid_argument);
}

TEST(Repetitions, StepsAreSharedNotMultiplied) {
  EXPECT_EQ(steps_per_repetition(10, 3), 4);  // 12 steps in all, not 30
  EXPECT_EQ(steps_per_repetition(9, 3), 3);
  EXPECT_EQ(steps_per_repetition(1, 3), 1);
  EXPECT_EQ(steps_per_repetition(10, 1), 10);
  EXPECT_THROW(steps_per_repetition(0, 3), std::invalid_argument);
  EXPECT_THROW(steps_per_repetition(10, 0), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
