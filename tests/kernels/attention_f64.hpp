#pragma once
// Attention in float64 over the values a cache actually stores (so a reduced type's rounding
// is not counted as kernel error), the error bound an f32 kernel must meet against it, and
// deliberately wrong variants of the same computation, to show the bound rejects each.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/ref/kv_row_ref.hpp"
#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {

// A planted fault of the float64 computation (none by default).
struct Fault {
  std::size_t drop_key = std::numeric_limits<std::size_t>::max();  // never read this position
  bool scale_of_next_row = false;  // int8: each row read with its neighbour's scale
  bool no_rescale = false;         // online softmax over blocks of 64 keys without
                                   // rescaling the accumulator when the running max rises
  // int4: group `int4_group` of the K rows (or V rows, int4_in_v) read without its scale
  // (scale 1), at every position or at position int4_row only.
  std::size_t int4_group = std::numeric_limits<std::size_t>::max();
  std::size_t int4_row = std::numeric_limits<std::size_t>::max();
  bool int4_in_v = false;
};

// Row `t` of an int4 block as stored, or with one group's scale replaced by 1 (the fault).
inline const std::byte* faulty_int4_row(const std::byte* row, std::size_t t, std::size_t d,
                                        bool is_v, const Fault& fault,
                                        std::vector<std::byte>& copy) {
  if (fault.int4_group >= int4_groups(d) || is_v != fault.int4_in_v ||
      (fault.int4_row != std::numeric_limits<std::size_t>::max() && fault.int4_row != t)) {
    return row;
  }
  const std::size_t bytes = kv_row_bytes(KvDtype::int4, d);
  copy.assign(row, row + bytes);
  const std::uint16_t one = 0x3c00;  // f16 1.0
  std::memcpy(copy.data() + fault.int4_group * kInt4GroupBytes, &one, sizeof one);
  return copy.data();
}

// out: [n_queries × n_heads × head_dim]; bound: one absolute bound per (query, head).
struct F64Attention {
  std::vector<double> out;
  std::vector<double> bound;
  std::size_t head_dim = 0;
};

// Bound on |f32 kernel − float64| for one (query, head), from the data. With u = 2^-24,
// S = max_t Σ_j |q_j k_tj| / √d (the score magnitude), n keys and V = max |v|:
//   each score's f32 error (dot product of d terms, q pre-scaled, s − m, exp) is about
//   u·(√d·S + 2S + 4) for round-to-nearest errors of random sign; a score error δ moves the
//   output by at most δ · max|v_t − out| ≤ 2δV;
//   the sums over keys (l and acc) add about u·√n·V, the final division u·V.
// Both grow as √ of the terms summed (a random walk), not n. Taking S and V at their
// maxima already overstates the typical error: over every ISA, cache type, GQA ratio and data
// kind of attention_simd_test the kernels measure at most ~10% of this bound, the scalar
// reference at most ~15%. Worst-case (all errors of one sign) bounds grow as n and at 2,000
// keys would be ~50× wider, wide enough to pass a dropped key; this one rejects each planted
// fault of attention_bound_test by 10× or more.
inline double f32_error_bound(double S, std::size_t d, std::size_t n, double V) {
  const double u = 0x1p-24;
  const double score_err = u * (std::sqrt(static_cast<double>(d)) * S + 2.0 * S + 4.0);
  return 2.0 * score_err * V + u * (std::sqrt(static_cast<double>(n)) + 1.0) * V;
}

inline F64Attention attend_f64(const RandomProblem& rp, const Fault& fault = {}) {
  const KvView kv = rp.cache.view();
  const std::size_t d = rp.head_dim, g = rp.n_heads / rp.n_kv_heads;
  const std::size_t tokens = rp.first_pos + rp.n_queries;
  // Stored rows, decoded exactly: [kv head][token][d].
  std::vector<double> K(rp.n_kv_heads * tokens * d), V(K.size());
  std::vector<float> row(d);
  std::vector<std::byte> faulty;
  double v_max = 0;
  for (std::size_t h = 0; h < rp.n_kv_heads; ++h) {
    for (std::size_t t = 0; t < tokens; ++t) {
      const std::size_t scale_row = !fault.scale_of_next_row ? t : t + 1 < tokens ? t + 1 : t - 1;
      const auto stored = [&](const std::byte* r, KvDtype type, bool is_v) {
        return type == KvDtype::int4 ? faulty_int4_row(r, t, d, is_v, fault, faulty) : r;
      };
      decode_row_ref(kv.k_dtype, stored(kv.k_row(h, t), kv.k_dtype, false), 1.0f, d, row.data());
      const double ks = kv.k_row_scale(h, scale_row), vs = kv.v_row_scale(h, scale_row);
      for (std::size_t j = 0; j < d; ++j) K[(h * tokens + t) * d + j] = row[j] * ks;
      decode_row_ref(kv.v_dtype, stored(kv.v_row(h, t), kv.v_dtype, true), 1.0f, d, row.data());
      for (std::size_t j = 0; j < d; ++j) {
        V[(h * tokens + t) * d + j] = row[j] * vs;
        v_max = std::max(v_max, std::fabs(row[j] * vs));
      }
    }
  }
  F64Attention r;
  r.head_dim = d;
  r.out.assign(rp.out_size(), 0.0);
  r.bound.assign(rp.n_queries * rp.n_heads, 0.0);
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> s(tokens);
  for (std::size_t i = 0; i < rp.n_queries; ++i) {
    for (std::size_t h = 0; h < rp.n_heads; ++h) {
      const float* q = rp.q.data() + (i * rp.n_heads + h) * d;
      const double* k = K.data() + h / g * tokens * d;
      const double* v = V.data() + h / g * tokens * d;
      double* out = r.out.data() + (i * rp.n_heads + h) * d;
      const std::size_t n = rp.first_pos + i + 1;
      double magnitude = 0;
      for (std::size_t t = 0; t < n; ++t) {
        double dot = 0, abs_dot = 0;
        for (std::size_t j = 0; j < d; ++j) {
          dot += q[j] * k[t * d + j];
          abs_dot += std::fabs(q[j] * k[t * d + j]);
        }
        s[t] = t == fault.drop_key ? -INFINITY : dot * inv_sqrt_d;
        magnitude = std::max(magnitude, abs_dot * inv_sqrt_d);
      }
      r.bound[i * rp.n_heads + h] = f32_error_bound(magnitude, d, n, v_max);
      // Online softmax over blocks of 64 keys, as the kernels run it; exact when rescaled.
      double m = -INFINITY, l = 0;
      for (std::size_t b0 = 0; b0 < n; b0 += 64) {
        const std::size_t b1 = std::min(n, b0 + 64);
        double m_new = m;
        for (std::size_t t = b0; t < b1; ++t) m_new = std::max(m_new, s[t]);
        const double correction = std::exp(m - m_new);
        l *= correction;
        if (!fault.no_rescale) {
          for (std::size_t j = 0; j < d; ++j) out[j] *= correction;
        }
        for (std::size_t t = b0; t < b1; ++t) {
          const double p = std::exp(s[t] - m_new);
          l += p;
          for (std::size_t j = 0; j < d; ++j) out[j] += p * v[t * d + j];
        }
        m = m_new;
      }
      for (std::size_t j = 0; j < d; ++j) out[j] /= l;
    }
  }
  return r;
}

// max over elements of |got − truth.out| / truth.bound (of its query and head): ≤ 1 passes.
template <class T>
double worst_of_bound(const std::vector<T>& got, const F64Attention& truth) {
  double worst = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double err = std::fabs(static_cast<double>(got[e]) - truth.out[e]);
    if (std::isnan(err)) return INFINITY;
    worst = std::max(worst, err / truth.bound[e / truth.head_dim]);
  }
  return worst;
}

}  // namespace kvscope::test
