#include "engine/measure/mla_timing.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/kv_footprint.hpp"
#include "engine/layer_config.hpp"
#include "engine/layer_weights.hpp"
#include "engine/measure/cache_info.hpp"
#include "engine/memory.hpp"
#include "engine/mla_attention.hpp"

namespace kvscope {

DecodeTiming time_mla_attention_decode(const DecodeTimingRequest& r, std::int64_t kv_lora_rank,
                                       std::int64_t qk_rope_head_dim) {
  // LayerConfig validates the sizes; nope and v do not shape the cache.
  LayerShape shape{.hidden_size = 1,
                   .n_heads = r.n_heads,
                   .n_kv_heads = r.n_heads,
                   .head_dim = qk_rope_head_dim,
                   .ffn_size = 1,
                   .capacity = r.tokens};
  shape.mla = {.kv_lora_rank = kv_lora_rank,
               .qk_nope_head_dim = 1,
               .qk_rope_head_dim = qk_rope_head_dim,
               .v_head_dim = 1};
  const LayerConfig config(shape);
  if (r.steps < 1)
    throw std::invalid_argument("steps must be at least 1, got " + std::to_string(r.steps));
  if (r.threads < 1)
    throw std::invalid_argument("threads must be at least 1, got " + std::to_string(r.threads));
  if (r.layers < 1)
    throw std::invalid_argument("layers must be at least 1, got " + std::to_string(r.layers));
  DecodeTiming t;
  std::uint64_t llc = r.llc_bytes;
  t.llc_source = "given";
  if (llc == 0) {
    const LastLevelCache detected = detect_llc();
    llc = detected.bytes;
    t.llc_source = detected.source;
  }
  t.plan = plan_caches(config.kv_cache_bytes(KvDtype::f32), static_cast<std::uint64_t>(r.layers),
                       r.cache_state, r.cold_method, llc, physical_memory_bytes(),
                       last_level_caches_reached(r.threads));
  require_plan_memory(t.plan, "this MLA decode measurement");

  // The same seeded rows in every cache of the plan (a cold copy differs only in address).
  std::vector<std::unique_ptr<MlaAttention>> caches;
  for (std::size_t i = 0; i < t.plan.caches; ++i) {
    caches.push_back(std::make_unique<MlaAttention>(config, r.threads));
    std::vector<float> rows;
    for (std::size_t done = 0; done < config.capacity(); done += 256) {  // small staging
      const std::size_t n = std::min<std::size_t>(256, config.capacity() - done);
      rows.resize(n * config.mla_row_width());
      fill_uniform(rows, r.seed * 2 + done, -1.0f, 1.0f);
      caches.back()->append(rows.data(), n);
    }
  }
  const std::size_t H = config.n_heads(), L = config.kv_lora_rank();
  const std::size_t R = config.qk_rope_head_dim();
  std::vector<float> q_lat(H * L), q_pe(H * R), latent(H * L);
  fill_uniform(q_lat, r.seed ^ 0x5eedull, -0.05f, 0.05f);
  fill_uniform(q_pe, r.seed ^ 0x5eedull ^ 1, -0.05f, 0.05f);
  std::size_t cursor = 0;
  std::vector<const MlaAttention*> read;
  const auto step = [&] {
    read.clear();
    for (std::int64_t layer = 0; layer < r.layers; ++layer) {
      const MlaAttention& cache = *caches[cursor++ % caches.size()];
      cache.attend_latent(q_lat.data(), q_pe.data(), cache.size(), latent.data());
      read.push_back(&cache);
    }
  };
  const auto end_step = [&] {
    if (r.cache_state != CacheState::cold || t.plan.method != ColdMethod::flush) return;
    for (const MlaAttention* cache : read)
      flush_from_caches(cache->row(0), cache->bytes(), r.threads);
  };
  t.warmup_steps = warm_up(r.warmup_steps, r.warmup_s, [&] {
    step();
    end_step();
  });
  using clock = std::chrono::steady_clock;
  double timed = 0.0;
  while (static_cast<int>(t.step_seconds.size()) < r.steps || timed < r.duration_s) {
    const auto before = clock::now();
    step();
    t.step_seconds.push_back(std::chrono::duration<double>(clock::now() - before).count());
    timed += t.step_seconds.back();
    end_step();
  }
  t.median_s = median(t.step_seconds);
  t.min_s = *std::min_element(t.step_seconds.begin(), t.step_seconds.end());
  t.max_s = *std::max_element(t.step_seconds.begin(), t.step_seconds.end());
  t.bytes_read_per_layer =
      kv_footprint({.tokens = r.tokens, .mla_latent = kv_lora_rank, .mla_rope = qk_rope_head_dim})
          .total_bytes;
  t.bytes_read_per_step = t.bytes_read_per_layer * static_cast<std::uint64_t>(r.layers);
  t.layer_median_s = t.median_s / static_cast<double>(r.layers);
  t.unit = ComputeUnit::fp32_fma;
  t.tokens_per_s = 1.0 / t.median_s;
  t.gbps = static_cast<double>(t.bytes_read_per_step) / t.median_s / 1e9;
  return t;
}

}  // namespace kvscope
