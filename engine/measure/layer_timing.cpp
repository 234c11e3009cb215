#include "engine/measure/layer_timing.hpp"

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/checked_math.hpp"
#include "engine/decoder_layer.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/memory.hpp"

namespace kvscope {

namespace {

// One batch size's layer, its sequences filled with `context` random rows each, stepped one
// decode_batch at a time; the projection and attention seconds of the timed steps add up.
class BatchSteps {
 public:
  BatchSteps(const LayerConfig& config, const LayerWeights& weights, std::int64_t context,
             KvTypes kv_dtype, Isa isa, int threads, ComputeMode compute, std::int64_t batch,
             KvLayout layout)
      : batch_(batch),
        layer_(config, weights,
               {.kv_dtype = kv_dtype,
                .isa = isa,
                .threads = threads,
                .compute = compute,
                .kv_layout = layout}) {
    for (std::int64_t b = 1; b < batch; ++b) sequences_.push_back(layer_.new_sequence());
    step_batch_.push_back(&layer_.own_sequence());  // sequence 0: the layer's own
    for (LayerSequence& s : sequences_) step_batch_.push_back(&s);
    if (config.is_mla()) {  // the latent rows as stand-ins; the second half is ignored
      append_random_context(static_cast<std::size_t>(context), config.mla_row_width(), 1,
                            [&](const float* rows, const float*, std::size_t n) {
                              layer_.append_latent_context(rows, n);
                            });
    } else {
      for (std::size_t b = 0; b < step_batch_.size(); ++b) {
        append_random_context(static_cast<std::size_t>(context), config.kv_width(), 1 + b,
                              [&](const float* k, const float* v, std::size_t n) {
                                layer_.append_context(*step_batch_[b], k, v, n);
                              });
      }
    }
    x_.resize(static_cast<std::size_t>(batch) * config.hidden_size());
    fill_uniform(x_, 7, -1.0f, 1.0f);
    (void)layer_.decode_batch(x_.data(), step_batch_);  // warm-up: first-touch pages, primitives
  }

  void step() {
    const double projection_before = layer_.projection_seconds();
    const double attention_before = layer_.attention_seconds();
    const auto start = std::chrono::steady_clock::now();
    (void)layer_.decode_batch(x_.data(), step_batch_);
    seconds_.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    projection_ += layer_.projection_seconds() - projection_before;
    attention_ += layer_.attention_seconds() - attention_before;
  }

  // The timed steps' figures; bytes_per_step from one sequence's cache bytes.
  LayerTiming timing(std::uint64_t weight_bytes, std::uint64_t cache_bytes) const {
    LayerTiming t;
    double total = 0;
    for (double step : seconds_) total += step;
    t.projection_share = projection_ / total;
    t.attention_share = attention_ / total;
    t.other_share = std::max(0.0, 1.0 - t.projection_share - t.attention_share);
    t.median_s = median(seconds_);
    t.tokens_per_s = static_cast<double>(batch_) / t.median_s;
    t.weight_bytes = weight_bytes;
    t.bytes_per_step = weight_bytes + cache_bytes * static_cast<std::uint64_t>(batch_);
    t.step_seconds = seconds_;
    return t;
  }

 private:
  std::int64_t batch_;
  DecoderLayer layer_;
  std::vector<LayerSequence> sequences_;
  std::vector<LayerSequence*> step_batch_;
  std::vector<float> x_;
  std::vector<double> seconds_;
  double projection_ = 0, attention_ = 0;
};

}  // namespace

std::vector<LayerTiming> time_layer_decode_runs(const LayerConfig& config,
                                                const std::vector<LayerRun>& runs,
                                                std::int64_t context, KvTypes kv_dtype, Isa isa,
                                                int threads, int steps, ComputeMode compute,
                                                KvLayout layout) {
  if (steps < 1)
    throw std::invalid_argument("steps must be at least 1, got " + std::to_string(steps));
  if (runs.empty()) throw std::invalid_argument("no layer to time");
  std::uint64_t caches = 0;                   // sequences over all runs
  std::vector<const LayerWeights*> distinct;  // each set of weights counted once
  std::uint64_t weight_bytes = 0;
  for (const LayerRun& run : runs) {
    if (run.weights == nullptr) throw std::invalid_argument("a layer run without weights");
    if (run.batch < 1)
      throw std::invalid_argument("batch must be at least 1, got " + std::to_string(run.batch));
    caches = checked_add(caches, static_cast<std::uint64_t>(run.batch), "batch sequences");
    if (std::find(distinct.begin(), distinct.end(), run.weights) == distinct.end()) {
      distinct.push_back(run.weights);
      weight_bytes =
          checked_add(weight_bytes, config.weight_bytes(run.weights->wq.dtype()), "weights");
    }
  }
  if (context < 1 || static_cast<std::uint64_t>(context) + steps + 1 > config.capacity()) {
    throw std::invalid_argument("context " + std::to_string(context) + " plus " +
                                std::to_string(steps + 1) + " steps exceeds the capacity " +
                                std::to_string(config.capacity()));
  }
  const std::int64_t window = static_cast<std::int64_t>(config.sliding_window());
  const std::uint64_t cache_bytes =  // one sequence's, as a step reads it: at most W rows
      kv_footprint({.n_kv_heads = static_cast<std::int64_t>(config.n_kv_heads()),
                    .head_dim = static_cast<std::int64_t>(config.head_dim()),
                    .tokens = window > 0 ? std::min(context, window) : context,
                    .dtype = kv_dtype,
                    .mla_latent = static_cast<std::int64_t>(config.kv_lora_rank()),
                    .mla_rope = static_cast<std::int64_t>(config.qk_rope_head_dim())})
          .total_bytes;
  require_memory(checked_add(weight_bytes,
                             checked_mul(config.kv_cache_bytes(kv_dtype), caches, "batch caches"),
                             "batch memory"),
                 "this batched layer measurement");
  std::vector<std::unique_ptr<BatchSteps>> layers;
  for (const LayerRun& run : runs) {
    layers.push_back(std::make_unique<BatchSteps>(config, *run.weights, context, kv_dtype, isa,
                                                  threads, compute, run.batch, layout));
  }
  // The layers step in turn, so that a change in the machine's memory speed (on shared hosts
  // it moves from one second to the next) reaches all of them alike, and the ratio of their
  // step times holds within a run: timed one after the other, batch 8 ÷ batch 1 on a 2-core
  // AMD Zen 4 VM moved from 3.95× to 6.17× between runs.
  for (int i = 0; i < steps; ++i) {
    for (auto& layer : layers) layer->step();
  }
  std::vector<LayerTiming> timings;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    timings.push_back(
        layers[i]->timing(config.weight_bytes(runs[i].weights->wq.dtype()), cache_bytes));
  }
  return timings;
}

std::vector<LayerTiming> time_layer_decode_batches(const LayerConfig& config,
                                                   const LayerWeights& weights,
                                                   std::int64_t context, KvTypes kv_dtype, Isa isa,
                                                   int threads, int steps, ComputeMode compute,
                                                   const std::vector<std::int64_t>& batches,
                                                   KvLayout layout) {
  if (batches.empty()) throw std::invalid_argument("no batch size to time");
  std::vector<LayerRun> runs;
  for (std::int64_t batch : batches) runs.push_back({&weights, batch});
  return time_layer_decode_runs(config, runs, context, kv_dtype, isa, threads, steps, compute,
                                layout);
}

LayerTiming time_layer_decode(const LayerConfig& config, const LayerWeights& weights,
                              std::int64_t context, KvTypes kv_dtype, Isa isa, int threads,
                              int steps, ComputeMode compute, std::int64_t batch, KvLayout layout) {
  return time_layer_decode_batches(config, weights, context, kv_dtype, isa, threads, steps, compute,
                                   {batch}, layout)
      .front();
}

std::uint64_t layer_prefill_bytes(const LayerConfig& c, std::int64_t tokens, KvTypes kv_dtype,
                                  WeightDtype weights_dtype) {
  const std::uint64_t row_floats =
      4 * c.hidden_size() + 2 * c.q_width() + 2 * c.kv_width() + 2 * c.ffn_size();
  const std::uint64_t activations = checked_mul(
      checked_mul(static_cast<std::uint64_t>(tokens), row_floats, "prefill activations"),
      sizeof(float), "prefill activations");
  return checked_add(
      checked_add(c.weight_bytes(weights_dtype), c.kv_cache_bytes(kv_dtype), "prefill memory"),
      activations, "prefill memory");
}

LayerPrefillTiming time_layer_prefill(const LayerConfig& config, const LayerWeights& weights,
                                      std::int64_t tokens, KvTypes kv_dtype, Isa isa, int threads,
                                      ComputeMode compute, KvLayout layout) {
  if (tokens < 1 || static_cast<std::uint64_t>(tokens) > config.capacity()) {
    throw std::invalid_argument("prefill of " + std::to_string(tokens) +
                                " tokens does not fit the capacity " +
                                std::to_string(config.capacity()));
  }
  DecoderLayer layer(config, weights,
                     {.kv_dtype = kv_dtype,
                      .isa = isa,
                      .threads = threads,
                      .compute = compute,
                      .kv_layout = layout});
  const auto n = static_cast<std::size_t>(tokens);
  std::vector<float> x(n * config.hidden_size());
  fill_uniform(x, 7, -1.0f, 1.0f);
  layer.reserve_rows(n);
  const double attention_before = layer.attention_seconds();
  const auto start = std::chrono::steady_clock::now();
  (void)layer.prefill(x.data(), n);
  LayerPrefillTiming t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  t.tokens_per_s = static_cast<double>(tokens) / t.seconds;
  t.attention_share = (layer.attention_seconds() - attention_before) / t.seconds;
  return t;
}

}  // namespace kvscope
