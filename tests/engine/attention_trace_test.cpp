#include "engine/attention_trace.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace kvscope {
namespace {

TraceInput lesson() {
  return {.query = {2, 1}, .keys = {{1, 1}, {0, 2}}, .values = {{1, 0}, {0, 1}}, .d_head = 4};
}

TEST(AttentionTrace, LessonEveryStep) {
  const AttentionTrace tr = trace_attention(lesson());
  EXPECT_EQ(tr.raw_scores, (std::vector<float>{3, 2}));
  EXPECT_EQ(tr.scaled_scores, (std::vector<float>{1.5f, 1.0f}));
  EXPECT_EQ(tr.masked_scores, tr.scaled_scores);
  EXPECT_NEAR(tr.weights[0], 0.622, 5e-4);
  EXPECT_NEAR(tr.weights[1], 0.378, 5e-4);
  EXPECT_NEAR(tr.weight_sum, 1.0, 1e-6);
  EXPECT_NEAR(tr.output[0], 0.622, 5e-4);
  EXPECT_NEAR(tr.output[1], 0.378, 5e-4);
  EXPECT_EQ(explain_trace(tr),
            "The output is a blend: 62% of v1 and 38% of v2, not a copy of any single value.");
}

TEST(AttentionTrace, FirstPositionMasksTheFutureKey) {
  TraceInput in = lesson();
  in.position = 0;
  const AttentionTrace tr = trace_attention(in);
  EXPECT_EQ(tr.masked_scores[1], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(tr.weights, (std::vector<float>{1.0f, 0.0f}));  // exactly 1 and exactly 0
  EXPECT_EQ(tr.output, (std::vector<float>{1.0f, 0.0f}));
  EXPECT_NE(explain_trace(tr).find("copy of v1"), std::string::npos);
}

TEST(AttentionTrace, ScaleAlwaysUsesTheTrueHeadSize) {
  TraceInput in = lesson();
  in.d_head = 128;  // truncated illustration of a 128-wide head
  EXPECT_FLOAT_EQ(trace_attention(in).scaled_scores[0], 3.0f / std::sqrt(128.0f));
  in.d_head.reset();  // default: the vectors' length
  EXPECT_FLOAT_EQ(trace_attention(in).scaled_scores[0], 3.0f / std::sqrt(2.0f));
  in.scale = false;
  EXPECT_EQ(trace_attention(in).scaled_scores[0], 3.0f);
}

TEST(AttentionTrace, WeightsSumToOneForManyKeys) {
  TraceInput in{.query = {0.3f, -1.2f, 2.0f}};
  for (int t = 0; t < 50; ++t) {
    in.keys.push_back({std::sin(t * 1.0f), std::cos(t * 0.7f), 0.1f * t});
    in.values.push_back({1.0f * t, -1.0f});
  }
  in.position = 30;
  const AttentionTrace tr = trace_attention(in);
  EXPECT_NEAR(tr.weight_sum, 1.0, 1e-5);
  for (std::size_t t = 31; t < 50; ++t) EXPECT_EQ(tr.weights[t], 0.0f) << t;
}

TEST(AttentionTrace, RejectsBadInputWithClearMessages) {
  auto message = [](TraceInput in) {
    try {
      trace_attention(in);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  TraceInput in = lesson();
  in.keys.clear();
  in.values.clear();
  EXPECT_EQ(message(in), "attention needs at least one key");
  in = lesson();
  in.keys[1] = {1, 2, 3};
  EXPECT_EQ(message(in), "key 2 has 3 elements but the query has 2");
  in = lesson();
  in.values.pop_back();
  EXPECT_EQ(message(in), "2 keys but 1 values: each key needs one value");
  in = lesson();
  in.d_head = 0;
  EXPECT_EQ(message(in), "d_head must be at least 1, got 0");
  in = lesson();
  in.query[0] = std::nanf("");
  EXPECT_EQ(message(in), "the query holds a non-finite value");
  in = lesson();
  in.position = -1;
  EXPECT_EQ(message(in), "position must be 0 or more, got -1");
}

}  // namespace
}  // namespace kvscope
