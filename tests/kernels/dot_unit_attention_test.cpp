// The dot-product units (AVX-512 VNNI for int8 caches, AVX512-BF16 for bf16 caches), called
// directly, against the scalar reference, for decode and prefill, MHA/GQA/MQA, head sizes
// with tails, uniform and ragged data (attention_test_util.hpp), and 1–3 threads bitwise
// equal. Two checks:
//
// 1. The kernel computes what it claims. A unit rounds the query (int8 against its absmax, or
//    bf16) and the softmax weights; the reference is given the same rounded query, so the two
//    differ by the weights' rounding alone. bf16: |δw_t| ≤ 2^-9 w_t, so |δout| ≤ 2^-9 max|v|;
//    the queries-in-lanes kernel's shorter exp (kExp2ForWeights, 7.5e-5 relative, in the
//    weights and in their sum) adds up to 1.5e-4 max|v| to that.
//    int8: u8 weights against each 64-key block's largest, |δw_t| ≤ w_max,b / 510 — the
//    same relative step as the cache's own rounding of V (absmax / 254 per row); the output
//    moves by about one such step, and is held to two (2/254 of max|v|, measured ≤ 0.6 of
//    it). A dropped key, a wrong scale, lane, bias or rescale breaks these by far.
// 2. Accuracy as users see it: against the true (f32) attention, the RMS error over all the
//    problems stays within 2× of the cache format's own (the exact path on the same cache).
//    The query's rounding is one more rounding of the format's size, so it measures 1.0–1.4×;
//    a single problem's largest error can be several times its format error (one peaked
//    softmax resting on a few roundings), which is why the budget is held over many.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "engine/kv_cache.hpp"
#include "kernels/number_formats.hpp"
#include "kernels/prefetch_policy.hpp"
#include "kernels/units/compute_unit.hpp"
#include "kernels/units/cpu_features.hpp"
#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {
namespace {

bool int8_unit(ComputeUnit unit) {
  return unit == ComputeUnit::vnni_int8 || unit == ComputeUnit::amx_int8;
}

KvDtype dtype_of(ComputeUnit unit) { return int8_unit(unit) ? KvDtype::int8 : KvDtype::bf16; }

std::string feature_of(ComputeUnit unit) {
  switch (unit) {
    case ComputeUnit::vnni_int8:
      return "avx512_vnni";
    case ComputeUnit::amx_int8:
    case ComputeUnit::amx_bf16: {
      const std::string note = cpu_features().amx_note;  // why the OS withholds the tiles
      return std::string(unit == ComputeUnit::amx_int8 ? "amx_int8" : "amx_bf16") +
             (note.empty() ? "" : " (" + note + ")");
    }
    default:
      return "avx512_bf16";
  }
}

// f16 caches on AMX-BF16 are split into hi and lo bf16 parts (amx_f16_split.hpp): the query
// and the weights keep 16 of their bits, the cache all of its, and only lo · lo products are
// dropped, so check 1 compares against the reference on the unrounded query.
bool split_f16(KvDtype dtype) { return dtype == KvDtype::f16; }

// The largest change of an output by the rounding of the weights, in units of max|v| (see
// check 1 above): int8 weights (VNNI, AMX) two of their steps, bf16 weights one rounding and
// the shorter exp's error.
// Split f16: each score and weight is off by about 2^-16 of its terms (the query's and the
// weight's 16 kept bits, the dropped lo · lo), so a weight moves by ~2^-16 · |score|: held to
// 2^-15, for the scores of a few units here (measured ≤ 7.4e-6 of max|v|; a fiftieth of an
// f16 rounding step, 2^-11).
double weight_step(ComputeUnit unit, KvDtype dtype) {
  if (split_f16(dtype)) return 0x1p-15;
  return int8_unit(unit) ? 2.0 / 254 : 0x1p-9 + 1.5e-4;
}

struct Case {
  std::size_t head_dim, first_pos, n_queries;
};

std::vector<Case> cases(std::initializer_list<std::size_t> head_dims) {
  std::vector<Case> out;
  for (std::size_t d : head_dims) {
    for (std::size_t tokens : {1, 17, 129}) out.push_back({d, tokens - 1, 1});
    out.push_back({d, 0, 17});  // prefill from an empty cache
    out.push_back({d, 5, 70});  // prefill after 5 tokens, across key blocks
  }
  out.push_back({128, 1999, 1});  // long decode: split over chunks and merged
  out.push_back({72, 2999, 1});
  // Key ranges long enough for the queries-in-lanes kernel (vnni_heads_in_lanes.hpp): a head
  // size with a short last 4-byte group, and a causal prefill tile after a long prefix.
  out.push_back({70, 1999, 1});
  out.push_back({128, 300, 40});
  return out;
}

// q rounded as the unit rounds it (after the 1/√d scale, as the kernels fold it), then
// scaled back by √d so that the reference's own 1/√d lands on the rounded values.
void round_query_as_unit(ComputeUnit unit, KvDtype dtype, std::vector<float>& q,
                         std::size_t head_dim) {
  if (split_f16(dtype)) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const float unscale = std::sqrt(static_cast<float>(head_dim));
  for (std::size_t h0 = 0; h0 < q.size(); h0 += head_dim) {
    std::vector<float> scaled(head_dim);
    float amax = 0.0f;
    for (std::size_t j = 0; j < head_dim; ++j) {
      scaled[j] = q[h0 + j] * scale;
      amax = std::max(amax, std::fabs(scaled[j]));
    }
    for (std::size_t j = 0; j < head_dim; ++j) {
      const float rounded =
          int8_unit(unit)
              ? (amax == 0.0f ? 0.0f
                              : std::nearbyint(scaled[j] * (127.0f / amax)) * (amax / 127.0f))
              : bf16_bits_to_f32(f32_to_bf16_bits(scaled[j]));
      q[h0 + j] = rounded * unscale;
    }
  }
}

using Param = std::tuple<ComputeUnit, std::size_t>;  // unit, query heads per kv head

class DotUnitAttention : public ::testing::TestWithParam<Param> {};

void check_unit(ComputeUnit unit, std::size_t group, Data data, const std::vector<Case>& cases,
                KvDtype dtype) {
  const std::size_t n_kv = group == 32 ? 1 : 2;
  const std::size_t n_heads = n_kv * group;
  unsigned seed = 100;
  double worst_ratio = 0.0, worst_kernel = 0.0, fast_squares = 0.0, format_squares = 0.0;
  for (const Case& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", first_pos " +
                 std::to_string(c.first_pos) + ", n_queries " + std::to_string(c.n_queries));
    const RandomProblem truth(n_heads, n_kv, c.head_dim, c.first_pos, c.n_queries, KvDtype::f32,
                              seed, 1.0f, data);
    const RandomProblem rp(n_heads, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed, 1.0f,
                           data);
    RandomProblem rounded_q(n_heads, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed++,
                            1.0f, data);
    round_query_as_unit(unit, dtype, rounded_q.q, c.head_dim);
    std::vector<float> want(rp.out_size()), exact(rp.out_size()), fast(rp.out_size()),
        fast2(rp.out_size(), -1.0f), fast3(rp.out_size(), -2.0f), same_q(rp.out_size());
    attend_ref(truth.problem(want.data()), 2);
    attend_ref(rp.problem(exact.data()), 2);
    attend_ref(rounded_q.problem(same_q.data()), 2);
    simd::attend_dot_unit(rp.problem(fast.data()), unit, 1);
    simd::attend_dot_unit(rp.problem(fast2.data()), unit, 2);
    simd::attend_dot_unit(rp.problem(fast3.data()), unit, 3);
    float max_v = 0.0f;  // largest stored value, as the reference reads it
    for (float x : rp.v) max_v = std::max(max_v, std::fabs(x));
    const double kernel_error = max_abs_diff(fast, same_q);
    EXPECT_LE(kernel_error, weight_step(unit, dtype) * max_v + 1e-6 * max_abs(want));
    worst_kernel = std::max(worst_kernel, kernel_error / max_v);
    const double format_error = max_abs_diff(exact, want);
    const double fast_error = max_abs_diff(fast, want);
    worst_ratio = std::max(worst_ratio, fast_error / format_error);
    const double scale = 1.0 / max_abs(want);  // each problem weighs alike
    for (std::size_t i = 0; i < want.size(); ++i) {
      fast_squares += (fast[i] - want[i]) * scale * (fast[i] - want[i]) * scale;
      format_squares += (exact[i] - want[i]) * scale * (exact[i] - want[i]) * scale;
    }
    EXPECT_EQ(0, std::memcmp(fast.data(), fast2.data(), fast.size() * sizeof(float)))
        << "1 vs 2 threads differ by " << max_abs_diff(fast, fast2);
    EXPECT_EQ(0, std::memcmp(fast.data(), fast3.data(), fast.size() * sizeof(float)))
        << "1 vs 3 threads differ by " << max_abs_diff(fast, fast3);
  }
  const double rms_ratio = std::sqrt(fast_squares / format_squares);
  EXPECT_LE(rms_ratio, 2.0);
  std::printf(
      "%s group %zu, %s data: kernel vs same-rounding reference %.2g max|v|; fast / format "
      "error: RMS %.3g, worst single problem %.3g\n",
      std::string(to_string(unit)).c_str(), group, to_string(data), worst_kernel, rms_ratio,
      worst_ratio);
}

TEST_P(DotUnitAttention, WithinTwiceTheFormatErrorOfTheExactPath) {
  const auto [unit, group] = GetParam();
  if (!cpu_has(unit)) GTEST_SKIP() << "CPU lacks " << feature_of(unit) << " (or AVX-512)";
  check_unit(unit, group, Data::uniform, cases({24, 40, 80, 128, 136, 256}), dtype_of(unit));
  check_unit(unit, group, Data::ragged, cases({40, 128}), dtype_of(unit));
}

INSTANTIATE_TEST_SUITE_P(
    UnitsAndGroups, DotUnitAttention,
    ::testing::Combine(::testing::Values(ComputeUnit::vnni_int8, ComputeUnit::avx512_bf16,
                                         ComputeUnit::amx_int8, ComputeUnit::amx_bf16),
                       ::testing::Values(std::size_t{1}, std::size_t{4}, std::size_t{8},
                                         std::size_t{24}, std::size_t{32})),
    [](const ::testing::TestParamInfo<Param>& info) {
      std::string name(to_string(std::get<0>(info.param)));
      std::replace(name.begin(), name.end(), '-', '_');
      return name + "_group" + std::to_string(std::get<1>(info.param));
    });

// Over a paged cache the units read each page's rows and scales through the table: pages of
// 256 tokens keep every kernel's key blocks (64 keys in the tile kernels, 128 and 256 in the
// queries-in-lanes kernel for bf16 and int8), so every bit equals the contiguous layout where
// the unit reads a head at a time (AMX, or one kv head); pages of 64 do so for the tile
// kernels only. VNNI and AVX512-BF16 read several kv heads page by page, all heads of a page
// in turn, in chunks of their own: a chunk's running maximum then differs, and with it the
// rounding of its weights to u8 or bf16. Those, and pages that cut a block (which moves the
// int8 weights' block scale), are held to check 1's bound against the reference on the same
// rounded query. The 8,500-key context gives chunks of 576 keys across pages of 256: they
// start inside pages, where the page cuts a block, so it is held to the bound alone (on
// every unit: not run on AMX when this was written).
void check_paged(ComputeUnit unit, std::size_t group, KvDtype dtype) {
  const std::size_t n_kv = group == 32 ? 1 : 2;
  unsigned seed = 300;
  std::vector<Case> paged_cases = cases({40, 128});
  paged_cases.push_back({128, 8499, 1});
  for (const Case& c : paged_cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", first_pos " +
                 std::to_string(c.first_pos) + ", n_queries " + std::to_string(c.n_queries));
    const RandomProblem rp(n_kv * group, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed,
                           1.0f, Data::ragged);
    RandomProblem rounded_q(n_kv * group, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed++,
                            1.0f, Data::ragged);
    round_query_as_unit(unit, dtype, rounded_q.q, c.head_dim);
    std::vector<float> flat(rp.out_size()), same_q(rp.out_size());
    simd::attend_dot_unit(rp.problem(flat.data()), unit, 2);
    attend_ref(rounded_q.problem(same_q.data()), 2);
    for (std::size_t page_tokens : {16, 64, 256}) {
      SCOPED_TRACE("page of " + std::to_string(page_tokens));
      const KvCache paged = paged_copy(rp, page_tokens);
      std::vector<float> out(rp.out_size(), -1.0f);
      AttentionProblem p = rp.problem(out.data());
      p.kv = paged.view();
      simd::attend_dot_unit(p, unit, 2);
      const bool by_page =
          n_kv > 1 && (unit == ComputeUnit::vnni_int8 || unit == ComputeUnit::avx512_bf16);
      // The AMX tiles read blocks across pages of 16 (KvView::chunked_block_rows) as they read
      // a contiguous cache: bit for bit there too, where the rows suit the tiles (int8 rows of
      // whole 4-byte groups; others run on VNNI a page at a time).
      const bool tiles = (unit == ComputeUnit::amx_int8 || unit == ComputeUnit::amx_bf16) &&
                         (dtype != KvDtype::int8 || c.head_dim % 4 == 0);
      const bool chunks_start_on_pages = c.first_pos < 8000;
      if (!by_page && chunks_start_on_pages && (page_tokens == 256 || tiles)) {
        EXPECT_EQ(0, std::memcmp(out.data(), flat.data(), out.size() * sizeof(float)))
            << "paged differs from contiguous by " << max_abs_diff(out, flat);
      }
      EXPECT_LE(max_abs_diff(out, same_q),
                weight_step(unit, dtype) * rp.max_abs_v() + 1e-6 * max_abs(same_q));
    }
  }
}

TEST_P(DotUnitAttention, PagedLayoutReadsThroughThePageTable) {
  const auto [unit, group] = GetParam();
  if (!cpu_has(unit)) GTEST_SKIP() << "CPU lacks " << feature_of(unit) << " (or AVX-512)";
  check_paged(unit, group, dtype_of(unit));
}

// The unit's output and the reference's with the query rounded as the unit rounds it, over a
// problem of `group` query heads per kv head whose keys `edit` changes before both caches take
// them; max_v: the largest stored value.
struct UnitAndReference {
  std::vector<float> fast, same_q;
  float max_v;
};
template <class Edit>
UnitAndReference run_with_keys(ComputeUnit unit, KvDtype dtype, std::size_t group, std::size_t n_kv,
                               const Case& c, unsigned seed, Edit&& edit) {
  RandomProblem rp(n_kv * group, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed);
  RandomProblem rounded_q(n_kv * group, n_kv, c.head_dim, c.first_pos, c.n_queries, dtype, seed);
  round_query_as_unit(unit, dtype, rounded_q.q, c.head_dim);
  edit(rp.k);
  const std::size_t tokens = c.first_pos + c.n_queries;
  for (RandomProblem* p : {&rp, &rounded_q}) {
    p->k = rp.k;
    p->cache = KvCache(n_kv, c.head_dim, tokens, dtype);
    p->cache.append(p->k.data(), p->v.data(), tokens);
  }
  UnitAndReference out{std::vector<float>(rp.out_size()), std::vector<float>(rp.out_size()),
                       rp.max_abs_v()};
  simd::attend_dot_unit(rp.problem(out.fast.data()), unit, 2);
  attend_ref(rounded_q.problem(out.same_q.data()), 2);
  return out;
}

// Keys after the first blocks that score ~170 above everything before them (rows × 100):
// a kernel that takes weights against a running maximum must move it before e^(s − m)
// overflows (planted: the AMX kernels' one-pass softmax never redone gives NaN). Decode, and
// a prefill tile whose rows straddle the jump.
void check_late_large_scores(ComputeUnit unit, std::size_t group, KvDtype dtype) {
  const std::size_t n_kv = group == 32 ? 1 : 2, d = 64;
  for (const Case& c : {Case{d, 299, 1}, Case{d, 180, 40}}) {
    SCOPED_TRACE("first_pos " + std::to_string(c.first_pos) + ", n_queries " +
                 std::to_string(c.n_queries));
    const UnitAndReference run =
        run_with_keys(unit, dtype, group, n_kv, c, 500, [&](std::vector<float>& k) {
          for (std::size_t i = 200 * n_kv * d; i < k.size(); ++i) k[i] *= 100.0f;
        });
    // Split f16's weights move by ~2^-16 of the scores, here up to ~200 (measured 3e-4).
    const double step = split_f16(dtype) ? 0x1p-16 * 200 : weight_step(unit, dtype);
    EXPECT_LE(max_abs_diff(run.fast, run.same_q), step * run.max_v + 1e-6 * max_abs(run.same_q));
  }
}

TEST_P(DotUnitAttention, LateLargeScoresKeepTheSoftmaxFinite) {
  const auto [unit, group] = GetParam();
  if (!cpu_has(unit)) GTEST_SKIP() << "CPU lacks " << feature_of(unit) << " (or AVX-512)";
  check_late_large_scores(unit, group, dtype_of(unit));
}

// An attention sink: key 0 scaled up (×4 to ×16), so that for some heads it takes most of a
// block's weight and the other keys share the rest, each under half a step of the u8 weights
// (1/255 of the block's largest). Rounded one by one those all became 0 and their mass was
// lost: 1.0-3.5x the bound below on VNNI int8, 1.1-1.9x on int4 (decode at 300 and 2,000
// tokens, a prefill tile).
void check_attention_sink(ComputeUnit unit, std::size_t group, KvDtype dtype) {
  const std::size_t n_kv = group == 32 ? 1 : 2, d = 128;
  for (const Case& c : {Case{d, 299, 1}, Case{d, 1999, 1}, Case{d, 260, 40}}) {
    for (float boost : {4.0f, 8.0f, 16.0f}) {
      SCOPED_TRACE("first_pos " + std::to_string(c.first_pos) + ", n_queries " +
                   std::to_string(c.n_queries) + ", key 0 × " + std::to_string(boost));
      const UnitAndReference run =
          run_with_keys(unit, dtype, group, n_kv, c, 7, [&](std::vector<float>& k) {
            for (std::size_t i = 0; i < n_kv * d; ++i) k[i] *= boost;
          });
      EXPECT_LE(max_abs_diff(run.fast, run.same_q),
                weight_step(unit, dtype) * run.max_v + 1e-6 * max_abs(run.same_q));
    }
  }
}

TEST_P(DotUnitAttention, AttentionSinkKeepsTheSmallWeightsMass) {
  const auto [unit, group] = GetParam();
  if (!cpu_has(unit)) GTEST_SKIP() << "CPU lacks " << feature_of(unit) << " (or AVX-512)";
  if (unit == ComputeUnit::amx_int8) {
    GTEST_SKIP() << "amx_int8 still rounds its weights to one u8 digit each (unchanged: no AMX "
                    "CPU in the session that gave VNNI two digits)";
  }
  check_attention_sink(unit, group, dtype_of(unit));
}

// int4 caches on VNNI (dot_int4.hpp), 1, 2, 4 and 32 queries per kv head, held to the same
// checks: the weights are u8 against each block's largest as for int8, in one digit or two
// (one weight per row and group here: p_t · scale_tg), and (nibble − 8) is the stored value
// as the reference reads it, so check 1's bound carries over; the query is rounded as for
// int8 keys. Head sizes with a
// shorter last group (24, 40, 80, 136) and segments of fewer than 4 groups (40, 80, 136).
class Int4OnVnni : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Int4OnVnni, WithinTwiceTheFormatErrorOfTheExactPath) {
  if (!cpu_has(ComputeUnit::vnni_int8)) GTEST_SKIP() << "CPU lacks avx512_vnni (or AVX-512)";
  const std::size_t group = GetParam();
  check_unit(ComputeUnit::vnni_int8, group, Data::uniform, cases({24, 40, 80, 128, 136, 256}),
             KvDtype::int4);
  check_unit(ComputeUnit::vnni_int8, group, Data::ragged, cases({40, 128}), KvDtype::int4);
  check_unit(ComputeUnit::vnni_int8, group, Data::outliers, cases({128}), KvDtype::int4);
}

TEST_P(Int4OnVnni, PagedLayoutReadsThroughThePageTable) {
  if (!cpu_has(ComputeUnit::vnni_int8)) GTEST_SKIP() << "CPU lacks avx512_vnni (or AVX-512)";
  check_paged(ComputeUnit::vnni_int8, GetParam(), KvDtype::int4);
}

TEST_P(Int4OnVnni, LateLargeScoresKeepTheSoftmaxFinite) {
  if (!cpu_has(ComputeUnit::vnni_int8)) GTEST_SKIP() << "CPU lacks avx512_vnni (or AVX-512)";
  check_late_large_scores(ComputeUnit::vnni_int8, GetParam(), KvDtype::int4);
}

TEST_P(Int4OnVnni, AttentionSinkKeepsTheSmallWeightsMass) {
  if (!cpu_has(ComputeUnit::vnni_int8)) GTEST_SKIP() << "CPU lacks avx512_vnni (or AVX-512)";
  check_attention_sink(ComputeUnit::vnni_int8, GetParam(), KvDtype::int4);
}

// f16 caches on AMX-BF16 (amx_f16_split.hpp), from 8 queries per kv head (GQA-4 at 32 heads)
// to MQA, held to the same checks: head sizes whose rows end inside a 64-byte step or a 4-byte
// group (24, 40, 70, 80, 136: the split rows are zero-padded copies), pages that cut blocks,
// and late large scores. The accuracy check's budget is f16's own error: the split adds
// almost nothing to it (RMS ratio measured 1.00).
class F16OnAmx : public ::testing::TestWithParam<std::size_t> {};

TEST_P(F16OnAmx, WithinTwiceTheFormatErrorOfTheExactPath) {
  if (!cpu_has(ComputeUnit::amx_bf16)) {
    GTEST_SKIP() << "CPU lacks " << feature_of(ComputeUnit::amx_bf16) << " (or AVX-512)";
  }
  const std::size_t group = GetParam();
  check_unit(ComputeUnit::amx_bf16, group, Data::uniform, cases({24, 40, 70, 128, 136}),
             KvDtype::f16);
  check_unit(ComputeUnit::amx_bf16, group, Data::ragged, cases({40, 128}), KvDtype::f16);
  check_unit(ComputeUnit::amx_bf16, group, Data::outliers, cases({128}), KvDtype::f16);
}

TEST_P(F16OnAmx, PagedLayoutReadsThroughThePageTable) {
  if (!cpu_has(ComputeUnit::amx_bf16)) {
    GTEST_SKIP() << "CPU lacks " << feature_of(ComputeUnit::amx_bf16) << " (or AVX-512)";
  }
  check_paged(ComputeUnit::amx_bf16, GetParam(), KvDtype::f16);
}

TEST_P(F16OnAmx, LateLargeScoresKeepTheSoftmaxFinite) {
  if (!cpu_has(ComputeUnit::amx_bf16)) {
    GTEST_SKIP() << "CPU lacks " << feature_of(ComputeUnit::amx_bf16) << " (or AVX-512)";
  }
  check_late_large_scores(ComputeUnit::amx_bf16, GetParam(), KvDtype::f16);
}

INSTANTIATE_TEST_SUITE_P(Groups, F16OnAmx, ::testing::Values(std::size_t{8}, std::size_t{32}),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return "group" + std::to_string(info.param);
                         });

// A GQA problem with `group` queries per kv head on VNNI, and the MHA problem whose kv heads
// repeat each of its kv heads for every query head (one query per kv head: each reads the rows
// itself, dot_int4.hpp); single-threaded, contexts of at most 256 keys (one work item per kv
// head either way, nothing to merge).
struct SharedAndAlone {
  std::vector<float> shared, alone;
  float max_v = 0.0f;  // largest stored value
};
SharedAndAlone int4_shared_and_alone(std::size_t group, std::size_t d, std::size_t tokens) {
  const std::size_t n_kv = 2;
  RandomProblem gqa(n_kv * group, n_kv, d, tokens - 1, 1, KvDtype::int4, 700 + tokens, 1.0f,
                    Data::ragged);
  RandomProblem mha(n_kv * group, n_kv * group, d, tokens - 1, 1, KvDtype::int4, 1);
  mha.q = gqa.q;
  for (std::vector<float>* x : {&mha.k, &mha.v}) {
    const std::vector<float>& from = x == &mha.k ? gqa.k : gqa.v;
    for (std::size_t t = 0; t < tokens; ++t) {
      for (std::size_t h = 0; h < n_kv * group; ++h) {
        std::copy_n(from.data() + (t * n_kv + h / group) * d, d,
                    x->data() + (t * n_kv * group + h) * d);
      }
    }
  }
  mha.cache = KvCache(n_kv * group, d, tokens, KvDtype::int4);
  mha.cache.append(mha.k.data(), mha.v.data(), tokens);
  SharedAndAlone run{std::vector<float>(gqa.out_size()), std::vector<float>(mha.out_size(), -1.0f)};
  simd::attend_dot_unit(gqa.problem(run.shared.data()), ComputeUnit::vnni_int8, 1);
  simd::attend_dot_unit(mha.problem(run.alone.data()), ComputeUnit::vnni_int8, 1);
  for (float x : gqa.v) run.max_v = std::max(run.max_v, std::fabs(x));
  return run;
}

// 2 and 4 queries per kv head share one unpacked block (dot_int4_block.hpp) and do the
// arithmetic of one query reading alone: equal bit for bit.
TEST(Int4OnVnniShared, BlockEqualsEachQueryReadingAlone) {
  if (!cpu_has(ComputeUnit::vnni_int8)) GTEST_SKIP() << "CPU lacks avx512_vnni (or AVX-512)";
  for (std::size_t group : {2, 4}) {
    for (std::size_t d : {40, 128, 136}) {
      for (std::size_t tokens : {1, 17, 64, 129, 256}) {
        SCOPED_TRACE(std::to_string(group) + " queries per kv head, head_dim " + std::to_string(d) +
                     ", " + std::to_string(tokens) + " keys");
        const SharedAndAlone run = int4_shared_and_alone(group, d, tokens);
        EXPECT_EQ(
            0, std::memcmp(run.shared.data(), run.alone.data(), run.shared.size() * sizeof(float)))
            << "differ by " << max_abs_diff(run.shared, run.alone);
      }
    }
  }
}

// From 8 queries per kv head the block's scores come 16 queries at a time, a query per lane
// (dot_int4_lanes.hpp), a last group of 8 or more too (24, 40); fewer query by query (17). The lane
// sums round in another order, so a weight may round to the neighbouring u8 step: within a step of
// the weights (as check 1) of reading alone. Head sizes with a short last group or segment.
TEST(Int4OnVnniShared, LanesAgreeWithEachQueryReadingAlone) {
  if (!cpu_has(ComputeUnit::vnni_int8)) GTEST_SKIP() << "CPU lacks avx512_vnni (or AVX-512)";
  for (std::size_t group : {8, 16, 17, 24, 32, 40}) {
    for (std::size_t d : {40, 128, 136}) {
      for (std::size_t tokens : {1, 17, 64, 129, 256}) {
        SCOPED_TRACE(std::to_string(group) + " queries per kv head, head_dim " + std::to_string(d) +
                     ", " + std::to_string(tokens) + " keys");
        const SharedAndAlone run = int4_shared_and_alone(group, d, tokens);
        EXPECT_LE(max_abs_diff(run.shared, run.alone),
                  weight_step(ComputeUnit::vnni_int8, KvDtype::int4) * run.max_v +
                      1e-6 * max_abs(run.alone));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Groups, Int4OnVnni,
                         ::testing::Values(std::size_t{1}, std::size_t{2}, std::size_t{4},
                                           std::size_t{32}),
                         [](const auto& info) { return "group" + std::to_string(info.param); });

// attend() in fast mode runs the unit attention_compute_unit() names, and exact mode the
// widening kernel, bit for bit.
TEST(DotUnitDispatch, FastModeRunsTheChosenUnit) {
  if (!cpu_supports(Isa::avx512)) GTEST_SKIP() << "CPU lacks AVX-512";
  for (KvDtype dtype : {KvDtype::int8, KvDtype::bf16, KvDtype::f16, KvDtype::f32}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const RandomProblem rp(16, 2, 64, 300, 1, dtype, 9);  // 8 queries per kv head
    std::vector<float> via_attend(rp.out_size()), direct(rp.out_size()), exact(rp.out_size()),
        widening(rp.out_size());
    attend(rp.problem(via_attend.data()), Isa::avx512, 2, ComputeMode::fast);
    const ComputeUnit unit = attention_compute_unit(dtype, Isa::avx512, ComputeMode::fast, 8, 64);
    if (unit == ComputeUnit::fp32_fma) {
      run_isa(Isa::avx512, rp.problem(direct.data()), 2);
    } else {
      EXPECT_TRUE(dtype == dtype_of(unit) ||
                  (dtype == KvDtype::f16 && unit == ComputeUnit::amx_bf16));
      simd::attend_dot_unit(rp.problem(direct.data()), unit, 2);
    }
    EXPECT_EQ(0, std::memcmp(via_attend.data(), direct.data(), direct.size() * sizeof(float)));
    attend(rp.problem(exact.data()), Isa::avx512, 2, ComputeMode::exact);
    run_isa(Isa::avx512, rp.problem(widening.data()), 2);
    EXPECT_EQ(0, std::memcmp(exact.data(), widening.data(), exact.size() * sizeof(float)));
  }
  const auto unit_for = [](KvDtype dtype, std::size_t sharing, std::size_t head_dim = 128,
                           Isa isa = Isa::avx512, ComputeMode mode = ComputeMode::fast) {
    return attention_compute_unit(dtype, isa, mode, sharing, head_dim);
  };
  EXPECT_EQ(ComputeUnit::fp32_fma, unit_for(KvDtype::int8, 32, 128, Isa::avx2));
  EXPECT_EQ(ComputeUnit::fp32_fma,
            unit_for(KvDtype::int8, 32, 128, Isa::avx512, ComputeMode::exact));
  // One to four queries per key block (MHA to GQA-8 decode): VNNI for int8 (rows in place
  // below four), and bf16 stays exact. From eight (GQA-4, MQA, prefill): AMX where the CPU
  // has it.
  const bool amx_int8 = cpu_has(ComputeUnit::amx_int8), amx_bf16 = cpu_has(ComputeUnit::amx_bf16);
  const ComputeUnit vnni =
      cpu_has(ComputeUnit::vnni_int8) ? ComputeUnit::vnni_int8 : ComputeUnit::fp32_fma;
  // One query per kv head: widening where the CPU streams its rows without software
  // prefetches (AMD), also over pages shorter than a block or of 256 tokens and more; VNNI
  // elsewhere, and over pages of 64 to 255 tokens where the L1 data cache holds 48 KiB or more
  // (Zen 5; Zen 4's 32 KiB widen there too).
  const ComputeUnit streams = prefetch_single_query_rows() ? vnni : ComputeUnit::fp32_fma;
  const ComputeUnit mid_pages = cpu_features().l1d_kib >= 48 ? vnni : streams;
  EXPECT_EQ(streams, unit_for(KvDtype::int8, 1));
  const auto paged_unit = [&](std::size_t page_tokens) {
    return attention_compute_unit(KvDtype::int8, Isa::avx512, ComputeMode::fast, 1, 128,
                                  page_tokens);
  };
  EXPECT_EQ(streams, paged_unit(16));
  EXPECT_EQ(streams, paged_unit(63));
  EXPECT_EQ(mid_pages, paged_unit(64));
  EXPECT_EQ(mid_pages, paged_unit(128));
  EXPECT_EQ(mid_pages, paged_unit(255));
  EXPECT_EQ(streams, paged_unit(256));
  EXPECT_EQ(streams, paged_unit(1024));
  EXPECT_EQ(vnni, unit_for(KvDtype::int8, 2));
  for (std::size_t sharing : {1, 4, 32, 64}) EXPECT_EQ(vnni, unit_for(KvDtype::int4, sharing));
  EXPECT_EQ(ComputeUnit::fp32_fma, unit_for(KvDtype::bf16, 1));
  EXPECT_EQ(vnni, unit_for(KvDtype::int8, 4));
  EXPECT_EQ(ComputeUnit::fp32_fma, unit_for(KvDtype::bf16, 4));
  EXPECT_EQ(ComputeUnit::fp32_fma, unit_for(KvDtype::f16, 4));
  for (std::size_t sharing : {kAmxMinSharing, std::size_t{32}}) {
    EXPECT_EQ(amx_int8 ? ComputeUnit::amx_int8 : vnni, unit_for(KvDtype::int8, sharing));
    if (amx_bf16) {
      EXPECT_EQ(ComputeUnit::amx_bf16, unit_for(KvDtype::bf16, sharing));
    }
    // f16 as hi and lo bf16 parts, any head size (the split rows are padded copies).
    EXPECT_EQ(amx_bf16 ? ComputeUnit::amx_bf16 : ComputeUnit::fp32_fma,
              unit_for(KvDtype::f16, sharing, 71));
  }
  // Rows that end inside a 4-byte group never go to the tiles.
  EXPECT_NE(ComputeUnit::amx_int8, unit_for(KvDtype::int8, 32, 70));
  EXPECT_NE(ComputeUnit::amx_bf16, unit_for(KvDtype::bf16, 32, 71));
  if (amx_bf16) {
    EXPECT_EQ(ComputeUnit::amx_bf16, unit_for(KvDtype::bf16, 32, 70));
  }
}

TEST(ComputeMode, ParsesAndNamesModes) {
  EXPECT_EQ(ComputeMode::exact, parse_compute_mode("exact"));
  EXPECT_EQ(ComputeMode::fast, parse_compute_mode("fast"));
  EXPECT_EQ("fast", to_string(ComputeMode::fast));
  try {
    parse_compute_mode("quick");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'quick'"), std::string::npos) << e.what();
  }
}

// CPUID agrees with the kernel's view of the CPU (/proc/cpuinfo flags).
TEST(CpuFeatures, AgreeWithProcCpuinfo) {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string flags;
  char line[8192];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "flags", 5) == 0) {
      flags = std::string(line) + " ";
      break;
    }
  }
  std::fclose(f);
  const auto has = [&](const char* name) {
    return flags.find(" " + std::string(name) + " ") != std::string::npos ||
           flags.find(" " + std::string(name) + "\n") != std::string::npos;
  };
  const CpuFeatures& cpu = cpu_features();
  EXPECT_EQ(has("avx512_vnni"), cpu.avx512_vnni);
  EXPECT_EQ(has("avx512_bf16"), cpu.avx512_bf16);
  EXPECT_EQ(has("avx_vnni"), cpu.avx_vnni);
  EXPECT_EQ(has("avx512_fp16"), cpu.avx512_fp16);
  if (!has("amx_tile")) {
    EXPECT_FALSE(cpu.amx_bf16 || cpu.amx_int8);
  } else {
    EXPECT_EQ(has("amx_bf16") && cpu.amx_granted, cpu.amx_bf16) << cpu.amx_note;
  }
  EXPECT_FALSE(describe(cpu).empty());
}

// Wall-clock seconds f() took: only for lower bounds, which noise cannot break.
template <class F>
double seconds_taken(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Each probe counts the work it does, and does it: it takes no less than that work can.
TEST(DotBurn, CountsWorkDoneAndRefusesMissingUnits) {
  for (ComputeUnit unit : {ComputeUnit::vnni_int8, ComputeUnit::avx512_bf16, ComputeUnit::amx_int8,
                           ComputeUnit::amx_bf16}) {
    SCOPED_TRACE(std::string(to_string(unit)));
    if (!cpu_has(unit)) {
      EXPECT_THROW(dot_burn(unit, 10, 1), std::invalid_argument);
      continue;
    }
    // Multiply-adds per iteration: 16 chains of one vector instruction (64 int8 or 32 bf16
    // products), or 4 tile products of 16 × 16 × 64 (int8) or × 32 (bf16).
    const double per_iteration = unit == ComputeUnit::vnni_int8     ? 2.0 * 64 * 16
                                 : unit == ComputeUnit::avx512_bf16 ? 2.0 * 32 * 16
                                 : unit == ComputeUnit::amx_int8    ? 2.0 * 16 * 16 * 64 * 4
                                                                    : 2.0 * 16 * 16 * 32 * 4;
    EXPECT_DOUBLE_EQ(per_iteration * 1000 * 2, dot_burn(unit, 1000, 2));
    // The chains cannot be folded away: the run takes at least what its instructions take at
    // any plausible clock. No x86 core issues more than 4 vector dot instructions per cycle
    // (each iteration is 16), or more than one tile product per 4 cycles (each iteration is 4;
    // Sapphire Rapids takes 16), or runs above 6 GHz. Noise on a shared machine only
    // lengthens a run, so this bound cannot fail by chance.
    const std::size_t iterations = 800000;
    const bool tiles = unit == ComputeUnit::amx_int8 || unit == ComputeUnit::amx_bf16;
    const double floor_seconds = tiles ? iterations * 4.0 * 4 / 6e9 : iterations * 16.0 / (4 * 6e9);
    EXPECT_GE(seconds_taken([&] { dot_burn(unit, iterations, 1); }), floor_seconds)
        << "the probe ran faster than its instructions can";
  }
}

// The fed AMX probe does the loads it counts (and, with products, the products): 4 a round,
// taking no less than tile loads can (none loads a 16-row tile in under 4 cycles, at any
// plausible clock).
TEST(DotBurn, FedAmxProbeCountsItsLoads) {
  if (!cpu_has(ComputeUnit::amx_bf16)) {
    EXPECT_THROW(amx_bf16_fed_burn(10, true), std::invalid_argument);
    GTEST_SKIP() << "CPU lacks amx-bf16 (or Linux did not grant tile data)";
  }
  EXPECT_EQ(amx_bf16_fed_burn(1000, true), 4000.0);
  EXPECT_EQ(amx_bf16_fed_burn(1000, false), 4000.0);
  const std::size_t rounds = 400000;
  for (bool products : {false, true}) {
    EXPECT_GE(seconds_taken([&] { amx_bf16_fed_burn(rounds, products); }), rounds * 4.0 * 4 / 6e9)
        << "the probe ran faster than its tile loads can";
  }
}

}  // namespace
}  // namespace kvscope::test
