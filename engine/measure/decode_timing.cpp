#include "engine/measure/decode_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "engine/kv_cache.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "engine/measure/cache_info.hpp"
#include "engine/measure/machine_limits.hpp"
#include "engine/memory.hpp"
#include "kernels/attention.hpp"

namespace kvscope {

double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of no values");
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  return (upper + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

void append_random_context(
    std::size_t tokens, std::size_t kv_width, std::uint64_t seed,
    const std::function<void(const float* k, const float* v, std::size_t n)>& append) {
  const std::size_t chunk = 256;
  std::vector<float> k, v;
  for (std::size_t done = 0; done < tokens; done += chunk) {
    const std::size_t n = std::min(chunk, tokens - done);
    k.resize(n * kv_width);
    v.resize(k.size());
    fill_uniform(k, seed * 2 + done, -1.0f, 1.0f);
    fill_uniform(v, seed * 2 + done + 1, -1.0f, 1.0f);
    append(k.data(), v.data(), n);
  }
}

namespace {

// One decode measurement's setup: the request validated, its caches planned, filled and
// cloned, and its step; time_attention_decode steps one, time_attention_decode_pair two in
// turn.
class DecodeMeasurement {
 public:
  explicit DecodeMeasurement(const DecodeTimingRequest& r)
      : r_(r), config_(validated_config(r)), plan_(plan_for(r, config_, llc_source_)) {
    require_plan_memory(plan_, "this decode measurement");
  }

  const CachePlan& plan() const { return plan_; }
  // The read loop's plan beside this measurement: as many buffers, each of the bytes a
  // step reads per layer (the cache's footprint, not its allocated capacity).
  CachePlan read_plan() const {
    CachePlan read = plan_;
    read.cache_bytes = footprint_bytes();
    return read;
  }

  // Fills the first cache and clones it (separate from the constructor, so that a pair's
  // memory can be checked for both before either allocates).
  void allocate() {
    KvCache first = r_.kv_layout.paged() ? KvCache(config_, r_.kv_dtype,
                                                   std::make_shared<KvPagePool>(KvPageGeometry(
                                                       config_.n_kv_heads(), config_.head_dim(),
                                                       r_.kv_layout.page_tokens, r_.kv_dtype)))
                                         : KvCache(config_, r_.kv_dtype);
    append_random_context(
        config_.capacity(), config_.kv_width(), r_.seed,
        [&](const float* k, const float* v, std::size_t n) { first.append(k, v, n, r_.threads); });
    caches_.emplace(plan_, std::move(first));
    q_.resize(config_.q_width());
    out_.resize(config_.q_width());
    fill_uniform(q_, r_.seed ^ 0x5eedull, -1.0f, 1.0f);
  }

  // One step over every layer's cache, in order; its seconds (flushes after it not counted).
  double step() {
    using clock = std::chrono::steady_clock;
    const auto before = clock::now();
    for (std::int64_t layer = 0; layer < r_.layers; ++layer) {
      const AttentionProblem problem{.q = q_.data(),
                                     .n_queries = 1,
                                     .first_pos = config_.capacity() - 1,
                                     .n_heads = config_.n_heads(),
                                     .kv = caches_->next().view(),
                                     .out = out_.data()};
      attend(problem, r_.isa, r_.threads, r_.compute);
    }
    const double seconds = std::chrono::duration<double>(clock::now() - before).count();
    caches_->end_step(r_.threads);
    return seconds;
  }

  DecodeTiming finish(std::vector<double> step_seconds, int warmup_steps) const {
    DecodeTiming t;
    t.step_seconds = std::move(step_seconds);
    t.warmup_steps = warmup_steps;
    t.plan = plan_;
    t.llc_source = llc_source_;
    t.median_s = median(t.step_seconds);
    t.min_s = *std::min_element(t.step_seconds.begin(), t.step_seconds.end());
    t.max_s = *std::max_element(t.step_seconds.begin(), t.step_seconds.end());
    t.bytes_read_per_layer = footprint_bytes();
    t.bytes_read_per_step = t.bytes_read_per_layer * static_cast<std::uint64_t>(r_.layers);
    t.layer_median_s = t.median_s / static_cast<double>(r_.layers);
    t.unit = attention_compute_unit(r_.kv_dtype, r_.isa, r_.compute,
                                    static_cast<std::size_t>(r_.n_heads / r_.n_kv_heads),
                                    r_.head_dim, r_.kv_layout.page_tokens);
    t.tokens_per_s = 1.0 / t.median_s;
    t.gbps = static_cast<double>(t.bytes_read_per_step) / t.median_s / 1e9;
    return t;
  }

 private:
  std::uint64_t footprint_bytes() const {
    return kv_footprint({.n_kv_heads = r_.n_kv_heads,
                         .head_dim = r_.head_dim,
                         .tokens = r_.tokens,
                         .dtype = r_.kv_dtype})
        .total_bytes;
  }

  static LayerConfig validated_config(const DecodeTimingRequest& r) {
    // LayerConfig validates the attention shape (sizes ≥ 1, heads divide, bytes fit).
    LayerConfig config({.hidden_size = 1,
                        .n_heads = r.n_heads,
                        .n_kv_heads = r.n_kv_heads,
                        .head_dim = r.head_dim,
                        .ffn_size = 1,
                        .capacity = r.tokens});
    if (r.steps < 1)
      throw std::invalid_argument("steps must be at least 1, got " + std::to_string(r.steps));
    if (r.threads < 1) {
      throw std::invalid_argument("threads must be at least 1, got " + std::to_string(r.threads));
    }
    if (r.layers < 1)
      throw std::invalid_argument("layers must be at least 1, got " + std::to_string(r.layers));
    if (!(r.duration_s >= 0.0)) {
      throw std::invalid_argument("duration must be 0 or more seconds, got " +
                                  std::to_string(r.duration_s));
    }
    return config;
  }
  static CachePlan plan_for(const DecodeTimingRequest& r, const LayerConfig& config,
                            std::string& llc_source) {
    std::uint64_t llc = r.llc_bytes;
    llc_source = "given";
    if (llc == 0) {
      const LastLevelCache detected = detect_llc();
      llc = detected.bytes;
      llc_source = detected.source;
    }
    return plan_caches(config.kv_cache_bytes(r.kv_dtype), static_cast<std::uint64_t>(r.layers),
                       r.cache_state, r.cold_method, llc, physical_memory_bytes(),
                       last_level_caches_reached(r.threads));
  }

  DecodeTimingRequest r_;
  LayerConfig config_;
  std::string llc_source_;
  CachePlan plan_;
  std::optional<CacheRotation> caches_;
  std::vector<float> q_, out_;
};

}  // namespace

DecodeTiming time_attention_decode(const DecodeTimingRequest& r) {
  DecodeMeasurement m(r);
  std::optional<ReadLoop> read;
  if (r.read_loop_beside) {
    require_plans_memory({m.plan(), m.read_plan()}, "this decode measurement and its read loop");
    read.emplace(m.read_plan(), r.isa, r.threads);
  }
  m.allocate();
  const int warmup_steps = warm_up(r.warmup_steps, r.warmup_s, [&] {
    m.step();
    if (read) read->step();
  });
  std::vector<double> steps, read_steps;
  double timed = 0.0;  // seconds inside timed steps; flushes between them do not count
  while (static_cast<int>(steps.size()) < r.steps || timed < r.duration_s) {
    // The read loop first every other step: what comes second in a pair (the other's lines
    // just streamed, the threads just woken) does so for both alike.
    if (read && steps.size() % 2 == 1) read_steps.push_back(read->step());
    steps.push_back(m.step());
    if (read && steps.size() % 2 == 1) read_steps.push_back(read->step());
    timed += steps.back();
  }
  DecodeTiming t = m.finish(std::move(steps), warmup_steps);
  t.read_seconds = std::move(read_steps);
  return t;
}

PairedDecodeTiming time_attention_decode_pair(const DecodeTimingRequest& a, DecodeTimingRequest b) {
  // The pair runs a's schedule: its warm-up, steps and duration.
  b.warmup_steps = a.warmup_steps, b.warmup_s = a.warmup_s;
  b.steps = a.steps, b.duration_s = a.duration_s;
  b.read_loop_beside = false;
  DecodeMeasurement first(a), second(b);
  std::optional<ReadLoop> read;
  if (a.read_loop_beside) {
    require_plans_memory({first.plan(), second.plan(), first.read_plan()},
                         "this paired decode measurement and its read loop");
    read.emplace(first.read_plan(), a.isa, a.threads);
  } else {
    require_pair_memory(first.plan(), second.plan(), "this paired decode measurement");
  }
  first.allocate();
  second.allocate();
  const int warmup_steps = warm_up(a.warmup_steps, a.warmup_s, [&] {
    first.step();
    second.step();
    if (read) read->step();
  });
  std::vector<double> steps_a, steps_b, read_steps;
  double timed = 0.0;
  while (static_cast<int>(steps_a.size()) < a.steps || timed < a.duration_s) {
    // a then b, then b then a: a step that gains or loses from coming second in a pair (the
    // other's caches just read, its threads just woken) does so for both sides alike.
    if (steps_a.size() % 2 == 0) {
      steps_a.push_back(first.step());
      steps_b.push_back(second.step());
    } else {
      steps_b.push_back(second.step());
      steps_a.push_back(first.step());
    }
    if (read) read_steps.push_back(read->step());
    timed += steps_a.back() + steps_b.back();
  }
  PairedDecodeTiming pair;
  for (std::size_t i = 0; i < steps_a.size(); ++i) pair.ratios.push_back(steps_b[i] / steps_a[i]);
  pair.ratio = summarize_ratios(pair.ratios);
  pair.a = first.finish(std::move(steps_a), warmup_steps);
  pair.b = second.finish(std::move(steps_b), warmup_steps);
  pair.a.read_seconds = read_steps;
  pair.b.read_seconds = std::move(read_steps);
  return pair;
}

RatioSummary summarize_ratios(std::vector<double> ratios) {
  if (ratios.empty()) throw std::invalid_argument("summary of no ratios");
  std::sort(ratios.begin(), ratios.end());
  // Quartiles by the nearest rank: with one or two pairs, the extremes.
  const auto rank = [&](double q) {
    const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(ratios.size())));
    return ratios[i == 0 ? 0 : i - 1];
  };
  return {.median = median(ratios), .low = rank(0.25), .high = rank(0.75), .pairs = ratios.size()};
}

RatioSummary summarize_pairs(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) {
    throw std::invalid_argument("pairs of steps need as many of each (" + std::to_string(a.size()) +
                                " and " + std::to_string(b.size()) + ")");
  }
  std::vector<double> ratios;
  for (std::size_t i = 0; i < a.size(); ++i) ratios.push_back(b[i] / a[i]);
  return summarize_ratios(std::move(ratios));
}

}  // namespace kvscope
