#pragma once
// The kvscope report: for each attention variant × cache type × context length, the cache
// size, the measured decode step, and the machine's limits measured in the same run.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/kv_layout.hpp"
#include "engine/layer_config.hpp"
#include "engine/measure/cold_caches.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/measure/kv_data.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"
#include "kernels/weights/weight_dtype.hpp"

namespace kvscope {

struct ReportRequest {
  std::int64_t n_heads = 32;
  std::int64_t head_dim = 128;
  std::vector<std::int64_t> tokens{2000};        // one row set per context length
  std::vector<std::int64_t> kv_heads{32, 8, 1};  // MHA, GQA-8, MQA
  std::vector<KvTypes> kv_dtypes{KvDtype::f32, KvDtype::bf16, KvDtype::int8};  // K:V pairs
  // Each layout a row of its own per (tokens, kv heads, cache type), side by side: paged rows
  // read through a page table from a shared pool (kv_layout.hpp).
  std::vector<KvLayout> kv_layouts{KvLayout{}};
  std::int64_t layers = 1;
  std::int64_t hidden_size = 4096;  // for the full-layer measurement
  std::int64_t ffn_size = 11008;
  bool measure_layer = true;
  bool measure_prefill = true;  // the full layer's prefill of `tokens` (needs measure_layer)
  // Batch sizes of the full layer's decode step (needs measure_layer): each B > 1 adds a row
  // per (tokens, kv heads, cache type) whose layer_* figures are B sequences' step.
  std::vector<std::int64_t> batches{1};
  WeightDtype weights_dtype = WeightDtype::bf16;  // the full layer's, as checkpoints ship
  // Each a full layer of its own beside the weights_dtype one (the same values rounded to this
  // type), their batch-1 decode steps taken in turn, so that their ratio holds within the run
  // (needs measure_layer): a row each (batch 1) with its layer_* figures and
  // layer_over_main_weights. Their prefill is not measured.
  std::vector<WeightDtype> compared_weights_dtypes;
  Isa isa = Isa::scalar;
  ComputeMode compute = ComputeMode::exact;
  int threads = 1;
  int steps = 10;       // timed decode steps per row, shared among the repetitions
  int repetitions = 3;  // passes over all rows; each row is measured once per pass
  std::function<void(std::string_view)> progress;  // told before each measurement
  // Cold: each step reads K/V bytes in no cache level, as in a model (see cold_caches.hpp).
  // `layers` caches are allocated and a step reads all of them in order.
  CacheState cache_state = CacheState::cold;
  ColdMethod cold_method = ColdMethod::automatic;
  std::uint64_t llc_bytes = 0;      // 0: detect_llc()
  KvData data = KvData::realistic;  // the K/V data of the accuracy columns (kv_data.hpp)
  // Sliding-window rows, beside the full-attention ones: for each W here and each context
  // above W, a row of window_kv_heads kv heads whose cache is a ring of the last W tokens per
  // kv head (Mistral's), so its step, bytes and FLOPs count W tokens. Not with MLA.
  std::vector<std::int64_t> windows;
  std::int64_t window_kv_heads = 8;
  // kv_lora_rank > 0: multi-head latent attention (DeepSeek-V2): one MLA row per context
  // instead of the kv_heads × kv_dtypes rows (the latent cache is f32: kv_dtypes must be just
  // f32), n_heads query heads, head_dim then their nope + rope. Its decode attention is the
  // absorbed form's read of the latent cache (mla_timing.hpp); the full layer's prefill is
  // not measured (the plain form's expansion is not the engine's fast path).
  MlaShape mla;
};

struct ReportRow {
  std::string variant;  // MHA, GQA-n, MQA, or MLA (n_kv_heads 1: one latent for all heads,
                        // head_dim kv_lora_rank + qk_rope_head_dim: the row each score reads);
                        // " SWA-W" appended under a sliding window W, e.g. "GQA-8 SWA-4096"
  // Sequences decoded together in the layer_* figures. A row with batch B > 1 repeats its
  // batch-1 row's per-sequence figures (attention decode, accuracy, prefill: each sequence
  // reads its own cache the same way) and has its own layer_* step over B tokens.
  std::int64_t batch = 1;
  std::int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0, tokens = 0, layers = 1;
  std::int64_t window = 0;  // sliding window W < tokens: the cache holds the last W; 0: none
  std::int64_t cached_tokens() const { return window > 0 && window < tokens ? window : tokens; }
  KvTypes kv_dtype = KvDtype::f32;  // keys and values
  KvLayout kv_layout;               // of the decode, layer and prefill caches (accuracy: the
                                    // type's; a layout changes float32 rounding only)
  Isa isa = Isa::scalar;
  ComputeMode compute = ComputeMode::exact;
  ComputeUnit compute_unit = ComputeUnit::fp32_fma;  // the unit the decode kernel ran on
  int threads = 1;
  std::uint64_t cache_bytes = 0;  // one layer
  std::uint64_t cache_bytes_all_layers = 0;
  std::uint64_t bytes_read_per_step = 0;  // one layer's K, V and scales
  std::uint64_t flops_per_step = 0;       // 4 · heads · head_dim · tokens (QKᵀ and AV); MLA:
                                          // 2 · heads · (2 · latent + rope) · tokens
  // Over every timed step of every repetition (one layer's share of each step).
  double attn_seconds_median = 0, attn_seconds_min = 0, attn_seconds_max = 0;
  int repetitions = 1;
  double attn_seconds_mean = 0, attn_seconds_stdev = 0;
  std::vector<double> attn_seconds_repetitions;    // each repetition's median step
  std::vector<double> read_bandwidth_repetitions;  // each repetition's read loop, GB/s
  // Each repetition's probes of the FMA peak and of compute_unit's peak, run beside its
  // steps: on a host whose speed drifts (other tenants) a peak probed once, at another
  // moment, set rows above 1.0 of their speed of light.
  std::vector<double> fma_peak_repetitions, compute_peak_repetitions;
  double attn_tokens_per_s = 0;
  double attn_gbps = 0;
  double read_bandwidth_gbps = 0;     // plain read loop, same bytes and threads (median)
  double fma_peak_gflops = 0;         // median of fma_peak_repetitions
  double compute_peak_gops = 0;       // median of compute_peak_repetitions
  double speed_of_light_seconds = 0;  // max(bytes ÷ read_bandwidth_gbps, FLOPs ÷ unit peak)
  // The step against its limits, pair by pair: every step is taken in turn with a step of the
  // read loop over as many bytes (its own buffers, as cold), and each pair gives the read
  // step ÷ the step (fraction_of_bandwidth) and max(read step, FLOPs ÷ unit peak) ÷ the step
  // (speed_of_light_pairs, fraction_of_speed_of_light = its median). On a host whose memory
  // changes speed within seconds, a read loop timed apart from the steps measured another
  // machine. MLA rows, whose read loop is timed after their steps: attn_gbps ÷
  // read_bandwidth_gbps and speed_of_light_seconds ÷ attn_seconds_median.
  double fraction_of_bandwidth = 0;
  double fraction_of_speed_of_light = 0;
  RatioSummary speed_of_light_pairs;  // pairs 0 where not paired
  std::string bound;                  // "memory" or "compute"
  // Accuracy of the same step against an f32 cache over the same data (attn_accuracy.hpp):
  double attn_rel_error = 0;      // max |O − O_f32| / max |O_f32|; 0 for f32
  double attn_weight_kl = 0;      // mean KL(p_f32 ‖ p) of the attention weights, nats
  double layer_tokens_per_s = 0;  // 0 when not measured
  double layer_seconds_median = 0;
  WeightDtype weights_dtype = WeightDtype::bf16;
  std::uint64_t layer_weight_bytes = 0;    // in weights_dtype
  std::uint64_t layer_bytes_per_step = 0;  // weights + cache
  // Where the layer's decode step goes, timed inside it: the projections (reading the
  // weights), attention (reading the cache) and the rest (norms, RoPE, SwiGLU, residuals).
  double layer_weights_share = 0, layer_attention_share = 0, layer_other_share = 0;
  // The context from which the KV-cache bytes a step reads (batch × this layer's cache bytes
  // per token × context) exceed its weight bytes: ⌈weights ÷ (batch × per-token bytes)⌉.
  // 0 when the layer was not measured, or under a window whose W tokens' cache never does.
  std::int64_t kv_overtakes_weights_tokens = 0;
  // The full layer's prefill of `tokens` tokens from an empty cache: the time to first token.
  double prefill_seconds = 0;  // 0 when not measured
  double prefill_tokens_per_s = 0;
  double prefill_attention_share = 0;
  // A paged row after its contiguous row (layouts vary fastest): the two were timed step by
  // step in turn, and this summarizes this row's steps ÷ that row's, pair by pair (pairs 0:
  // not paired).
  RatioSummary paged_over_contiguous;
  // A row of one of the request's compared_weights_dtypes: its layer step ÷ the layer step with
  // the request's weights_dtype (the row it repeats), pair by pair (pairs 0: not such a row).
  RatioSummary layer_over_main_weights;
  // How the cache was read: attn_* above are one layer's share of a step over all layers.
  CacheState cache_state = CacheState::cold;
  std::string cold_method;               // "copies", "flush" or "none" (warm)
  std::uint64_t caches_allocated = 0;    // layers × copies cycled
  std::uint64_t llc_bytes = 0;           // the last-level cache the plan was made for
  std::string llc_source;                // where llc_bytes came from
  double model_attn_seconds_median = 0;  // one step over all layers' caches
  double model_attn_tokens_per_s = 0;
  std::uint64_t bytes_read_per_model_step = 0;
  // The run's verdict on the machine (machine_quiet.hpp), the same on every row.
  bool unstable = false;
  std::string unstable_reason;
};

// FLOPs of one decode step's attention: QKᵀ and AV each take 2 · head_dim per key per head.
std::uint64_t decode_attention_flops(std::int64_t n_heads, std::int64_t head_dim,
                                     std::int64_t tokens);

// A row's fractions from its steps and the read loop's step beside each (same bytes):
// read ÷ step, and max(read, compute_seconds) ÷ step, pair by pair. Throws
// std::invalid_argument where the counts differ or there are no steps.
struct PairedFractions {
  RatioSummary bandwidth, speed_of_light;
};
PairedFractions paired_fractions(const std::vector<double>& steps,
                                 const std::vector<double>& read_steps, double compute_seconds);

// The larger of moving `bytes` at `gbps` and computing `flops` at `gflops`.
double speed_of_light_seconds(std::uint64_t bytes, std::uint64_t flops, double gbps, double gflops);

// The bytes a report needs at once, at most: its largest set of caches (all layers, and
// for a cold report the copies cycled; the read loop's buffers are as many), or twice its
// largest cache, and, when the layer is measured, the layer's weights. Throws when an input
// is invalid.
std::uint64_t report_peak_bytes(const ReportRequest& request);

// Validates the request (refusing shapes that will not fit in memory before allocating
// anything), then measures every row: `repetitions` passes over all rows, each pass timing
// ⌈steps ÷ repetitions⌉ decode steps, the read loop and the compute peaks of every row, so a
// slow drift of the machine hits all rows, and their roofs, alike; accuracy and the full layer are
// measured once per row, after the passes, so that every pass times its steps alike. Watches the
// machine meanwhile and marks every row unstable when it was not quiet. Throws
// std::invalid_argument / std::length_error.
std::vector<ReportRow> run_report(const ReportRequest& request);

}  // namespace kvscope
