#pragma once
// Shared fixtures of the attention kernel tests: random problems over a real KvCache, and the
// per-ISA entry points called directly (not through attend()'s dispatch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/kv_cache.hpp"
#include "kernels/attention.hpp"
#include "kernels/attention_kernels.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/ref/attention_ref.hpp"

namespace kvscope::test {

// Set by tests/CMakeLists.txt in the sanitizer build, where sweeps take fewer shapes.
#ifdef KVSCOPE_TESTS_UNDER_SANITIZERS
inline constexpr bool kUnderSanitizers = true;
#else
inline constexpr bool kUnderSanitizers = false;
#endif

// Runs one ISA's instantiation directly (scalar: the reference).
inline void run_isa(Isa isa, const AttentionProblem& p, int threads) {
  switch (isa) {
    case Isa::scalar:
      return attend_ref(p, threads);
    case Isa::sse2:
      return simd::attend_arch<xsimd::sse2>(p, threads);
    case Isa::avx2:
      return simd::attend_arch<simd::avx2_fma>(p, threads);
    case Isa::avx512:
      return simd::attend_arch<xsimd::avx512bw>(p, threads);
  }
}

// What the random rows look like.
//   uniform:  q in (−2, 2), k and v in (−1, 1): softmax peaked enough for weights to matter.
//   outliers: as uniform, but channels 1 and head_dim − 2 of k and v ×8, as the few large
//             channels of real models' keys: they set every int8 row scale (coarse steps
//             for the other channels) and dominate the scores.
//   peaked:   as uniform with q ×6: scores spread over tens of units, so softmax puts nearly
//             all weight on a few keys and the running max jumps between blocks.
//   ragged:   as outliers, and every key and value row × e^N(0,1) (token norms differ, so
//             int8 row scales differ from token to token) and q biased by +0.5 (so the sum of
//             a query's int8 values is large, as VNNI's unsigned-key bias needs to show).
enum class Data { uniform, outliers, peaked, ragged };

inline const char* to_string(Data data) {
  switch (data) {
    case Data::uniform:
      return "uniform";
    case Data::outliers:
      return "outliers";
    case Data::peaked:
      return "peaked";
    case Data::ragged:
      return "ragged";
  }
  return "?";
}

// A random attention problem of the given Data kind; `capacity` ≥ tokens leaves unused rows
// after the data. The cache is filled in one call.
struct RandomProblem {
  std::size_t n_heads, n_kv_heads, head_dim, first_pos, n_queries;
  std::vector<float> q, k, v;  // q [n_queries × n_heads × d]; k, v [tokens × n_kv × d]
  KvCache cache;

  RandomProblem(std::size_t n_heads_, std::size_t n_kv_heads_, std::size_t head_dim_,
                std::size_t first_pos_, std::size_t n_queries_, KvTypes dtype, unsigned seed,
                float value_scale = 1.0f, Data data = Data::uniform)
      : n_heads(n_heads_),
        n_kv_heads(n_kv_heads_),
        head_dim(head_dim_),
        first_pos(first_pos_),
        n_queries(n_queries_),
        cache(n_kv_heads_, head_dim_, first_pos_ + n_queries_ + 3, dtype) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    const std::size_t tokens = first_pos + n_queries;
    q.resize(n_queries * n_heads * head_dim);
    k.resize(tokens * n_kv_heads * head_dim);
    v.resize(k.size());
    for (float& x : q) x = 2.0f * unit(rng);
    for (float& x : k) x = unit(rng);
    for (float& x : v) x = value_scale * unit(rng);
    if (data == Data::outliers || data == Data::ragged) {
      for (std::size_t i = 0; i < k.size(); ++i) {
        const std::size_t j = i % head_dim;
        if (j == 1 || j + 2 == head_dim) k[i] *= 8.0f, v[i] *= 8.0f;
      }
    }
    if (data == Data::ragged) {
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (std::size_t row = 0; row < k.size() / head_dim; ++row) {
        const float kf = std::exp(normal(rng)) / 4.0f, vf = std::exp(normal(rng));
        for (std::size_t j = 0; j < head_dim; ++j) k[row * head_dim + j] *= kf;
        for (std::size_t j = 0; j < head_dim; ++j) v[row * head_dim + j] *= vf;
      }
      for (float& x : q) x = 0.5f + x / 2.0f;
    } else if (data == Data::peaked) {
      for (float& x : q) x *= 6.0f;
    }
    cache.append(k.data(), v.data(), tokens);
  }

  AttentionProblem problem(float* out) const {
    return {.q = q.data(),
            .n_queries = n_queries,
            .first_pos = first_pos,
            .n_heads = n_heads,
            .kv = cache.view(),
            .out = out};
  }
  std::size_t out_size() const { return n_queries * n_heads * head_dim; }
  float max_abs_v() const {
    float m = 0.0f;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
  }
};

// The problem's K and V in a paged cache of `page_tokens` tokens per page (its own pool), for
// the same attention over the other layout: rp.problem(out) with .kv = the copy's view().
inline KvCache paged_copy(const RandomProblem& rp, std::size_t page_tokens) {
  const KvCache& c = rp.cache;
  auto pool = std::make_shared<KvPagePool>(
      KvPageGeometry(c.n_kv_heads(), c.head_dim(), page_tokens, c.types()));
  KvCache paged(c.n_kv_heads(), c.head_dim(), c.capacity(), c.types(), pool);
  paged.append(rp.k.data(), rp.v.data(), rp.first_pos + rp.n_queries);
  return paged;
}

inline float max_abs(const std::vector<float>& x) {
  float m = 0.0f;
  for (float e : x) m = std::max(m, std::fabs(e));
  return m;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const float e = std::fabs(a[i] - b[i]);
    if (std::isnan(e)) return std::numeric_limits<float>::infinity();  // NaN is a failure
    m = std::max(m, e);
  }
  return m;
}

inline std::string isa_name(Isa isa) { return std::string(to_string(isa)); }

}  // namespace kvscope::test
