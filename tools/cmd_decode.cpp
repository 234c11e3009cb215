// `kvscope decode`: time decode-step attention over a filled KV cache.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/kv_footprint.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/memory.hpp"
#include "tools/cli_support.hpp"
#include "tools/commands.hpp"

namespace kvscope::cli {
namespace {

struct DecodeFlags {
  AttentionShapeFlags shape;
  ComputeFlags compute;
  CacheStateFlags cache;
  KvTypes dtype = KvDtype::f32;
  int steps = 20;
  double duration = 0.0;
  bool json = false;
};

}  // namespace

nlohmann::json decode_json(const DecodeTimingRequest& r, const DecodeTiming& t) {
  return {{"variant", attention_variant(r.n_heads, r.n_kv_heads)},
          {"n_heads", r.n_heads},
          {"n_kv_heads", r.n_kv_heads},
          {"head_dim", r.head_dim},
          {"tokens", r.tokens},
          {"kv_dtype", to_string(r.kv_dtype)},
          {"k_dtype", to_string(r.kv_dtype.k)},
          {"v_dtype", to_string(r.kv_dtype.v)},
          {"isa", to_string(r.isa)},
          {"compute", to_string(r.compute)},
          {"compute_unit", to_string(t.unit)},
          {"threads", r.threads},
          {"steps", t.step_seconds.size()},
          {"attn_seconds_median", t.median_s},
          {"attn_seconds_min", t.min_s},
          {"attn_seconds_max", t.max_s},
          {"attn_tokens_per_s", t.tokens_per_s},
          {"bytes_read_per_step", t.bytes_read_per_step},
          {"attn_gbps", t.gbps},
          {"layers", r.layers},
          {"layer_seconds_median", t.layer_median_s},
          {"bytes_read_per_layer", t.bytes_read_per_layer},
          {"cache_state", to_string(t.plan.state)},
          {"cold_method",
           t.plan.state == CacheState::warm ? "none" : std::string(to_string(t.plan.method))},
          {"caches_allocated", t.plan.caches},
          {"llc_bytes", t.plan.llc_bytes},
          {"llc_source", t.llc_source}};
}

void print_decode(const DecodeTimingRequest& r, const DecodeTiming& t) {
  std::printf(
      "decode attention: %lld heads, %lld kv heads (%s), d_head %lld, %s tokens, %s cache, "
      "isa %s, %s compute on %s, %d thread%s\n",
      static_cast<long long>(r.n_heads), static_cast<long long>(r.n_kv_heads),
      attention_variant(r.n_heads, r.n_kv_heads).c_str(), static_cast<long long>(r.head_dim),
      with_commas(r.tokens).c_str(), std::string(to_string(r.kv_dtype)).c_str(),
      std::string(to_string(r.isa)).c_str(), std::string(to_string(r.compute)).c_str(),
      std::string(to_string(t.unit)).c_str(), r.threads, r.threads == 1 ? "" : "s");
  std::printf("  caches               %s; last-level cache %s (%s)\n", t.plan.describe().c_str(),
              format_bytes(t.plan.llc_bytes).c_str(), t.llc_source.c_str());
  if (r.layers > 1) {
    std::printf("  layers               %lld, read in order each step; per layer %s, %s\n",
                static_cast<long long>(r.layers), format_bytes(t.bytes_read_per_layer).c_str(),
                format_seconds(t.layer_median_s).c_str());
  }
  std::printf("  cache read per step  %s\n", format_bytes(t.bytes_read_per_step).c_str());
  std::printf("  step time            median %s (min %s, max %s) over %zu steps after %d warm-up\n",
              format_seconds(t.median_s).c_str(), format_seconds(t.min_s).c_str(),
              format_seconds(t.max_s).c_str(), t.step_seconds.size(), r.warmup_steps);
  std::printf("  throughput           %.1f tokens/s, %.2f GB/s of cache read\n", t.tokens_per_s,
              t.gbps);
}

void add_decode_command(CLI::App& app) {
  auto flags = std::make_shared<DecodeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "decode", "time decode-step attention (one query per head) over a filled KV cache");
  flags->shape.add_to(*cmd, /*with_layers=*/true);
  flags->compute.add_to(*cmd);
  flags->cache.add_to(*cmd);
  add_kv_dtype_flag(*cmd, flags->dtype);
  cmd->add_option("--steps", flags->steps, "timed steps after warm-up")->capture_default_str();
  cmd->add_option("--duration", flags->duration,
                  "keep stepping for this many seconds (for perf record)");
  cmd->add_flag("--json", flags->json, "print a JSON object");
  cmd->callback([flags, cmd] {
    flags->shape.resolve(*cmd);
    const DecodeTimingRequest request{.n_heads = flags->shape.heads,
                                      .n_kv_heads = flags->shape.kv_heads,
                                      .head_dim = flags->shape.d_head,
                                      .tokens = flags->shape.tokens,
                                      .kv_dtype = flags->dtype,
                                      .isa = flags->compute.resolved_isa(),
                                      .compute = flags->compute.resolved_compute(),
                                      .threads = flags->compute.resolved_threads(),
                                      .steps = flags->steps,
                                      .duration_s = flags->duration,
                                      .layers = flags->shape.layers,
                                      .cache_state = flags->cache.state,
                                      .cold_method = flags->cache.method};
    const DecodeTiming timing = time_attention_decode(request);
    if (flags->json) {
      std::cout << decode_json(request, timing).dump(2) << "\n";
    } else {
      print_decode(request, timing);
    }
  });
}

}  // namespace kvscope::cli
