#include "engine/measure/layer_timing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/checked_math.hpp"
#include "engine/decoder_layer.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/measure/decode_timing.hpp"
#include "engine/memory.hpp"

namespace kvscope {

LayerTiming time_layer_decode(const LayerConfig& config, const LayerWeights& weights,
                              std::int64_t context, KvTypes kv_dtype, Isa isa, int threads,
                              int steps, ComputeMode compute, std::int64_t batch, KvLayout layout) {
  if (steps < 1)
    throw std::invalid_argument("steps must be at least 1, got " + std::to_string(steps));
  if (batch < 1)
    throw std::invalid_argument("batch must be at least 1, got " + std::to_string(batch));
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
  require_memory(checked_add(config.weight_bytes(weights.wq.dtype()),
                             checked_mul(config.kv_cache_bytes(kv_dtype),
                                         static_cast<std::uint64_t>(batch), "batch caches"),
                             "batch memory"),
                 "this batched layer measurement");
  DecoderLayer layer(config, weights,
                     {.kv_dtype = kv_dtype,
                      .isa = isa,
                      .threads = threads,
                      .compute = compute,
                      .kv_layout = layout});
  std::vector<LayerSequence> sequences;
  std::vector<LayerSequence*> step_batch;
  for (std::int64_t b = 1; b < batch; ++b) sequences.push_back(layer.new_sequence());
  step_batch.push_back(&layer.own_sequence());  // sequence 0: no cache beyond the layer's own
  for (LayerSequence& s : sequences) step_batch.push_back(&s);
  if (config.is_mla()) {  // the latent rows as stand-ins; the second half is ignored
    append_random_context(static_cast<std::size_t>(context), config.mla_row_width(), 1,
                          [&](const float* rows, const float*, std::size_t n) {
                            layer.append_latent_context(rows, n);
                          });
  } else {
    for (std::size_t b = 0; b < step_batch.size(); ++b) {
      append_random_context(static_cast<std::size_t>(context), config.kv_width(), 1 + b,
                            [&](const float* k, const float* v, std::size_t n) {
                              layer.append_context(*step_batch[b], k, v, n);
                            });
    }
  }
  std::vector<float> x(static_cast<std::size_t>(batch) * config.hidden_size());
  fill_uniform(x, 7, -1.0f, 1.0f);
  (void)layer.decode_batch(x.data(), step_batch);  // warm-up: first-touch pages, primitives
  std::vector<double> seconds;
  const double projection_before = layer.projection_seconds();
  const double attention_before = layer.attention_seconds();
  for (int i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    (void)layer.decode_batch(x.data(), step_batch);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  LayerTiming t;
  double total = 0;
  for (double step : seconds) total += step;
  t.projection_share = (layer.projection_seconds() - projection_before) / total;
  t.attention_share = (layer.attention_seconds() - attention_before) / total;
  t.other_share = std::max(0.0, 1.0 - t.projection_share - t.attention_share);
  t.median_s = median(seconds);
  t.tokens_per_s = static_cast<double>(batch) / t.median_s;
  t.weight_bytes = config.weight_bytes(weights.wq.dtype());
  t.bytes_per_step = t.weight_bytes + cache_bytes * static_cast<std::uint64_t>(batch);
  return t;
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
