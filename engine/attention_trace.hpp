#pragma once
// One attention row computed step by step, every intermediate kept: the lesson's method
// as data, for `kvscope trace` and for tests that locate an error at its first wrong step.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvscope {

struct TraceInput {
  std::vector<float> query;                // [d]
  std::vector<std::vector<float>> keys;    // n × [d]
  std::vector<std::vector<float>> values;  // n × [d_v]
  std::optional<std::int64_t> d_head;      // the true head size for the scale; default d
  bool scale = true;                       // false: skip ÷√d_head (for teaching only)
  std::optional<std::int64_t> position;    // 0-based query position; keys after it masked
};

struct AttentionTrace {
  std::size_t d_head = 0;
  float scale_divisor = 1.0f;        // √d_head, or 1 without scaling
  std::size_t position = 0;          // the query's position (default: the last key's)
  std::size_t visible_keys = 0;      // keys at positions ≤ the query's
  std::vector<float> raw_scores;     // q·k_t for every key (masked ones too, for display)
  std::vector<float> scaled_scores;  // raw ÷ √d_head
  std::vector<float> masked_scores;  // scaled, −inf after the query position
  std::vector<float> weights;        // softmax of masked scores; masked keys exactly 0
  float weight_sum = 0.0f;
  std::vector<float> output;  // Σ_t weights[t] · v_t
};

// Throws std::invalid_argument naming the problem: no keys, empty or mismatched vector
// lengths, keys and values of different counts, d_head < 1, a position < 0, non-finite values.
AttentionTrace trace_attention(const TraceInput& input);

// One sentence on what the output means, e.g. "The output is a blend: 62% of v1 and 38% of
// v2, not a copy of either value."
std::string explain_trace(const AttentionTrace& trace);

}  // namespace kvscope
