#pragma once
// The K/V data the report's accuracy columns are measured on.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace kvscope {

// uniform:   q, K and V uniform in ±1 (the data the timings use: append_random_context).
// realistic: K with a handful of outlier channels and a per-channel offset, as real models'
//            keys have (KIVI, Liu et al. 2024; KVQuant, Hooper et al. 2024); V and q plain:
//              K[t, h, j] = offset[h, j] + gain[h, j] · N(0, 1)
//              ordinary channel: offset uniform in ±0.5, gain 1;
//              outlier channel (4 per kv head, or 1 below head_dim 16, at seeded positions):
//              offset ±(8…12) with a random sign, gain 2;
//              V[t, h, j] = N(0, 1);   q = N(0, 1).
//            Offsets and gains are fixed per (kv head, channel), the same for every token.
enum class KvData { realistic, uniform };

std::string_view to_string(KvData data);
// Parses "realistic" or "uniform"; throws std::invalid_argument naming the value.
KvData parse_kv_data(std::string_view name);

// Appends `tokens` rows of K and V ([n × n_kv_heads × head_dim] each) of kind `data` through
// append(k, v, n), 256 tokens at a time so the f32 staging stays small.
void append_kv_data(
    KvData data, std::size_t tokens, std::size_t n_kv_heads, std::size_t head_dim,
    std::uint64_t seed,
    const std::function<void(const float* k, const float* v, std::size_t n)>& append);

// A query row [n] of kind `data`.
std::vector<float> query_data(KvData data, std::size_t n, std::uint64_t seed);

}  // namespace kvscope
