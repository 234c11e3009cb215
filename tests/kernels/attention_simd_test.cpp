// Every SIMD instantiation (sse2, fma3<avx2>, avx512bw) × every cache type × MHA/GQA/MQA
// against the scalar reference on the same cache, for decode and prefill, 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {
namespace {

// Same-dtype tolerance. Kernel and reference read identical stored values and differ only
// in f32 rounding order: blocked dot products (n = head_dim terms), the online-softmax
// rescaling and the sums over keys (n = n_keys terms), scale folded into q (int8: into the
// score and the weight), xsimd::exp vs libm expf (a few ulp). The recursive-summation bound
// γ_n ≈ n·u, u = 2^-24, applies to each sum relative to the magnitudes summed, which are
// bounded by max|v|; ×4 covers the chained stages. Measured errors sit 10-100× below it.
double same_dtype_tolerance(const RandomProblem& rp, float max_out) {
  const double u = 0x1p-24;
  const double n = static_cast<double>(rp.head_dim + rp.first_pos + rp.n_queries + 16);
  return 4.0 * n * u * rp.max_abs_v() / max_out;
}

struct Case {
  std::size_t head_dim, first_pos, n_queries;
};

// Decode: one query at position tokens − 1. Prefill: n_queries rows after first_pos.
std::vector<Case> cases_for(std::size_t group) {
  std::vector<Case> cases;
  for (std::size_t d : {64, 80, 96, 128, 256}) {
    for (std::size_t tokens : {1, 7, 17, 129}) cases.push_back({d, tokens - 1, 1});
    cases.push_back({d, 0, 17});  // prefill from empty cache, one partial query tile
    cases.push_back({d, 5, 70});  // prefill after 5 tokens, crosses key blocks
  }
  for (std::size_t d : {6, 10}) {  // head_dim below and between SIMD widths
    cases.push_back({d, 0, 1});
    cases.push_back({d, 300, 1});
    cases.push_back({d, 0, 7});
    cases.push_back({d, 33, 9});
  }
  // Long contexts: split decode (flash-decoding merge) and a prefill tail.
  cases.push_back({128, 1999, 1});
  cases.push_back({64, 2999, 1});
  if (group <= 4) cases.push_back({128, 1990, 10});
  return cases;
}

using Param = std::tuple<Isa, KvDtype, std::size_t>;  // ISA, cache type, query heads per kv head

class AttentionSimd : public ::testing::TestWithParam<Param> {};

TEST_P(AttentionSimd, MatchesScalarReference) {
  const auto [isa, dtype, group] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  // Query heads: MHA 2 kv heads × 1, GQA 2 × 4, MQA 1 × 32.
  const std::size_t n_kv = group == 32 ? 1 : 2;
  const std::size_t n_heads = n_kv * group;
  unsigned seed = 1;
  double worst = 0.0, worst_of_tolerance = 0.0;
  for (const Case& c : cases_for(group)) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", first_pos " +
                 std::to_string(c.first_pos) + ", n_queries " + std::to_string(c.n_queries));
    const RandomProblem rp(n_heads, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed++);
    std::vector<float> ref(rp.out_size()), one(rp.out_size()), two(rp.out_size(), -1.0f);
    attend_ref(rp.problem(ref.data()), 2);
    run_isa(isa, rp.problem(one.data()), 1);
    run_isa(isa, rp.problem(two.data()), 2);
    const float max_out = max_abs(ref);
    const double err = max_abs_diff(one, ref) / max_out;
    const double tolerance = same_dtype_tolerance(rp, max_out);
    EXPECT_LE(err, tolerance);
    worst = std::max(worst, err);
    worst_of_tolerance = std::max(worst_of_tolerance, err / tolerance);
    // The work split does not depend on the thread count, so neither does any bit.
    EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float)))
        << "1 vs 2 threads differ by " << max_abs_diff(one, two);
  }
  std::printf("worst max|err|/max|out| vs reference: %.3g (%.3g of the tolerance)\n", worst,
              worst_of_tolerance);
}

INSTANTIATE_TEST_SUITE_P(
    AllIsasTypesGroups, AttentionSimd,
    ::testing::Combine(::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                       ::testing::Values(KvDtype::f32, KvDtype::f16, KvDtype::bf16, KvDtype::int8),
                       ::testing::Values(std::size_t{1}, std::size_t{4}, std::size_t{32})),
    [](const ::testing::TestParamInfo<Param>& info) {
      return isa_name(std::get<0>(info.param)) + "_" +
             std::string(to_string(std::get<1>(info.param))) + "_group" +
             std::to_string(std::get<2>(info.param));
    });

// f16 values in the half subnormal range (|x| < 2^-14) and exact zeros must widen exactly on
// every ISA (the SSE2 path converts with integer arithmetic, not F16C).
TEST(AttentionSimdF16, SubnormalValuesWidenExactly) {
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) continue;
    SCOPED_TRACE(isa_name(isa));
    const RandomProblem rp(4, 2, 16, 40, 1, KvDtype::f16, 7, 3e-5f);
    std::vector<float> ref(rp.out_size()), out(rp.out_size());
    attend_ref(rp.problem(ref.data()), 1);
    run_isa(isa, rp.problem(out.data()), 1);
    EXPECT_LE(max_abs_diff(out, ref), 1e-6f * max_abs(ref));
  }
}

// attend() dispatches on its Isa argument and matches the reference for every ISA.
TEST(AttentionDispatch, AttendHonoursIsaArgument) {
  const RandomProblem rp(8, 2, 64, 50, 1, KvDtype::bf16, 3);
  std::vector<float> ref(rp.out_size());
  attend(rp.problem(ref.data()), Isa::scalar, 1);
  for (Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
    if (!cpu_supports(isa)) continue;
    std::vector<float> out(rp.out_size());
    attend(rp.problem(out.data()), isa, 2);
    EXPECT_LE(max_abs_diff(out, ref), 1e-5f * max_abs(ref)) << isa_name(isa);
  }
}

TEST(AttentionDispatch, RejectsHeadsNotMultipleOfKvHeads) {
  RandomProblem rp(4, 2, 16, 3, 1, KvDtype::f32, 5);
  std::vector<float> out(rp.out_size());
  AttentionProblem p = rp.problem(out.data());
  p.n_heads = 3;
  EXPECT_THROW(attend(p, Isa::scalar, 1), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope::test
