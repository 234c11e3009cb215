#include "engine/measure/layer_timing.hpp"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/decoder_layer.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/measure/decode_timing.hpp"

namespace kvscope {

LayerTiming time_layer_decode(const LayerConfig& config, std::int64_t context, KvTypes kv_dtype,
                              Isa isa, int threads, int steps, ComputeMode compute) {
  if (steps < 1)
    throw std::invalid_argument("steps must be at least 1, got " + std::to_string(steps));
  if (context < 1 || static_cast<std::uint64_t>(context) + steps + 1 > config.capacity()) {
    throw std::invalid_argument("context " + std::to_string(context) + " plus " +
                                std::to_string(steps + 1) + " steps exceeds the capacity " +
                                std::to_string(config.capacity()));
  }
  DecoderLayer layer(config, LayerWeights::random(config, 42),
                     {.kv_dtype = kv_dtype, .isa = isa, .threads = threads, .compute = compute});
  append_random_context(
      static_cast<std::size_t>(context), config.kv_width(), 1,
      [&](const float* k, const float* v, std::size_t n) { layer.append_context(k, v, n); });
  std::vector<float> x(config.hidden_size());
  fill_uniform(x, 7, -1.0f, 1.0f);
  (void)layer.decode(x.data());  // warm-up: first-touch pages, primitive creation
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    (void)layer.decode(x.data());
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  LayerTiming t;
  t.median_s = median(seconds);
  t.tokens_per_s = 1.0 / t.median_s;
  t.bytes_per_step = config.weight_bytes() +
                     kv_footprint({.n_kv_heads = static_cast<std::int64_t>(config.n_kv_heads()),
                                   .head_dim = static_cast<std::int64_t>(config.head_dim()),
                                   .tokens = context,
                                   .dtype = kv_dtype})
                         .total_bytes;
  return t;
}

}  // namespace kvscope
