// The decode measurement's bookkeeping (never its speed: timings are for benchmarks).
#include "engine/measure/decode_timing.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>

namespace kvscope {
namespace {

TEST(DecodeTiming, CountsBytesAndStepsAndDerivesRates) {
  const DecodeTiming t = time_attention_decode({.n_heads = 4,
                                                .n_kv_heads = 2,
                                                .head_dim = 16,
                                                .tokens = 300,
                                                .kv_dtype = KvDtype::int8,
                                                .steps = 5,
                                                .llc_bytes = 1 << 20});
  EXPECT_EQ(t.step_seconds.size(), 5u);
  EXPECT_EQ(t.bytes_read_per_step, 2u * 2 * 16 * 300 + 2u * 2 * 4 * 300);  // K+V, scales
  EXPECT_LE(t.min_s, t.median_s);
  EXPECT_LE(t.median_s, t.max_s);
  EXPECT_DOUBLE_EQ(t.tokens_per_s, 1.0 / t.median_s);
  EXPECT_DOUBLE_EQ(t.gbps, t.bytes_read_per_step / t.median_s / 1e9);
}

// Untimed steps run for warmup_s (the steps are far shorter than 20 ms) and at least
// warmup_steps of them; none of them is among the timed steps.
TEST(DecodeTiming, WarmsUpForItsSecondsBeforeTiming) {
  using clock = std::chrono::steady_clock;
  const DecodeTimingRequest request{.n_heads = 2,
                                    .n_kv_heads = 1,
                                    .head_dim = 16,
                                    .tokens = 32,
                                    .warmup_steps = 2,
                                    .warmup_s = 0.02,
                                    .steps = 3,
                                    .cache_state = CacheState::warm};
  const auto begin = clock::now();
  const DecodeTiming t = time_attention_decode(request);
  EXPECT_GE(std::chrono::duration<double>(clock::now() - begin).count(), 0.02);
  EXPECT_GT(t.warmup_steps, 2);
  EXPECT_EQ(t.step_seconds.size(), 3u);
  DecodeTimingRequest steps_only = request;
  steps_only.warmup_s = 0.0;
  EXPECT_EQ(time_attention_decode(steps_only).warmup_steps, 2);
}

TEST(DecodeTiming, RejectsBadRequests) {
  EXPECT_THROW(time_attention_decode({.n_heads = 6, .n_kv_heads = 4}), std::invalid_argument);
  EXPECT_THROW(time_attention_decode({.tokens = 0}), std::invalid_argument);
  EXPECT_THROW(time_attention_decode({.tokens = 10, .steps = 0}), std::invalid_argument);
  EXPECT_THROW(time_attention_decode({.tokens = 10, .threads = 0}), std::invalid_argument);
  EXPECT_THROW(time_attention_decode({.n_kv_heads = 32, .tokens = std::int64_t{1} << 36}),
               std::length_error);
}

TEST(Median, OddAndEvenSizes) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_THROW(median({}), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
