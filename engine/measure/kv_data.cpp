#include "engine/measure/kv_data.hpp"

#include <algorithm>
#include <random>
#include <stdexcept>
#include <string>

#include "engine/measure/decode_timing.hpp"

namespace kvscope {

std::string_view to_string(KvData data) {
  return data == KvData::realistic ? "realistic" : "uniform";
}

KvData parse_kv_data(std::string_view name) {
  if (name == "realistic") return KvData::realistic;
  if (name == "uniform") return KvData::uniform;
  throw std::invalid_argument("unknown --data '" + std::string(name) +
                              "' (expected realistic or uniform)");
}

void append_kv_data(
    KvData data, std::size_t tokens, std::size_t n_kv_heads, std::size_t head_dim,
    std::uint64_t seed,
    const std::function<void(const float* k, const float* v, std::size_t n)>& append) {
  const std::size_t width = n_kv_heads * head_dim;
  if (data == KvData::uniform) return append_random_context(tokens, width, seed, append);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Per (kv head, channel) offset and gain of the keys.
  std::vector<float> offset(width), gain(width, 1.0f);
  const std::size_t outliers = head_dim >= 16 ? 4 : 1;
  for (std::size_t h = 0; h < n_kv_heads; ++h) {
    for (std::size_t j = 0; j < head_dim; ++j) offset[h * head_dim + j] = 0.5f * unit(rng);
    std::vector<std::size_t> channels(head_dim);
    for (std::size_t j = 0; j < head_dim; ++j) channels[j] = j;
    std::shuffle(channels.begin(), channels.end(), rng);
    for (std::size_t i = 0; i < outliers; ++i) {
      const std::size_t c = h * head_dim + channels[i];
      offset[c] = (unit(rng) < 0 ? -1.0f : 1.0f) * (10.0f + 2.0f * unit(rng));
      gain[c] = 2.0f;
    }
  }
  // 256 tokens at a time, so the f32 staging stays small at any context length.
  std::vector<float> k(256 * width), v(256 * width);
  for (std::size_t done = 0; done < tokens;) {
    const std::size_t n = std::min<std::size_t>(256, tokens - done);
    for (std::size_t i = 0; i < n * width; ++i) {
      k[i] = offset[i % width] + gain[i % width] * normal(rng);
      v[i] = normal(rng);
    }
    append(k.data(), v.data(), n);
    done += n;
  }
}

std::vector<float> query_data(KvData data, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> q(n);
  for (float& x : q) x = data == KvData::realistic ? normal(rng) : unit(rng);
  return q;
}

}  // namespace kvscope
