// The error bound of attention_f64.hpp bites: computations with one planted fault — one key
// dropped, int8 rows read with their neighbour's scale, the accumulator not rescaled when the
// running max rises — each land outside it, at the long contexts where a bound that grows as
// n·u would let them through, while every ISA's kernel lands inside.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/kernels/attention_f64.hpp"
#include "tests/kernels/attention_test_util.hpp"

namespace kvscope::test {
namespace {

struct Shape {
  std::size_t heads, kv_heads, head_dim, first_pos, n_queries;
  Data data;
  const char* what;
};

const Shape kShapes[] = {
    {8, 2, 128, 1999, 1, Data::uniform, "decode GQA-4 d128, 2000 keys, uniform"},
    {2, 2, 72, 2999, 1, Data::uniform, "decode MHA d72, 3000 keys, uniform"},
    {4, 1, 136, 1499, 1, Data::outliers, "decode MQA d136, 1500 keys, outliers"},
    {4, 2, 64, 1000, 8, Data::uniform, "prefill GQA-2 d64, 1008 keys, uniform"},
};

// max|wrong − truth| / bound over the problem: > 1 means the bound rejects the fault.
double rejection(const RandomProblem& rp, const F64Attention& truth, const Fault& fault) {
  return worst_of_bound(attend_f64(rp, fault).out, truth);
}

TEST(AttentionBound, RejectsOneDroppedKey) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.what);
    const RandomProblem rp(s.heads, s.kv_heads, s.head_dim, s.first_pos, s.n_queries, KvDtype::f32,
                           41, 1.0f, s.data);
    const F64Attention truth = attend_f64(rp);
    // The first key, both sides of a 64-key block edge, a middle key and the last key.
    const std::size_t last = s.first_pos;  // the last key every query reads
    for (std::size_t key : {std::size_t{0}, std::size_t{63}, std::size_t{64}, last / 2, last}) {
      const double r = rejection(rp, truth, {.drop_key = key});
      std::printf("%-42s drop key %4zu: %.3g × bound\n", s.what, key, r);
      EXPECT_GT(r, 1.0) << "dropping key " << key << " passes the bound";
    }
  }
}

TEST(AttentionBound, RejectsScaleOfTheNeighbouringRow) {
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.what);
    const RandomProblem rp(s.heads, s.kv_heads, s.head_dim, s.first_pos, s.n_queries, KvDtype::int8,
                           43, 1.0f, s.data);
    const double r = rejection(rp, attend_f64(rp), {.scale_of_next_row = true});
    std::printf("%-42s neighbour's scale: %.3g × bound\n", s.what, r);
    EXPECT_GT(r, 1.0);
  }
}

TEST(AttentionBound, RejectsMissingRescale) {
  for (const Shape& s : kShapes) {
    for (Data data : {s.data, Data::peaked}) {
      SCOPED_TRACE(std::string(s.what) + ", " + to_string(data));
      const RandomProblem rp(s.heads, s.kv_heads, s.head_dim, s.first_pos, s.n_queries,
                             KvDtype::f32, 47, 1.0f, data);
      const double r = rejection(rp, attend_f64(rp), {.no_rescale = true});
      std::printf("%-42s %-8s no rescale: %.3g × bound\n", s.what, to_string(data), r);
      EXPECT_GT(r, 1.0);
    }
  }
}

}  // namespace
}  // namespace kvscope::test
