#include "engine/measure/report.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "engine/checked_math.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/layer_config.hpp"
#include "engine/measure/attn_accuracy.hpp"
#include "engine/measure/cache_info.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/measure/layer_timing.hpp"
#include "engine/measure/machine_limits.hpp"
#include "engine/measure/machine_quiet.hpp"
#include "engine/measure/mla_timing.hpp"
#include "engine/measure/repetitions.hpp"
#include "engine/memory.hpp"
#include "engine/mla_attention.hpp"

namespace kvscope {
namespace {

bool is_mla(const ReportRequest& r) { return r.mla.kv_lora_rank > 0; }

// One row's shape before its cache type: the context, kv heads and window (0: none).
struct RowShape {
  std::int64_t tokens, kv_heads, window;
};

// The rows' shapes in report order: per context, each kv-head count, then each window
// below that context (a window at or above it would read what full attention reads).
std::vector<RowShape> row_shapes(const ReportRequest& r) {
  std::vector<RowShape> shapes;
  for (std::int64_t tokens : r.tokens) {
    if (is_mla(r)) {
      shapes.push_back({tokens, r.n_heads, 0});
      continue;
    }
    for (std::int64_t kv_heads : r.kv_heads) shapes.push_back({tokens, kv_heads, 0});
    for (std::int64_t window : r.windows) {
      if (window < tokens) shapes.push_back({tokens, r.window_kv_heads, window});
    }
  }
  return shapes;
}

LayerConfig layer_config(const ReportRequest& r, std::int64_t kv_heads, std::int64_t tokens,
                         std::int64_t window = 0) {
  // Capacity: the context, the warm-up step and the timed steps.
  if (is_mla(r)) {
    LayerShape s{.hidden_size = r.hidden_size,
                 .n_heads = r.n_heads,
                 .n_kv_heads = r.n_heads,
                 .head_dim = r.mla.qk_rope_head_dim,
                 .ffn_size = r.ffn_size,
                 .capacity = tokens + r.steps + 2};
    s.mla = r.mla;
    return LayerConfig(s);
  }
  return LayerConfig({.hidden_size = r.hidden_size,
                      .n_heads = r.n_heads,
                      .n_kv_heads = kv_heads,
                      .head_dim = r.head_dim,
                      .ffn_size = r.ffn_size,
                      .capacity = tokens + r.steps + 2,
                      .sliding_window = window});
}

std::uint64_t report_llc_bytes(const ReportRequest& r, std::string* source) {
  if (r.llc_bytes > 0) {
    if (source) *source = "given";
    return r.llc_bytes;
  }
  const LastLevelCache llc = detect_llc();
  if (source) *source = llc.source;
  return llc.bytes;
}

CachePlan report_plan(const ReportRequest& r, const LayerConfig& config, KvTypes dtype,
                      std::uint64_t llc) {
  if (r.layers < 1)
    throw std::invalid_argument("layers must be at least 1, got " + std::to_string(r.layers));
  return plan_caches(config.kv_cache_bytes(dtype), static_cast<std::uint64_t>(r.layers),
                     r.cache_state, r.cold_method, llc, physical_memory_bytes(),
                     last_level_caches_reached(r.threads));
}

constexpr int kReadLoopRepeats = 7;  // read-loop sweeps per row, shared among the repetitions
constexpr int kPeakRepeats = 3;      // runs of each compute-peak probe per row and repetition

// A row's shape, sizes and FLOPs, before anything is measured.
ReportRow row_shape(const ReportRequest& r, const RowShape& shape, KvTypes dtype,
                    KvLayout layout = {}) {
  const std::int64_t tokens = shape.tokens, kv_heads = shape.kv_heads;
  ReportRow row;
  row.kv_layout = layout;
  if (is_mla(r)) {
    const std::int64_t latent = r.mla.kv_lora_rank, rope = r.mla.qk_rope_head_dim;
    row.variant = "MLA";
    row.n_heads = r.n_heads;
    row.n_kv_heads = 1;
    row.head_dim = latent + rope;
    row.tokens = tokens;
    row.layers = r.layers;
    row.kv_dtype = KvDtype::f32;
    row.isa = r.isa;
    row.compute = r.compute;
    row.threads = r.threads;
    row.cache_state = r.cache_state;
    const KvFootprint fp = kv_footprint(
        {.tokens = tokens, .layers = r.layers, .mla_latent = latent, .mla_rope = rope});
    row.cache_bytes = fp.bytes_per_layer;
    row.cache_bytes_all_layers = fp.total_bytes;
    row.flops_per_step =
        mla_decode_flops(static_cast<std::uint64_t>(r.n_heads), static_cast<std::uint64_t>(latent),
                         static_cast<std::uint64_t>(rope), static_cast<std::uint64_t>(tokens));
    return row;
  }
  row.variant = attention_variant(r.n_heads, kv_heads);
  if (shape.window > 0) row.variant += " SWA-" + std::to_string(shape.window);
  row.n_heads = r.n_heads;
  row.n_kv_heads = kv_heads;
  row.head_dim = r.head_dim;
  row.tokens = tokens;
  row.window = shape.window;
  row.layers = r.layers;
  row.kv_dtype = dtype;
  row.isa = r.isa;
  row.compute = r.compute;
  row.threads = r.threads;
  row.cache_state = r.cache_state;
  const KvFootprint fp = kv_footprint({.n_kv_heads = kv_heads,
                                       .head_dim = r.head_dim,
                                       .tokens = row.cached_tokens(),
                                       .layers = r.layers,
                                       .dtype = dtype});
  row.cache_bytes = fp.bytes_per_layer;
  row.cache_bytes_all_layers = fp.total_bytes;
  row.flops_per_step = decode_attention_flops(r.n_heads, r.head_dim, row.cached_tokens());
  return row;
}

// Whether rows a and b cache the same values (layouts vary fastest and change none).
bool same_values(const ReportRow& a, const ReportRow& b) {
  return a.tokens == b.tokens && a.n_kv_heads == b.n_kv_heads && a.kv_dtype == b.kv_dtype &&
         a.window == b.window;
}

// Whether `paged` is `flat`'s shape over pages: the pair whose steps the report takes in turn.
bool paged_pair(const ReportRow& flat, const ReportRow& paged) {
  return !flat.kv_layout.paged() && paged.kv_layout.paged() && same_values(flat, paged);
}

// The row's figures from every timed step (all layers) of every repetition, and the read
// loop's step taken beside each (empty where the read loop was timed apart: MLA).
void finish_row(ReportRow& row, const std::vector<double>& model_steps,
                const std::vector<double>& read_steps, int repetitions) {
  const double layers = static_cast<double>(row.layers);
  std::vector<double> layer_steps;
  for (double s : model_steps) layer_steps.push_back(s / layers);
  const SampleStats stats = summarize(layer_steps);
  row.repetitions = repetitions;
  row.attn_seconds_median = stats.median;
  row.attn_seconds_mean = stats.mean;
  row.attn_seconds_stdev = stats.stdev;
  row.attn_seconds_min = stats.min;
  row.attn_seconds_max = stats.max;
  row.model_attn_seconds_median = median(model_steps);
  row.model_attn_tokens_per_s = 1.0 / row.model_attn_seconds_median;
  row.attn_tokens_per_s = 1.0 / row.attn_seconds_median;
  row.attn_gbps =
      static_cast<double>(row.bytes_read_per_model_step) / row.model_attn_seconds_median / 1e9;
  row.read_bandwidth_gbps = median(row.read_bandwidth_repetitions);
  row.fma_peak_gflops = median(row.fma_peak_repetitions);
  row.compute_peak_gops = median(row.compute_peak_repetitions);
  row.speed_of_light_seconds = speed_of_light_seconds(
      row.bytes_read_per_step, row.flops_per_step, row.read_bandwidth_gbps, row.compute_peak_gops);
  if (!read_steps.empty()) {
    const double compute_s = static_cast<double>(row.flops_per_step) *
                             static_cast<double>(row.layers) / (row.compute_peak_gops * 1e9);
    const PairedFractions paired = paired_fractions(model_steps, read_steps, compute_s);
    row.fraction_of_bandwidth = paired.bandwidth.median;
    row.speed_of_light_pairs = paired.speed_of_light;
    row.fraction_of_speed_of_light = paired.speed_of_light.median;
  } else {
    row.fraction_of_bandwidth = row.attn_gbps / row.read_bandwidth_gbps;
    row.fraction_of_speed_of_light = row.speed_of_light_seconds / row.attn_seconds_median;
  }
  row.bound = static_cast<double>(row.bytes_read_per_step) / (row.read_bandwidth_gbps * 1e9) >=
                      static_cast<double>(row.flops_per_step) / (row.compute_peak_gops * 1e9)
                  ? "memory"
                  : "compute";
}

// The batch sizes a row's full layer is timed at, stepped in turn (time_layer_decode_batches):
// batch 1, then each other size asked for.
std::vector<std::int64_t> layer_batches(const ReportRequest& r) {
  std::vector<std::int64_t> sizes{1};
  for (std::int64_t batch : r.batches) {
    if (batch != 1) sizes.push_back(batch);
  }
  return sizes;
}

}  // namespace

std::uint64_t decode_attention_flops(std::int64_t n_heads, std::int64_t head_dim,
                                     std::int64_t tokens) {
  return checked_mul(checked_mul(4, static_cast<std::uint64_t>(n_heads), "FLOPs"),
                     checked_mul(static_cast<std::uint64_t>(head_dim),
                                 static_cast<std::uint64_t>(tokens), "FLOPs"),
                     "FLOPs per step");
}

PairedFractions paired_fractions(const std::vector<double>& steps,
                                 const std::vector<double>& read_steps, double compute_seconds) {
  if (steps.size() != read_steps.size()) {
    throw std::invalid_argument("paired fractions need a read-loop step beside every step (" +
                                std::to_string(steps.size()) + " steps, " +
                                std::to_string(read_steps.size()) + " read-loop steps)");
  }
  std::vector<double> bandwidth, light;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    bandwidth.push_back(read_steps[i] / steps[i]);
    light.push_back(std::max(read_steps[i], compute_seconds) / steps[i]);
  }
  return {summarize_ratios(std::move(bandwidth)), summarize_ratios(std::move(light))};
}

double speed_of_light_seconds(std::uint64_t bytes, std::uint64_t flops, double gbps,
                              double gflops) {
  return std::max(static_cast<double>(bytes) / (gbps * 1e9),
                  static_cast<double>(flops) / (gflops * 1e9));
}

std::uint64_t report_peak_bytes(const ReportRequest& r) {
  if (r.tokens.empty() || r.kv_heads.empty() || r.kv_dtypes.empty() || r.kv_layouts.empty()) {
    throw std::invalid_argument(
        "the report needs at least one context length, kv head count, "
        "cache type and cache layout");
  }
  for (KvLayout layout : r.kv_layouts) {
    if (layout.paged() && is_mla(r)) {
      throw std::invalid_argument("MLA's latent cache is contiguous only, not kv layout " +
                                  to_string(layout));
    }
  }
  if (r.steps < 1)
    throw std::invalid_argument("steps must be at least 1, got " + std::to_string(r.steps));
  (void)steps_per_repetition(r.steps, r.repetitions);  // refuses repetitions < 1
  for (std::int64_t batch : r.batches) {
    if (batch < 1)
      throw std::invalid_argument("batch sizes must be at least 1, got " + std::to_string(batch));
    if (batch > 1 && is_mla(r)) {
      throw std::invalid_argument("batch " + std::to_string(batch) +
                                  ": batches of MLA layers are not implemented");
    }
    if (batch > 1 && !r.measure_layer) {
      throw std::invalid_argument("batch " + std::to_string(batch) +
                                  " needs the full layer, which --no-layer turns off");
    }
  }
  for (std::size_t i = 0; i < r.compared_weights_dtypes.size(); ++i) {
    const WeightDtype dtype = r.compared_weights_dtypes[i];
    if (dtype == r.weights_dtype ||
        std::find(r.compared_weights_dtypes.begin(), r.compared_weights_dtypes.begin() + i,
                  dtype) != r.compared_weights_dtypes.begin() + i) {
      throw std::invalid_argument("weights type " + std::string(to_string(dtype)) +
                                  " is listed twice");
    }
    if (!r.measure_layer) {
      throw std::invalid_argument(
          "comparing weights types needs the full layer, which "
          "--no-layer turns off");
    }
  }
  const std::uint64_t llc = report_llc_bytes(r, nullptr);
  if (is_mla(r) && (r.kv_dtypes.size() != 1 || r.kv_dtypes[0] != KvTypes(KvDtype::f32))) {
    throw std::invalid_argument(
        "MLA's latent cache is f32 only: the report's cache types must "
        "be just f32");
  }
  for (std::int64_t window : r.windows) {
    if (window < 1) {
      throw std::invalid_argument("sliding window must be at least 1, got " +
                                  std::to_string(window));
    }
    if (is_mla(r)) {
      throw std::invalid_argument("sliding-window rows do not apply to MLA's latent cache");
    }
  }
  std::uint64_t peak = 0;
  for (const RowShape& shape : row_shapes(r)) {
    const std::int64_t tokens = shape.tokens, kv_heads = shape.kv_heads;
    // Validates every size and the head ratio, naming the bad value.
    const LayerConfig config = layer_config(r, kv_heads, tokens, shape.window);
    if (!is_mla(r)) {
      (void)kv_footprint(
          {.n_kv_heads = kv_heads, .head_dim = r.head_dim, .tokens = tokens, .layers = r.layers});
    }
    for (KvTypes dtype : r.kv_dtypes) {
      const std::uint64_t cache = config.kv_cache_bytes(dtype);
      std::uint64_t need = checked_mul(cache, 2, "report memory");  // cache + read buffer
      const CachePlan plan = report_plan(r, config, dtype, llc);
      // The caches, a paged row's beside its contiguous row's, and the read loop's buffers
      // (as many, none larger) beside them: their steps are taken in turn.
      const std::uint64_t sets = 2 + (std::any_of(r.kv_layouts.begin(), r.kv_layouts.end(),
                                                  [](KvLayout l) { return l.paged(); })
                                          ? 1
                                          : 0);
      need = std::max(need, checked_mul(checked_mul(plan.cache_bytes, plan.caches, "report memory"),
                                        sets, "report memory"));
      if (r.measure_layer) {
        // Every weights type's layer (their steps are taken in turn)...
        std::uint64_t weights = config.weight_bytes(r.weights_dtype);
        for (WeightDtype w : r.compared_weights_dtypes) {
          weights = checked_add(weights, config.weight_bytes(w), "report memory");
        }
        need = checked_add(need, weights, "report memory");
        // ... beside every batch size's caches and one cache per compared weights type.
        std::uint64_t sequences = r.compared_weights_dtypes.size();
        for (std::int64_t batch : layer_batches(r)) {
          sequences = checked_add(sequences, static_cast<std::uint64_t>(batch), "report memory");
        }
        need = std::max(need, checked_add(weights, checked_mul(cache, sequences, "report memory"),
                                          "report memory"));
      }
      if (r.measure_layer && r.measure_prefill && !is_mla(r)) {
        need = std::max(need, layer_prefill_bytes(config, tokens, dtype, r.weights_dtype));
      }
      peak = std::max(peak, need);
    }
  }
  return peak;
}

std::vector<ReportRow> run_report(const ReportRequest& r) {
  require_memory(report_peak_bytes(r), "this report");
  if (r.threads < 1)
    throw std::invalid_argument("threads must be at least 1, got " + std::to_string(r.threads));
  const int steps_per_pass = steps_per_repetition(r.steps, r.repetitions);
  const int read_repeats_per_pass = steps_per_repetition(kReadLoopRepeats, r.repetitions);
  const MachineSample before = sample_machine();

  std::string llc_source;
  const std::uint64_t llc = report_llc_bytes(r, &llc_source);
  std::vector<ReportRow> rows;
  for (const RowShape& shape : row_shapes(r)) {
    for (KvTypes dtype : r.kv_dtypes) {
      for (KvLayout layout : r.kv_layouts) rows.push_back(row_shape(r, shape, dtype, layout));
    }
  }
  // Every timed step of every pass, all layers, per row; a paged row's steps ÷ its contiguous
  // row's, pair by pair, where the two were timed in turn.
  // Beside every step, the read loop's step over as many bytes (none for MLA, whose read loop
  // is timed after its steps).
  std::vector<std::vector<double>> steps(rows.size()), reads(rows.size()),
      paged_ratios(rows.size());
  LayerWeights layer_weights;  // the full layer's, for rows with layer_weights_kv_heads
  std::int64_t layer_weights_kv_heads = 0;
  // The compared weights types' layers of the same shape (as layer_weights).
  std::vector<LayerWeights> compared_weights(r.compared_weights_dtypes.size());
  struct BatchedLayer {
    std::size_t row;  // the batch-1 row it extends
    std::int64_t batch;
    LayerTiming layer;
    WeightDtype weights;             // the request's weights_dtype, or a compared one
    RatioSummary over_main_weights;  // a compared one's steps ÷ the row's, pair by pair
  };
  std::vector<BatchedLayer> batched;
  std::vector<double> thread_scalings;  // per pass: the FMA peak on r.threads ÷ on one
  // A window row's ring holds W rows in some order; attention does not depend on the
  // order, so W rows filled in order read and compute the same.
  const auto request_of = [&](const ReportRow& of) {
    return DecodeTimingRequest{.n_heads = r.n_heads,
                               .n_kv_heads = of.n_kv_heads,
                               .head_dim = r.head_dim,
                               .tokens = of.cached_tokens(),
                               .kv_dtype = of.kv_dtype,
                               .isa = r.isa,
                               .compute = r.compute,
                               .threads = r.threads,
                               .steps = steps_per_pass,
                               .layers = r.layers,
                               .cache_state = r.cache_state,
                               .cold_method = r.cold_method,
                               .llc_bytes = llc,
                               .kv_layout = of.kv_layout,
                               .read_loop_beside = true};
  };
  for (int pass = 0; pass < r.repetitions; ++pass) {
    if (r.threads > 1) {
      const double one = measure_fma_peak_gflops(r.isa, 1, kPeakRepeats);
      thread_scalings.push_back(measure_fma_peak_gflops(r.isa, r.threads, kPeakRepeats) / one);
    }
    // A row's bookkeeping after its steps were timed: steps, median, the read loop and the
    // peaks beside them, and on the first pass what the plan was.
    const auto record = [&](std::size_t i, const DecodeTiming& t) {
      ReportRow& row = rows[i];
      steps[i].insert(steps[i].end(), t.step_seconds.begin(), t.step_seconds.end());
      row.attn_seconds_repetitions.push_back(t.layer_median_s);
      if (!t.read_seconds.empty()) {
        reads[i].insert(reads[i].end(), t.read_seconds.begin(), t.read_seconds.end());
        row.read_bandwidth_repetitions.push_back(static_cast<double>(t.bytes_read_per_step) /
                                                 median(t.read_seconds) / 1e9);
      } else {
        CachePlan read_plan = t.plan;  // the same rotation over the bytes a step reads
        read_plan.cache_bytes = t.bytes_read_per_layer;
        row.read_bandwidth_repetitions.push_back(
            measure_read_bandwidth_gbps(read_plan, r.isa, r.threads, read_repeats_per_pass));
      }
      const double fma_peak = measure_fma_peak_gflops(r.isa, r.threads, kPeakRepeats);
      row.fma_peak_repetitions.push_back(fma_peak);
      row.compute_peak_repetitions.push_back(
          t.unit == ComputeUnit::fp32_fma
              ? fma_peak
              : measure_unit_peak_gops(t.unit, r.isa, r.threads, kPeakRepeats));
      if (pass > 0) return;
      row.compute_unit = t.unit;
      row.cold_method =
          r.cache_state == CacheState::warm ? "none" : std::string(to_string(t.plan.method));
      row.caches_allocated = t.plan.caches;
      row.llc_bytes = llc;
      row.llc_source = llc_source;
      row.bytes_read_per_model_step = t.bytes_read_per_step;
      row.bytes_read_per_step = t.bytes_read_per_layer;
    };
    for (std::size_t i = 0; i < rows.size(); ++i) {
      ReportRow& row = rows[i];
      if (r.progress) {
        r.progress(row.variant + " " + std::string(to_string(row.kv_dtype)) +
                   (row.kv_layout.paged() ? " " + to_string(row.kv_layout) : "") + " at " +
                   std::to_string(row.tokens) + " tokens (" + std::to_string(i + 1) + "/" +
                   std::to_string(rows.size()) + ", pass " + std::to_string(pass + 1) + "/" +
                   std::to_string(r.repetitions) + ")");
      }
      // A contiguous row followed by its paged ones (layouts vary fastest): each paged row's
      // steps go in turn with the contiguous row's (time_attention_decode_pair), so that the
      // cost of paging is a ratio of steps side by side, not of two runs minutes apart on a
      // host whose memory changes speed. The contiguous row keeps its first pairing's steps.
      if (!is_mla(r) && i + 1 < rows.size() && paged_pair(row, rows[i + 1])) {
        std::size_t j = i + 1;
        for (; j < rows.size() && paged_pair(row, rows[j]); ++j) {
          const PairedDecodeTiming pair =
              time_attention_decode_pair(request_of(row), request_of(rows[j]));
          if (j == i + 1) record(i, pair.a);
          record(j, pair.b);
          paged_ratios[j].insert(paged_ratios[j].end(), pair.ratios.begin(), pair.ratios.end());
        }
        i = j - 1;
        continue;
      }
      record(i, is_mla(r) ? time_mla_attention_decode(request_of(row), r.mla.kv_lora_rank,
                                                      r.mla.qk_rope_head_dim)
                          : time_attention_decode(request_of(row)));
    }
  }
  // Once per row, after the passes: every pass then times the decode steps and read loops
  // under the same conditions (a first pass that also ran each row's accuracy, layer and
  // prefill between them would set itself apart from the others).
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ReportRow& row = rows[i];
    // Layouts vary fastest: a paged row stores the same values as the row before it.
    const bool as_before = i > 0 && same_values(rows[i - 1], row);
    if (r.progress && !is_mla(r) && !as_before) {
      r.progress("accuracy of " + to_string(row.kv_dtype) + " against f32");
    }
    // MLA's cache is f32: nothing to compare (the f32 rows' columns are 0 too).
    const AttnAccuracy accuracy =
        is_mla(r)   ? AttnAccuracy{}
        : as_before ? AttnAccuracy{rows[i - 1].attn_rel_error, rows[i - 1].attn_weight_kl}
                    : measure_attn_accuracy({.n_heads = r.n_heads,
                                             .n_kv_heads = row.n_kv_heads,
                                             .head_dim = r.head_dim,
                                             .tokens = row.cached_tokens(),
                                             .types = row.kv_dtype,
                                             .data = r.data,
                                             .isa = r.isa,
                                             .compute = r.compute,
                                             .threads = r.threads});
    row.attn_rel_error = accuracy.rel_error;
    row.attn_weight_kl = accuracy.weight_kl;
    if (r.measure_layer) {
      const LayerConfig config = layer_config(r, row.n_kv_heads, row.tokens, row.window);
      // Rows of one shape come in a run (cache types vary fastest): their weights are
      // made once, not per row (400 MB of bf16 for the default shape).
      if (layer_weights_kv_heads != row.n_kv_heads) {
        layer_weights = LayerWeights();
        for (LayerWeights& w : compared_weights) w = LayerWeights();
        layer_weights = LayerWeights::random(config, 42, r.weights_dtype);
        for (std::size_t w = 0; w < compared_weights.size(); ++w) {
          compared_weights[w] = LayerWeights::random(config, 42, r.compared_weights_dtypes[w]);
        }
        layer_weights_kv_heads = row.n_kv_heads;
      }
      // Batch 1, every larger batch of the row and every compared weights type (at batch 1)
      // step in turn, so that their ratios hold within the run even where the memory speed
      // moves.
      const std::vector<std::int64_t> sizes = layer_batches(r);
      std::vector<LayerRun> runs;
      for (std::int64_t batch : sizes) runs.push_back({&layer_weights, batch});
      for (const LayerWeights& w : compared_weights) runs.push_back({&w, 1});
      if (r.progress && runs.size() > 1) {
        std::string list;
        for (std::int64_t batch : sizes) list += (list.empty() ? "" : ", ") + std::to_string(batch);
        for (WeightDtype w : r.compared_weights_dtypes) {
          list += ", " + std::string(to_string(w)) + " weights";
        }
        r.progress("the full layer at " + std::to_string(row.tokens) + " tokens, " +
                   (sizes.size() > 1 ? "batches " : "batch ") + list + " in turn");
      }
      const std::vector<LayerTiming> timings =
          time_layer_decode_runs(config, runs, row.tokens, row.kv_dtype, r.isa, r.threads,
                                 std::max(3, r.steps / 2), r.compute, row.kv_layout);
      const LayerTiming& layer = timings.front();
      row.layer_tokens_per_s = layer.tokens_per_s;
      row.layer_seconds_median = layer.median_s;
      row.weights_dtype = r.weights_dtype;
      row.layer_weight_bytes = layer.weight_bytes;
      row.layer_bytes_per_step = layer.bytes_per_step;
      row.layer_weights_share = layer.projection_share;
      row.layer_attention_share = layer.attention_share;
      row.layer_other_share = layer.other_share;
      for (std::size_t b = 1; b < sizes.size(); ++b) {
        batched.push_back({i, sizes[b], timings[b], r.weights_dtype, {}});
      }
      for (std::size_t w = 0; w < compared_weights.size(); ++w) {
        const LayerTiming& t = timings[sizes.size() + w];
        batched.push_back({i, 1, t, r.compared_weights_dtypes[w],
                           summarize_pairs(layer.step_seconds, t.step_seconds)});
      }
      if (r.measure_prefill && !is_mla(r)) {
        const LayerPrefillTiming prefill =
            time_layer_prefill(config, layer_weights, row.tokens, row.kv_dtype, r.isa, r.threads,
                               r.compute, row.kv_layout);
        row.prefill_seconds = prefill.seconds;
        row.prefill_tokens_per_s = prefill.tokens_per_s;
        row.prefill_attention_share = prefill.attention_share;
      }
    }
  }
  MachineObservations seen = observe(before, sample_machine());
  seen.threads = r.threads;
  seen.thread_scalings = thread_scalings;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    finish_row(rows[i], steps[i], reads[i], r.repetitions);
    if (!paged_ratios[i].empty()) rows[i].paged_over_contiguous = summarize_ratios(paged_ratios[i]);
    seen.step_spreads.push_back(spread(rows[i].attn_seconds_repetitions));
    seen.bandwidth_drifts.push_back(spread(rows[i].read_bandwidth_repetitions));
    seen.peak_drifts.push_back(spread(rows[i].fma_peak_repetitions));
  }
  for (const BatchedLayer& b : batched) {
    ReportRow row = rows[b.row];
    row.batch = b.batch;
    if (b.weights != row.weights_dtype) {  // a compared weights type: its own layer, no prefill
      row.weights_dtype = b.weights;
      row.layer_weight_bytes = b.layer.weight_bytes;
      row.layer_over_main_weights = b.over_main_weights;
      row.prefill_seconds = row.prefill_tokens_per_s = row.prefill_attention_share = 0;
    }
    row.layer_tokens_per_s = b.layer.tokens_per_s;
    row.layer_seconds_median = b.layer.median_s;
    row.layer_bytes_per_step = b.layer.bytes_per_step;
    row.layer_weights_share = b.layer.projection_share;
    row.layer_attention_share = b.layer.attention_share;
    row.layer_other_share = b.layer.other_share;
    rows.push_back(row);
  }
  for (ReportRow& row : rows) {
    if (row.layer_weight_bytes == 0) continue;
    // Cache bytes grow linearly with the tokens (MLA: latent + rope per token), under a
    // window only up to W.
    const std::uint64_t per_token = row.cache_bytes /
                                    static_cast<std::uint64_t>(row.cached_tokens()) *
                                    static_cast<std::uint64_t>(row.batch);
    row.kv_overtakes_weights_tokens =
        static_cast<std::int64_t>((row.layer_weight_bytes + per_token - 1) / per_token);
    if (row.window > 0 && row.kv_overtakes_weights_tokens > row.window)
      row.kv_overtakes_weights_tokens = 0;
  }
  const QuietVerdict verdict = judge_quiet(seen);
  for (ReportRow& row : rows) {
    row.unstable = verdict.unstable;
    row.unstable_reason = verdict.reason;
  }
  return rows;
}

}  // namespace kvscope
