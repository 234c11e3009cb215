// The paged layout (pages of N tokens through a page table) against the contiguous one: every
// SIMD instantiation × cache type × GQA ratio × page size, decode and prefill. Where N is a
// multiple of the kernels' 64-key block and there is one kv head, the blocks are the same and
// so must every bit be. Otherwise pages end blocks early, or decode reads page by page, all
// heads of a page in turn, in chunks of its own: that changes only where the online softmax
// rescales and the chunks merge, so the result must meet the same float64 bound as the
// contiguous one and stay within float32 rounding of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/prefetch_policy.hpp"
#include "tests/kernels/attention_f64.hpp"
#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {
namespace {

struct Case {
  std::size_t head_dim, first_pos, n_queries;
};

// Decode short and long (split into chunks and merged), prefill from empty and across
// several key blocks.
const Case kCases[] = {{72, 128, 1}, {128, 1999, 1}, {40, 0, 17}, {24, 5, 70}};

using Param = std::tuple<Isa, KvTypes, std::size_t, std::size_t>;  // ISA, types, group, N

// rp on `isa` over its contiguous cache (1 thread) and over `paged` (1 and 2 threads, which
// must agree bit for bit): {contiguous output, paged output}.
std::pair<std::vector<float>, std::vector<float>> contiguous_and_paged(Isa isa,
                                                                       const RandomProblem& rp,
                                                                       const KvCache& paged) {
  std::vector<float> flat(rp.out_size()), out(rp.out_size(), -1.0f), out2(rp.out_size(), -2.0f);
  run_isa(isa, rp.problem(flat.data()), 1);
  AttentionProblem p = rp.problem(out.data());
  p.kv = paged.view();
  run_isa(isa, p, 1);
  p.out = out2.data();
  run_isa(isa, p, 2);
  EXPECT_EQ(0, std::memcmp(out.data(), out2.data(), out.size() * sizeof(float)))
      << "1 vs 2 threads differ by " << max_abs_diff(out, out2);
  return {std::move(flat), std::move(out)};
}

class AttentionPaged : public ::testing::TestWithParam<Param> {};

TEST_P(AttentionPaged, EqualsContiguousLayout) {
  const auto [isa, types, group, page_tokens] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  if (kUnderSanitizers && page_tokens >= 128) {
    GTEST_SKIP() << "under sanitizers pages of 5, 16 and 64 cover the three kinds of block: cut "
                    "at page ends, across pages by chunks of 16, within a page";
  }
  const std::size_t n_kv = group == 32 ? 1 : 2;
  unsigned seed = 7;
  for (const Case& c : kCases) {
    if (kUnderSanitizers && c.first_pos > 1000) continue;  // for time
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", first_pos " +
                 std::to_string(c.first_pos) + ", n_queries " + std::to_string(c.n_queries));
    const RandomProblem rp(n_kv * group, n_kv, c.head_dim, c.first_pos, c.n_queries, types, seed++,
                           1.0f, Data::outliers);
    const KvCache paged = paged_copy(rp, page_tokens);
    ASSERT_TRUE(paged.view().paged());
    const auto [flat, out] = contiguous_and_paged(isa, rp, paged);
    // With one kv head, pages of whole blocks are read block for block as the contiguous
    // layout is (with more, decode reads page by page, all heads in turn, in other chunks).
    if (page_tokens % 64 == 0 && n_kv == 1) {
      EXPECT_EQ(0, std::memcmp(out.data(), flat.data(), out.size() * sizeof(float)))
          << "paged differs from contiguous by " << max_abs_diff(out, flat);
    }
    EXPECT_LE(worst_of_bound(out, attend_f64(rp)), 1.0) << "max |error| / bound";
    // Same products and sums, rescaled at other block ends: float32 roundings of the running
    // sums only (measured ≤ 8e-7 of max|out| over this suite).
    EXPECT_LE(max_abs_diff(out, flat), 1e-5 * max_abs(flat));
  }
}

// Decode over a paged cache of many kv heads runs items of up to 8 heads
// (page_heads_per_item): 12 kv heads make 2 items of 6 per chunk, 9 make 3 of 3, so items
// start at kv heads other than 0. Exact on every ISA, and fast (int8 on VNNI where the CPU
// requests single rows ahead, whose weights' rounding moves with the chunks: 2/254 of max |v|,
// as the dot-unit tests hold it), against the contiguous layout; threads change no bit.
TEST(AttentionPagedHeads, ItemsOfSomeKvHeadsEach) {
  for (const std::size_t n_kv : {12, 9}) {
    for (const KvDtype dtype : {KvDtype::f32, KvDtype::bf16, KvDtype::int8}) {
      for (const std::size_t page_tokens : {16, 256}) {  // 256: chunks of whole pages
        SCOPED_TRACE(std::to_string(n_kv) + " kv heads, " + std::string(to_string(dtype)) +
                     ", pages of " + std::to_string(page_tokens));
        const RandomProblem rp(n_kv, n_kv, 64, 1500, 1, dtype, 41, 1.0f, Data::outliers);
        const KvCache paged = paged_copy(rp, page_tokens);
        for (const Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
          if (!cpu_supports(isa)) continue;
          for (const ComputeMode mode : {ComputeMode::exact, ComputeMode::fast}) {
            SCOPED_TRACE(isa_name(isa) + " " + std::string(to_string(mode)));
            std::vector<float> flat(rp.out_size()), out(rp.out_size(), -1.0f),
                out2(rp.out_size(), -2.0f);
            attend(rp.problem(flat.data()), isa, 2, mode);
            AttentionProblem p = rp.problem(out.data());
            p.kv = paged.view();
            attend(p, isa, 1, mode);
            p.out = out2.data();
            attend(p, isa, 2, mode);
            EXPECT_EQ(0, std::memcmp(out.data(), out2.data(), out.size() * sizeof(float)))
                << "1 vs 2 threads differ by " << max_abs_diff(out, out2);
            const bool rounds_weights = mode == ComputeMode::fast && dtype == KvDtype::int8;
            EXPECT_LE(max_abs_diff(out, flat),
                      rounds_weights ? 2.0 / 254 * rp.max_abs_v() : 1e-5 * max_abs(flat));
            if (mode == ComputeMode::exact) {
              EXPECT_LE(worst_of_bound(out, attend_f64(rp)), 1.0) << "max |error| / bound";
            }
          }
        }
      }
    }
  }
}

// prefetch_single_query_rows() overridden for one scope (both vendors' paths on any CPU).
class SingleQueryRowsPolicy {
 public:
  explicit SingleQueryRowsPolicy(bool requested) { override_prefetch_single_query_rows(requested); }
  ~SingleQueryRowsPolicy() { override_prefetch_single_query_rows(std::nullopt); }
  SingleQueryRowsPolicy(const SingleQueryRowsPolicy&) = delete;
  SingleQueryRowsPolicy& operator=(const SingleQueryRowsPolicy&) = delete;
};

// MHA decode reads a paged cache page by page under both prefetch policies: without single
// rows requested ahead (AMD's), all heads of a page in turn, int8, bf16 and f16 rows over
// pages of at most a block through run_page_heads (two streams of heads, parts
// software-pipelined), f32 rows through run_page_part; with them (Intel's), a group of heads
// at a time. Heads that split into even and uneven streams (2, 5, 32), pages cut short (5), of
// one score vector (16), two (32) and a block (64), the last page partial (int8 on AVX-512
// reads parts of 4 pages of 16 or 2 of 32 as one block, the last part short): within float32
// rounding of the contiguous layout, within the float64 bound, and threads change no bit.
TEST(AttentionPagedHeads, BothPrefetchPoliciesOfOneQueryPerHead) {
  for (const bool single_rows : {false, true}) {
    const SingleQueryRowsPolicy policy(single_rows);
    for (const std::size_t n_kv : {2, 5, 32}) {
      if (kUnderSanitizers && n_kv == 32) continue;  // 2 and 5 split evenly and not
      for (const KvDtype dtype : {KvDtype::int8, KvDtype::f32, KvDtype::bf16, KvDtype::f16}) {
        const RandomProblem rp(n_kv, n_kv, 128, 1100 + n_kv, 1, dtype, 53 + n_kv, 1.0f,
                               Data::outliers);
        const F64Attention truth = attend_f64(rp);
        for (const std::size_t page_tokens : {5, 16, 32, 64}) {
          const KvCache paged = paged_copy(rp, page_tokens);
          for (const Isa isa : {Isa::sse2, Isa::avx2, Isa::avx512}) {
            if (!cpu_supports(isa)) continue;
            SCOPED_TRACE(std::string(single_rows ? "single rows requested, " : "streamed, ") +
                         std::to_string(n_kv) + " kv heads, " + std::string(to_string(dtype)) +
                         ", pages of " + std::to_string(page_tokens) + ", " + isa_name(isa));
            const auto [flat, out] = contiguous_and_paged(isa, rp, paged);
            EXPECT_LE(max_abs_diff(out, flat), 1e-5 * max_abs(flat));
            EXPECT_LE(worst_of_bound(out, truth), 1.0) << "max |error| / bound";
          }
        }
      }
    }
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  std::string types = to_string(std::get<1>(info.param));
  std::replace(types.begin(), types.end(), ':', '_');
  return isa_name(std::get<0>(info.param)) + "_" + types + "_group" +
         std::to_string(std::get<2>(info.param)) + "_page" +
         std::to_string(std::get<3>(info.param));
}

// Pages of 5 cut blocks short; over pages of 16 the kernels that read rows in place (and the
// dot units) take 64-key blocks across pages, chunk by chunk, the others cut blocks short; 64
// and 128 hold whole blocks, 256 several, and decode's chunks are then whole pages (the
// scalar reference reads through the table row by row:
// decoder_batch_test checks it bit for bit). The types take every kernel: f32 read in place,
// int8 with scales in the pages, bf16 widened into tiles (MQA), int4 read in place (group ≤ 4)
// or tiled, a K:V pair.
INSTANTIATE_TEST_SUITE_P(
    IsasTypesPages, AttentionPaged,
    ::testing::Combine(::testing::Values(Isa::sse2, Isa::avx2, Isa::avx512),
                       ::testing::Values(KvTypes(KvDtype::f32), KvTypes(KvDtype::bf16),
                                         KvTypes(KvDtype::int8), KvTypes(KvDtype::int4),
                                         KvTypes(KvDtype::int8, KvDtype::f16)),
                       ::testing::Values(std::size_t{1}, std::size_t{4}, std::size_t{32}),
                       ::testing::Values(std::size_t{5}, std::size_t{16}, std::size_t{64},
                                         std::size_t{128}, std::size_t{256})),
    param_name);

}  // namespace
}  // namespace kvscope::test
