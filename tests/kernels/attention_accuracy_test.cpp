// Accuracy of the reduced cache types: attention output with an f16, bf16, int8, int4 or
// int8:f16 cache, on every ISA, against float64 attention over the true values, reported as
// max|error| / max|output| and checked against each format's step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "support/format_step.hpp"
#include "tests/kernels/attention_f64.hpp"
#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {
namespace {

// Bound on |out_fmt − out_f32| for one problem. Stored K perturbs each score by at most
// Δ = u_K · max_i,t Σ_j |q_ij| · m_t,j / sqrt(d), where m_t,j is |k_tj| (f16, bf16), the
// row's absmax (int8) or the absmax of element j's group of 32 (int4); softmax weights then
// change by a factor within e^(±2Δ), so Σ_t |δp_t| ≤ e^(2Δ) − 1. Stored V moves each value by
// at most u_V · max|v|. Hence |δout| ≤ (e^(2Δ) − 1 + u_V) · max|v|, plus f32 rounding (the
// same-dtype tolerance, 1e-5 here).
double error_bound(const RandomProblem& rp, KvTypes t) {
  const double u = format_step(t.k);
  const std::size_t d = rp.head_dim, tokens = rp.first_pos + rp.n_queries;
  const auto magnitude = [&](const float* k, std::size_t j) {
    if (t.k != KvDtype::int8 && t.k != KvDtype::int4) return std::fabs(k[j]);
    const std::size_t g0 = t.k == KvDtype::int8 ? 0 : j / kInt4Group * kInt4Group;
    const std::size_t g1 = t.k == KvDtype::int8 ? d : std::min(d, g0 + kInt4Group);
    float absmax = 0.0f;
    for (std::size_t x = g0; x < g1; ++x) absmax = std::max(absmax, std::fabs(k[x]));
    return absmax;
  };
  double delta = 0.0;
  for (std::size_t i = 0; i < rp.n_queries; ++i) {
    for (std::size_t h = 0; h < rp.n_heads; ++h) {
      const float* q = rp.q.data() + (i * rp.n_heads + h) * d;
      const std::size_t kvh = h / (rp.n_heads / rp.n_kv_heads);
      for (std::size_t pos = 0; pos <= rp.first_pos + i && pos < tokens; ++pos) {
        const float* k = rp.k.data() + (pos * rp.n_kv_heads + kvh) * d;
        double s = 0.0;
        for (std::size_t j = 0; j < d; ++j) s += std::fabs(q[j]) * magnitude(k, j);
        delta = std::max(delta, u * s / std::sqrt(static_cast<double>(d)));
      }
    }
  }
  return (std::expm1(2.0 * delta) + format_step(t.v)) * rp.max_abs_v() + 1e-5;
}

// Every ISA's kernel with a reduced cache against float64 attention over the true (f32)
// values: the error is the format's rounding of K and V (plus f32 noise far below it).
TEST(AttentionAccuracy, ReducedCacheTypesAgainstTrueValues) {
  struct Shape {
    std::size_t heads, kv_heads, head_dim, first_pos, n_queries;
    const char* what;
    Data data = Data::uniform;
  };
  bool any = false;
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) {
      std::printf("skipped %s: CPU lacks it\n", std::string(to_string(isa)).c_str());
      continue;
    }
    any = true;
    for (const Shape& s :
         {Shape{8, 2, 128, 1999, 1, "decode GQA-4, 2000 tokens"},
          Shape{4, 4, 64, 100, 60, "prefill MHA, 160 tokens"},
          // int4's shorter last group (72 = 2 × 32 + 8) holds an outlier
          // channel: its own scale must follow it.
          Shape{4, 2, 72, 300, 1, "decode d72 outliers, 301 tok", Data::outliers}}) {
      const RandomProblem f32(s.heads, s.kv_heads, s.head_dim, s.first_pos, s.n_queries,
                              KvDtype::f32, 11, 1.0f, s.data);
      const F64Attention truth = attend_f64(f32);
      double max_out = 0.0;
      for (double x : truth.out) max_out = std::max(max_out, std::fabs(x));
      for (KvTypes t : {KvTypes(KvDtype::f16), KvTypes(KvDtype::bf16), KvTypes(KvDtype::int8),
                        KvTypes(KvDtype::int4), KvTypes(KvDtype::int8, KvDtype::f16)}) {
        SCOPED_TRACE(std::string(s.what) + ", " + std::string(to_string(t)) + ", " +
                     std::string(to_string(isa)));
        const RandomProblem rp(s.heads, s.kv_heads, s.head_dim, s.first_pos, s.n_queries, t, 11,
                               1.0f, s.data);
        std::vector<float> got(rp.out_size());
        run_isa(isa, rp.problem(got.data()), 2);
        double err = 0.0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          err = std::max(err, std::fabs(static_cast<double>(got[i]) - truth.out[i]));
        }
        const double bound = error_bound(rp, t);
        std::printf("%-28s %-8s %-6s max|err|/max|out| = %.3g  (worst-case bound %.3g)\n", s.what,
                    std::string(to_string(t)).c_str(), std::string(to_string(isa)).c_str(),
                    err / max_out, bound / max_out);
        EXPECT_LE(err, bound);
        // The worst case above assumes every rounding error has the same sign; independent
        // round-to-nearest errors largely cancel in the dot products and the weighted sum, and
        // the error measures 0.4–1.1 u of max|out|. 4 u catches systematic faults (a lost
        // scale, truncation instead of rounding, a wrong lane), which cost ≥ 10 u.
        // With outlier channels (×8) the int8/int4 step is relative to the row's or group's
        // absmax, so the error is measured against max|v| there.
        const double step = std::max(format_step(t.k), format_step(t.v));
        const double scale = s.data == Data::uniform ? max_out : rp.max_abs_v();
        EXPECT_LE(err, 4.0 * step * scale);
        EXPECT_GT(err, 0.1 * step * max_out);  // the format really was reduced
      }
    }
  }
  if (!any) GTEST_SKIP() << "CPU lacks sse2, avx2 and avx512";
}

}  // namespace
}  // namespace kvscope::test
