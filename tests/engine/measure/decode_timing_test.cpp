// The decode measurement's bookkeeping (never its speed: timings are for benchmarks).
#include "engine/measure/decode_timing.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "engine/kv_layout.hpp"

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

// A pair steps both requests in turn, a's schedule for both, each over its own caches; its
// ratios are b's step over a's, pair by pair.
TEST(DecodeTimingPair, StepsBothInTurnAndComparesPairByPair) {
  const DecodeTimingRequest a{.n_heads = 4,
                              .n_kv_heads = 2,
                              .head_dim = 16,
                              .tokens = 300,
                              .kv_dtype = KvDtype::int8,
                              .steps = 5,
                              .llc_bytes = 1 << 20};
  DecodeTimingRequest b = a;
  b.kv_dtype = KvDtype::f32;
  b.kv_layout = parse_kv_layout("paged:16");
  b.steps = 99;  // a's schedule rules
  const PairedDecodeTiming pair = time_attention_decode_pair(a, b);
  ASSERT_EQ(pair.a.step_seconds.size(), 5u);
  ASSERT_EQ(pair.b.step_seconds.size(), 5u);
  ASSERT_EQ(pair.ratios.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(pair.ratios[i], pair.b.step_seconds[i] / pair.a.step_seconds[i]) << i;
  }
  EXPECT_EQ(pair.ratio.pairs, 5u);
  EXPECT_DOUBLE_EQ(pair.ratio.median, median(pair.ratios));
  EXPECT_EQ(pair.a.bytes_read_per_step, 2u * 2 * 16 * 300 + 2u * 2 * 4 * 300);  // int8, scales
  EXPECT_EQ(pair.b.bytes_read_per_step, 2u * 2 * 16 * 300 * 4);                 // f32
  EXPECT_EQ(pair.a.warmup_steps, pair.b.warmup_steps);
  EXPECT_DOUBLE_EQ(pair.b.tokens_per_s, 1.0 / pair.b.median_s);
}

// Either side's bad request is refused as a lone measurement's is (two sets of caches that each
// fit but not together: RequirePairMemory in cold_caches_test).
TEST(DecodeTimingPair, RejectsEitherBadSide) {
  const DecodeTimingRequest good{.n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .tokens = 64};
  DecodeTimingRequest bad = good;
  bad.n_heads = 6;
  bad.n_kv_heads = 4;  // does not divide
  EXPECT_THROW(time_attention_decode_pair(good, bad), std::invalid_argument);
  EXPECT_THROW(time_attention_decode_pair(bad, good), std::invalid_argument);
  bad = good;
  bad.n_kv_heads = 4;
  bad.tokens = std::int64_t{1} << 36;
  EXPECT_THROW(time_attention_decode_pair(good, bad), std::length_error);
}

// With the read loop beside, every timed step has a read-loop step of its own, and the loop
// sweeps as many bytes as the step reads (its GB/s is then of the same order, far from 0).
TEST(DecodeTiming, ReadLoopBesideTakesAStepPerStep) {
  DecodeTimingRequest request{.n_heads = 4,
                              .n_kv_heads = 2,
                              .head_dim = 16,
                              .tokens = 300,
                              .kv_dtype = KvDtype::int8,
                              .steps = 5,
                              .layers = 2,
                              .llc_bytes = 1 << 20};
  EXPECT_TRUE(time_attention_decode(request).read_seconds.empty());
  request.read_loop_beside = true;
  const DecodeTiming t = time_attention_decode(request);
  ASSERT_EQ(t.step_seconds.size(), 5u);
  ASSERT_EQ(t.read_seconds.size(), 5u);
  for (double s : t.read_seconds) EXPECT_GT(s, 0.0);
  // The pair: one read-loop step per pair of steps, the same for both sides.
  DecodeTimingRequest b = request;
  b.kv_layout = parse_kv_layout("paged:16");
  b.read_loop_beside = false;  // a's schedule rules
  const PairedDecodeTiming pair = time_attention_decode_pair(request, b);
  ASSERT_EQ(pair.a.read_seconds.size(), 5u);
  EXPECT_EQ(pair.b.read_seconds, pair.a.read_seconds);
  request.read_loop_beside = false;
  EXPECT_TRUE(time_attention_decode_pair(request, b).a.read_seconds.empty());
}

TEST(RatioSummary, MedianAndMiddleHalfByNearestRank) {
  const RatioSummary four = summarize_ratios({4, 1, 3, 2});
  EXPECT_EQ(four.median, 2.5);
  EXPECT_EQ(four.low, 1);
  EXPECT_EQ(four.high, 3);
  EXPECT_EQ(four.pairs, 4u);
  const RatioSummary one = summarize_ratios({5});
  EXPECT_EQ(one.low, 5);
  EXPECT_EQ(one.median, 5);
  EXPECT_EQ(one.high, 5);
  const RatioSummary eight = summarize_ratios({8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(eight.low, 2);
  EXPECT_EQ(eight.high, 6);
  EXPECT_THROW(summarize_ratios({}), std::invalid_argument);
  // Pairs: the second step of each ÷ the first.
  const RatioSummary pairs = summarize_pairs({1, 2, 4}, {2, 3, 4});  // 2, 1.5, 1
  EXPECT_DOUBLE_EQ(pairs.median, 1.5);
  EXPECT_DOUBLE_EQ(pairs.low, 1.0);
  EXPECT_DOUBLE_EQ(pairs.high, 2.0);
  EXPECT_EQ(pairs.pairs, 3u);
  EXPECT_THROW(summarize_pairs({1, 2}, {1}), std::invalid_argument);
  EXPECT_THROW(summarize_pairs({}, {}), std::invalid_argument);
}

TEST(Median, OddAndEvenSizes) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_THROW(median({}), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
