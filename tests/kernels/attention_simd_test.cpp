// Every SIMD instantiation (sse2, fma3<avx2>, avx512bw) × every cache type (and K:V pairs) × GQA
// ratios 1…32 against float64 attention over the same stored values, within a bound derived from
// each case's data (attention_f64.hpp), for decode and prefill; the scalar reference must
// meet the same bound. Results must be bitwise equal for 1, 2, 3, 7 and 16 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "engine/layer_weights.hpp"
#include "tests/kernels/attention_f64.hpp"
#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {
namespace {

struct Case {
  std::size_t head_dim, first_pos, n_queries;
  Data data;
};

// Decode: one query at position tokens − 1. Prefill: n_queries rows after first_pos.
// head_dims 24…136 leave a tail of 8 lanes on AVX-512 or 4 on AVX2; 6 and 10 are below and
// between vector widths. Data kinds rotate over the short cases; the long ones take each.
std::vector<Case> cases_for(std::size_t group) {
  std::vector<Case> cases;
  const Data kinds[] = {Data::uniform, Data::outliers, Data::peaked};
  std::size_t next = 0;
  for (std::size_t d : {24, 40, 64, 72, 80, 96, 128, 136, 256}) {
    if (kUnderSanitizers && d != 24 && d != 72 && d != 128 && d != 256) continue;  // for time
    for (std::size_t tokens : {1, 7, 17, 129})
      cases.push_back({d, tokens - 1, 1, kinds[next++ % 3]});
    cases.push_back({d, 0, 17, kinds[next++ % 3]});  // prefill from empty cache, partial tile
    if (d % 16 == 8) cases.push_back({d, 5, 70, kinds[next++ % 3]});  // crosses key blocks
  }
  for (std::size_t d : {6, 10}) {
    cases.push_back({d, 0, 1, Data::uniform});
    cases.push_back({d, 300, 1, Data::peaked});
    cases.push_back({d, 0, 7, Data::outliers});
    cases.push_back({d, 33, 9, Data::uniform});
  }
  // Long contexts: split decode (flash-decoding merge) and a prefill tail.
  for (Data data : kinds) {
    cases.push_back({128, 1999, 1, data});
    cases.push_back({72, 2999, 1, data});
  }
  if (group <= 4) cases.push_back({136, 1990, 10, Data::outliers});
  return cases;
}

using Param = std::tuple<Isa, KvTypes, std::size_t>;  // ISA, cache types, query heads per kv head

class AttentionSimd : public ::testing::TestWithParam<Param> {};

TEST_P(AttentionSimd, MatchesFloat64WithinDerivedBound) {
  const auto [isa, dtype, group] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  // Query heads: 2 kv heads × group, or 1 kv head × 32 (MQA).
  const std::size_t n_kv = group == 32 ? 1 : 2;
  const std::size_t n_heads = n_kv * group;
  unsigned seed = 1;
  double worst = 0.0, worst_ref = 0.0;
  for (const Case& c : cases_for(group)) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", first_pos " +
                 std::to_string(c.first_pos) + ", n_queries " + std::to_string(c.n_queries) + ", " +
                 to_string(c.data) + " data");
    const RandomProblem rp(n_heads, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed++, 1.0f,
                           c.data);
    const F64Attention truth = attend_f64(rp);
    std::vector<float> ref(rp.out_size()), one(rp.out_size());
    attend_ref(rp.problem(ref.data()), 1);
    run_isa(isa, rp.problem(one.data()), 1);
    const double err = worst_of_bound(one, truth), err_ref = worst_of_bound(ref, truth);
    EXPECT_LE(err, 1.0) << "max |error| / bound";
    EXPECT_LE(err_ref, 1.0) << "the scalar reference misses the bound";
    worst = std::max(worst, err);
    worst_ref = std::max(worst_ref, err_ref);
    // The work split does not depend on the thread count, so neither does any bit.
    // 3, 7 and 16 threads on the long and the prefill cases only, for time.
    const bool many_items = c.first_pos + c.n_queries > 1000 || c.n_queries > 1;
    for (int threads : {2, 3, 7, 16}) {
      if (threads > 2 && !many_items) continue;
      std::vector<float> many(rp.out_size(), -1.0f);
      run_isa(isa, rp.problem(many.data()), threads);
      EXPECT_EQ(0, std::memcmp(one.data(), many.data(), one.size() * sizeof(float)))
          << "1 vs " << threads << " threads differ by " << max_abs_diff(one, many);
    }
  }
  std::printf("worst max|err|/bound vs float64: %.3g (scalar reference: %.3g)\n", worst, worst_ref);
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string types = to_string(std::get<1>(info.param));
  std::replace(types.begin(), types.end(), ':', '_');  // int8:f16 → int8_f16
  return isa_name(std::get<0>(info.param)) + "_" + types + "_group" +
         std::to_string(std::get<2>(info.param));
}

// Every cache type with MHA, GQA-4 and MQA; the other GQA ratios with f32 (read in place)
// and int8 (scaled), which between them take every kernel path, for time. 24 query heads per
// kv head leave idle lanes in f32's queries-in-lanes kernel (attention_heads_in_lanes.hpp)
// on AVX-512 and fill 3 passes of it on SSE2.
INSTANTIATE_TEST_SUITE_P(
    AllIsasTypesGroups, AttentionSimd,
    ::testing::Combine(::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                       ::testing::Values(KvTypes(KvDtype::f32), KvTypes(KvDtype::f16),
                                         KvTypes(KvDtype::bf16), KvTypes(KvDtype::int8)),
                       ::testing::Values(std::size_t{1}, std::size_t{4}, std::size_t{32})),
    param_name);
// int4 (read in place, group scales) and keys and values of different types: the score stage
// reads K with K's type, p·V reads V with V's type (kernels/formats/tiled_keys.hpp).
INSTANTIATE_TEST_SUITE_P(Int4AndKvPairs, AttentionSimd,
                         ::testing::Combine(::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                                            ::testing::Values(KvTypes(KvDtype::int4),
                                                              KvTypes(KvDtype::int8, KvDtype::f16),
                                                              KvTypes(KvDtype::f16, KvDtype::int4),
                                                              KvTypes(KvDtype::int4, KvDtype::f32)),
                                            ::testing::Values(std::size_t{1}, std::size_t{4},
                                                              std::size_t{32})),
                         param_name);
// Groups of 6 and 8 read 16-bit and int8 rows in place with query tiles of 4 (more than one
// tile per row) on AVX2 and AVX-512, or in the lanes on SSE2.
INSTANTIATE_TEST_SUITE_P(
    MoreGqaRatios, AttentionSimd,
    ::testing::Combine(::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                       ::testing::Values(KvTypes(KvDtype::f32), KvTypes(KvDtype::f16),
                                         KvTypes(KvDtype::bf16), KvTypes(KvDtype::int8)),
                       ::testing::Values(std::size_t{2}, std::size_t{6}, std::size_t{8},
                                         std::size_t{16}, std::size_t{24})),
    param_name);

class AttentionSimdIsa : public ::testing::TestWithParam<Isa> {};

// f16 values in the half subnormal range (|x| < 2^-14) and exact zeros must widen exactly on
// every ISA (the SSE2 path converts with integer arithmetic, not F16C).
TEST_P(AttentionSimdIsa, F16SubnormalValuesWidenExactly) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const RandomProblem rp(4, 2, 16, 40, 1, KvDtype::f16, 7, 3e-5f);
  std::vector<float> ref(rp.out_size()), out(rp.out_size());
  attend_ref(rp.problem(ref.data()), 1);
  run_isa(isa, rp.problem(out.data()), 1);
  EXPECT_LE(max_abs_diff(out, ref), 1e-6f * max_abs(ref));
}

// attend() dispatches on its Isa argument and matches the reference.
TEST_P(AttentionSimdIsa, AttendHonoursIsaArgument) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const RandomProblem rp(8, 2, 64, 50, 1, KvDtype::bf16, 3);
  std::vector<float> ref(rp.out_size()), out(rp.out_size());
  attend(rp.problem(ref.data()), Isa::scalar, 1);
  attend(rp.problem(out.data()), isa, 2);
  EXPECT_LE(max_abs_diff(out, ref), 1e-5f * max_abs(ref));
}

// A NaN in a visible key reaches every query head that reads it. With 32 query heads on one
// kv head over 300 keys the decode runs the queries-in-lanes kernel, whose softmax exp must
// not clamp a NaN score into a weight (softmax_exp.hpp): the key would be dropped silently.
TEST_P(AttentionSimdIsa, NanInAVisibleKeyReachesItsQueryHeads) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const std::size_t n_heads = 32, d = 128, tokens = 300;
  std::vector<float> k(tokens * d), v(tokens * d), q(n_heads * d), out(n_heads * d);
  fill_uniform(k, 1, -1.0f, 1.0f);
  fill_uniform(v, 2, -1.0f, 1.0f);
  fill_uniform(q, 3, -1.0f, 1.0f);
  k[100 * d + 5] = std::nanf("");
  KvCache cache(1, d, tokens, KvDtype::f32);
  cache.append(k.data(), v.data(), tokens);
  run_isa(isa,
          {.q = q.data(),
           .n_queries = 1,
           .first_pos = tokens - 1,
           .n_heads = n_heads,
           .kv = cache.view(),
           .out = out.data()},
          2);
  std::size_t nans = 0;
  for (float x : out) nans += std::isnan(x) ? 1 : 0;
  EXPECT_EQ(nans, out.size());
}

// MQA over 300 keys (the queries-in-lanes kernel): the query heads of the second lane vector
// (16-31 on AVX-512) score ~100 times higher than the first's. Each vector must take its own
// block maximum (the score loops keep it): with the other's, one vector's weights underflow
// to 0 and the other's overflow (NaN either way). Decode, and three prefill rows.
TEST_P(AttentionSimdIsa, LaneVectorsWithFarApartScoresEachKeepTheirMaximum) {
  const Isa isa = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const std::size_t n_heads = 32, d = 128, tokens = 300;
  for (KvDtype dtype : {KvDtype::f32, KvDtype::f16}) {
    for (std::size_t n_queries : {std::size_t{1}, std::size_t{3}}) {
      SCOPED_TRACE(std::string(to_string(dtype)) + ", n_queries " + std::to_string(n_queries));
      RandomProblem rp(n_heads, 1, d, tokens - n_queries, n_queries, dtype, 21);
      for (std::size_t i = 0; i < rp.q.size(); ++i) {
        if (i / d % n_heads >= 16) rp.q[i] *= 100.0f;
      }
      std::vector<float> ref(rp.out_size()), out(rp.out_size());
      attend_ref(rp.problem(ref.data()), 1);
      run_isa(isa, rp.problem(out.data()), 2);
      EXPECT_LE(max_abs_diff(out, ref), 1e-3 * rp.max_abs_v());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, AttentionSimdIsa,
                         ::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                         [](const auto& info) { return isa_name(info.param); });

TEST(AttentionDispatch, RejectsHeadsNotMultipleOfKvHeads) {
  RandomProblem rp(4, 2, 16, 3, 1, KvDtype::f32, 5);
  std::vector<float> out(rp.out_size());
  AttentionProblem p = rp.problem(out.data());
  p.n_heads = 3;
  EXPECT_THROW(attend(p, Isa::scalar, 1), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope::test
