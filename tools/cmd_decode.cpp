// `kvscope decode`: time decode-step attention over a filled KV cache.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "engine/kv_footprint.hpp"
#include "engine/layer_config.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/measure/machine_quiet.hpp"
#include "engine/measure/repetitions.hpp"
#include "engine/memory.hpp"
#include "tools/cli_limits.hpp"
#include "tools/cli_support.hpp"
#include "tools/commands.hpp"
#include "tools/report_output.hpp"

namespace kvscope::cli {
namespace {

struct DecodeFlags {
  AttentionShapeFlags shape;
  ComputeFlags compute;
  CacheStateFlags cache;
  KvTypes dtype = KvDtype::f32;
  KvLayout layout;
  int steps = 20;
  int repetitions = 3;
  double duration = 0.0;
  std::string versus;  // --versus: the second configuration of a paired measurement
  bool json = false;
};

// The request the flags describe, validated as far as it can be without allocating: the
// attention shape (LayerConfig names a bad size or head ratio).
DecodeTimingRequest decode_request(DecodeFlags& f, const CLI::App& cmd) {
  f.shape.resolve(cmd);
  f.shape.refuse_mla("`kvscope decode`");
  const DecodeTimingRequest request{.n_heads = f.shape.heads,
                                    .n_kv_heads = f.shape.kv_heads,
                                    .head_dim = f.shape.d_head,
                                    // A sliding window W: the step reads the W cached rows.
                                    .tokens = f.shape.cached_tokens(f.shape.tokens),
                                    .kv_dtype = f.dtype,
                                    .isa = f.compute.resolved_isa(),
                                    .compute = f.compute.resolved_compute(),
                                    .threads = f.compute.resolved_threads(),
                                    .steps = std::max(f.steps, f.repetitions),
                                    .duration_s = f.duration,
                                    .layers = f.shape.layers,
                                    .cache_state = f.cache.state,
                                    .cold_method = f.cache.method,
                                    .kv_layout = f.layout};
  (void)LayerConfig({.hidden_size = 1,
                     .n_heads = request.n_heads,
                     .n_kv_heads = request.n_kv_heads,
                     .head_dim = request.head_dim,
                     .ffn_size = 1,
                     .capacity = request.tokens});
  return request;
}

// --versus "name=value[,name=value…]": request `a` with those settings changed, the second
// side of a paired measurement. Names: kv-layout, kv-dtype, compute, isa, threads (the same
// values as the flags of those names). Repeating a's own settings is allowed: the pair's
// ratio then shows the noise floor.
DecodeTimingRequest versus_request(DecodeTimingRequest b, const std::string& spec) {
  const std::string names = "kv-layout, kv-dtype, compute, isa or threads";
  if (spec.empty()) throw std::invalid_argument("--versus: expected name=value (" + names + ")");
  for (std::size_t begin = 0; begin <= spec.size();) {
    const std::size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string item = spec.substr(begin, end - begin);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw std::invalid_argument("--versus: '" + item + "' is not name=value (" + names + ")");
    }
    const std::string name = item.substr(0, eq);
    std::string value = item.substr(eq + 1);
    try {
      if (name == "kv-layout") {
        b.kv_layout = parse_kv_layout(value);
      } else if (name == "kv-dtype") {
        b.kv_dtype = parse_kv_types(value);
      } else if (name == "compute") {
        b.compute = parse_compute_mode(value);
      } else if (name == "isa") {
        b.isa = select_isa(value);
      } else if (name == "threads") {
        const std::string error = thread_count()(value);
        if (!error.empty()) throw std::invalid_argument(error);
        b.threads = std::stoi(value);
      } else {
        throw std::invalid_argument("unknown setting '" + name + "' (" + names + ")");
      }
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--versus " + item + ": " + e.what());
    }
    begin = end + 1;
  }
  return b;
}

// The timed steps cut into `repetitions` consecutive runs (decode measures one shape, so
// there is nothing to interleave with): their statistics and the machine's verdict.
struct DecodeSpread {
  SampleStats steps;
  std::vector<double> repetition_medians;
  QuietVerdict verdict;
};

DecodeSpread decode_spread(const DecodeTiming& t, int repetitions, const MachineSample& before) {
  DecodeSpread d;
  d.steps = summarize(t.step_seconds);
  const std::size_t n = t.step_seconds.size();
  for (int i = 0; i < repetitions; ++i) {
    const auto begin =
        t.step_seconds.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(i) /
                                                             static_cast<std::size_t>(repetitions));
    const auto end =
        t.step_seconds.begin() + static_cast<std::ptrdiff_t>(n * static_cast<std::size_t>(i + 1) /
                                                             static_cast<std::size_t>(repetitions));
    if (begin != end) d.repetition_medians.push_back(median({begin, end}));
  }
  MachineObservations seen = observe(before, sample_machine());
  seen.step_spreads.push_back(spread(d.repetition_medians));
  d.verdict = judge_quiet(seen);
  return d;
}

}  // namespace

nlohmann::json decode_json(const DecodeTimingRequest& r, const DecodeTiming& t,
                           const DecodeSpread& d) {
  return {{"variant", attention_variant(r.n_heads, r.n_kv_heads)},
          {"n_heads", r.n_heads},
          {"n_kv_heads", r.n_kv_heads},
          {"head_dim", r.head_dim},
          {"tokens", r.tokens},
          {"kv_dtype", to_string(r.kv_dtype)},
          {"k_dtype", to_string(r.kv_dtype.k)},
          {"v_dtype", to_string(r.kv_dtype.v)},
          {"kv_layout", to_string(r.kv_layout)},
          {"isa", to_string(r.isa)},
          {"compute", to_string(r.compute)},
          {"compute_unit", to_string(t.unit)},
          {"threads", r.threads},
          {"steps", t.step_seconds.size()},
          {"warmup_steps", t.warmup_steps},
          {"attn_seconds_median", t.median_s},
          {"attn_seconds_min", t.min_s},
          {"attn_seconds_max", t.max_s},
          {"repetitions", d.repetition_medians.size()},
          {"attn_seconds_mean", d.steps.mean},
          {"attn_seconds_stdev", d.steps.stdev},
          {"attn_seconds_repetitions", d.repetition_medians},
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
          {"llc_source", t.llc_source},
          {"unstable", d.verdict.unstable},
          {"unstable_reason", d.verdict.reason}};
}

void print_decode(const DecodeTimingRequest& r, const DecodeTiming& t, const DecodeSpread& d) {
  std::printf(
      "decode attention: %lld heads, %lld kv heads (%s), d_head %lld, %s tokens, %s cache (%s), "
      "isa %s, %s compute on %s, %d thread%s\n",
      static_cast<long long>(r.n_heads), static_cast<long long>(r.n_kv_heads),
      attention_variant(r.n_heads, r.n_kv_heads).c_str(), static_cast<long long>(r.head_dim),
      with_commas(r.tokens).c_str(), std::string(to_string(r.kv_dtype)).c_str(),
      to_string(r.kv_layout).c_str(), std::string(to_string(r.isa)).c_str(),
      std::string(to_string(r.compute)).c_str(), std::string(to_string(t.unit)).c_str(), r.threads,
      r.threads == 1 ? "" : "s");
  std::printf("  caches               %s; last-level cache %s (%s)\n", t.plan.describe().c_str(),
              format_bytes(t.plan.llc_bytes).c_str(), t.llc_source.c_str());
  if (r.layers > 1) {
    std::printf("  layers               %lld, read in order each step; per layer %s, %s\n",
                static_cast<long long>(r.layers), format_bytes(t.bytes_read_per_layer).c_str(),
                format_seconds(t.layer_median_s).c_str());
  }
  std::printf("  cache read per step  %s\n", format_bytes(t.bytes_read_per_step).c_str());
  std::printf(
      "  step time            median %s ± %s (min %s, max %s) over %zu steps in %zu "
      "repetitions after %d warm-up steps (%.0f ms or more)\n",
      format_seconds(t.median_s).c_str(), format_seconds(d.steps.stdev).c_str(),
      format_seconds(t.min_s).c_str(), format_seconds(t.max_s).c_str(), t.step_seconds.size(),
      d.repetition_medians.size(), t.warmup_steps, r.warmup_s * 1e3);
  std::printf("  throughput           %.1f tokens/s, %.2f GB/s of cache read\n", t.tokens_per_s,
              t.gbps);
  if (d.verdict.unstable) std::printf("%s\n", warning_line(d.verdict).c_str());
}

void print_ratio(const std::string& spec, const RatioSummary& r) {
  std::printf(
      "b (--versus %s) ÷ a, step by step: median %.3f, middle half %.3f–%.3f, over %zu pairs\n",
      spec.c_str(), r.median, r.low, r.high, r.pairs);
}

void add_decode_command(CLI::App& app, OnParsed then) {
  auto flags = std::make_shared<DecodeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "decode", "time decode-step attention (one query per head) over a filled KV cache");
  flags->shape.add_to(*cmd, /*with_layers=*/true);
  flags->compute.add_to(*cmd);
  flags->cache.add_to(*cmd);
  add_kv_dtype_flag(*cmd, flags->dtype);
  add_kv_layout_flag(*cmd, flags->layout);
  cmd->add_option("--steps", flags->steps, "timed steps after warm-up")
      ->capture_default_str()
      ->transform(integer_in(1, kMaxSteps));
  cmd->add_option("--repetitions", flags->repetitions,
                  "split the timed steps into this many repetitions; their spread is checked")
      ->capture_default_str()
      ->transform(integer_in(1, kMaxRepetitions));
  cmd->add_option("--duration", flags->duration,
                  "keep stepping for this many seconds (for perf record)")
      ->transform(real_in(0, kMaxDurationSeconds));
  cmd->add_option("--versus", flags->versus,
                  "a second configuration, timed step by step in turn with the first (a, b, a, "
                  "b, …) so that their ratio holds on a machine whose speed drifts: "
                  "name=value[,name=value…] with kv-layout, kv-dtype, compute, isa, threads");
  cmd->add_flag("--json", flags->json, "print a JSON object");
  cmd->callback([flags, cmd, then] {
    const DecodeTimingRequest request = decode_request(*flags, *cmd);
    const bool paired = cmd->count("--versus") > 0;
    const DecodeTimingRequest other =
        paired ? versus_request(request, flags->versus) : DecodeTimingRequest{};
    if (then == OnParsed::validate_only) return;
    const MachineSample before = sample_machine();
    if (paired) {
      const PairedDecodeTiming pair = time_attention_decode_pair(request, other);
      const DecodeSpread spread_a = decode_spread(pair.a, flags->repetitions, before);
      const DecodeSpread spread_b = decode_spread(pair.b, flags->repetitions, before);
      if (flags->json) {
        const nlohmann::json j = {{"a", decode_json(request, pair.a, spread_a)},
                                  {"b", decode_json(other, pair.b, spread_b)},
                                  {"versus", flags->versus},
                                  {"b_over_a", ratio_json(pair.ratio)}};
        std::cout << j.dump(2) << "\n";
      } else {
        std::printf("a: ");
        print_decode(request, pair.a, spread_a);
        std::printf("b: ");
        print_decode(other, pair.b, spread_b);
        print_ratio(flags->versus, pair.ratio);
      }
      return;
    }
    const DecodeTiming timing = time_attention_decode(request);
    const DecodeSpread spread = decode_spread(timing, flags->repetitions, before);
    if (flags->json) {
      nlohmann::json j = decode_json(request, timing, spread);
      j["context"] = flags->shape.tokens;  // tokens is what the cache holds under a window
      j["window"] = flags->shape.window;
      std::cout << j.dump(2) << "\n";
    } else {
      if (request.tokens < flags->shape.tokens) {
        std::printf(
            "sliding window %lld: at a context of %s tokens the cache holds, and a step "
            "reads, the last %s\n",
            static_cast<long long>(flags->shape.window), with_commas(flags->shape.tokens).c_str(),
            with_commas(request.tokens).c_str());
      }
      print_decode(request, timing, spread);
    }
  });
}

}  // namespace kvscope::cli
