#include "engine/measure/decode_timing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>

#include "engine/kv_cache.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "engine/measure/cache_info.hpp"
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

DecodeTiming time_attention_decode(const DecodeTimingRequest& r) {
  // LayerConfig validates the attention shape (sizes ≥ 1, heads divide, bytes fit).
  const LayerConfig config({.hidden_size = 1,
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
  DecodeTiming t;
  std::uint64_t llc = r.llc_bytes;
  t.llc_source = "given";
  if (llc == 0) {
    const LastLevelCache detected = detect_llc();
    llc = detected.bytes;
    t.llc_source = detected.source;
  }
  t.plan = plan_caches(config.kv_cache_bytes(r.kv_dtype), static_cast<std::uint64_t>(r.layers),
                       r.cache_state, r.cold_method, llc, physical_memory_bytes(),
                       last_level_caches_reached(r.threads));
  require_plan_memory(t.plan, "this decode measurement");

  KvCache first = r.kv_layout.paged() ? KvCache(config, r.kv_dtype,
                                                std::make_shared<KvPagePool>(KvPageGeometry(
                                                    config.n_kv_heads(), config.head_dim(),
                                                    r.kv_layout.page_tokens, r.kv_dtype)))
                                      : KvCache(config, r.kv_dtype);
  append_random_context(
      config.capacity(), config.kv_width(), r.seed,
      [&](const float* k, const float* v, std::size_t n) { first.append(k, v, n, r.threads); });
  CacheRotation caches(t.plan, std::move(first));
  std::vector<float> q(config.q_width()), out(config.q_width());
  fill_uniform(q, r.seed ^ 0x5eedull, -1.0f, 1.0f);
  const auto step = [&] {
    for (std::int64_t layer = 0; layer < r.layers; ++layer) {
      const AttentionProblem problem{.q = q.data(),
                                     .n_queries = 1,
                                     .first_pos = config.capacity() - 1,
                                     .n_heads = config.n_heads(),
                                     .kv = caches.next().view(),
                                     .out = out.data()};
      attend(problem, r.isa, r.threads, r.compute);
    }
  };

  t.warmup_steps = warm_up(r.warmup_steps, r.warmup_s, [&] {
    step();
    caches.end_step(r.threads);
  });
  using clock = std::chrono::steady_clock;
  double timed = 0.0;  // seconds inside timed steps; flushes between them do not count
  while (static_cast<int>(t.step_seconds.size()) < r.steps || timed < r.duration_s) {
    const auto before = clock::now();
    step();
    t.step_seconds.push_back(std::chrono::duration<double>(clock::now() - before).count());
    timed += t.step_seconds.back();
    caches.end_step(r.threads);
  }
  t.median_s = median(t.step_seconds);
  t.min_s = *std::min_element(t.step_seconds.begin(), t.step_seconds.end());
  t.max_s = *std::max_element(t.step_seconds.begin(), t.step_seconds.end());
  t.bytes_read_per_layer = kv_footprint({.n_kv_heads = r.n_kv_heads,
                                         .head_dim = r.head_dim,
                                         .tokens = r.tokens,
                                         .dtype = r.kv_dtype})
                               .total_bytes;
  t.bytes_read_per_step = t.bytes_read_per_layer * static_cast<std::uint64_t>(r.layers);
  t.layer_median_s = t.median_s / static_cast<double>(r.layers);
  t.unit = attention_compute_unit(r.kv_dtype, r.isa, r.compute,
                                  static_cast<std::size_t>(r.n_heads / r.n_kv_heads), r.head_dim,
                                  r.kv_layout.page_tokens);
  t.tokens_per_s = 1.0 / t.median_s;
  t.gbps = static_cast<double>(t.bytes_read_per_step) / t.median_s / 1e9;
  return t;
}

}  // namespace kvscope
