// The decoder layer on every ISA this CPU runs × every cache type × MHA/GQA/MQA, over a
// context long enough for decode to split the sequence (flash-decoding merge), with the cache
// filled in many calls: prefill chunks of 64, 1, 3 and 65 tokens, then decode steps.
// Each run is checked three ways:
//   split vs one prefill on the same ISA and cache type (positions, cache appends, merge);
//   this ISA vs the scalar layer with the same cache type (the SIMD, oneDNN, GEMV paths);
//   the float64 layer of tests/support (the f32 cache tightly, reduced types within their
//   format's step).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "engine/decoder_layer.hpp"
#include "support/format_step.hpp"
#include "support/reference_layer.hpp"

namespace kvscope {
namespace {

struct Attn {
  std::int64_t heads, kv_heads, head_dim;
  const char* name;
};

// MHA: full vectors on every ISA (the kernels read the cache in place); GQA: a tail on
// AVX-512; MQA: a tail on every ISA.
constexpr Attn kMha{4, 4, 16, "mha"}, kGqa{4, 2, 24, "gqa2"}, kMqa{4, 1, 18, "mqa"};

// Decode from position 1000 reads > 256 keys: the sequence is split. Under the sanitizers
// (~10× slower) 600 tokens, which still split.
#ifdef KVSCOPE_TESTS_UNDER_SANITIZERS
constexpr std::size_t kTokens = 600;
#else
constexpr std::size_t kTokens = 1040;
#endif
constexpr std::size_t kPrefilled = kTokens - 40;  // then 40 decode steps
// Prefill chunk sizes, cycled until kPrefilled tokens are in the cache.
constexpr std::size_t kChunks[] = {64, 1, 3, 65};

void PrintTo(const Attn& a, std::ostream* os) { *os << a.name; }

LayerShape shape_of(const Attn& a) {
  return {.hidden_size = 48,
          .n_heads = a.heads,
          .n_kv_heads = a.kv_heads,
          .head_dim = a.head_dim,
          .ffn_size = 80,
          .capacity = static_cast<std::int64_t>(kTokens)};
}

// Random weights with W_Q scaled up 4×: scores spread over several units, so softmax is
// peaked and each key's weight matters (with the plain ±1/√in weights, attention over 1,000
// keys is close to a plain mean and hides which keys were read).
LayerWeights peaked_weights(const LayerConfig& c) {
  LayerWeights w = LayerWeights::random(c, 17);
  std::vector<float> wq = w.wq.to_f32();
  for (float& x : wq) x *= 4.0f;
  w.wq = WeightMatrix(wq, w.wq.rows(), w.wq.cols());
  return w;
}

std::vector<float> run_whole(const LayerConfig& c, const LayerWeights& w, KvTypes dtype, Isa isa,
                             const std::vector<float>& x) {
  DecoderLayer layer(c, w, {.kv_dtype = dtype, .isa = isa, .threads = 2});
  return layer.prefill(x.data(), kTokens);
}

std::vector<float> run_split(const LayerConfig& c, const LayerWeights& w, KvTypes dtype, Isa isa,
                             const std::vector<float>& x) {
  const std::size_t H = c.hidden_size();
  DecoderLayer layer(c, w, {.kv_dtype = dtype, .isa = isa, .threads = 3});
  std::vector<float> y;
  for (std::size_t done = 0, i = 0; done < kPrefilled; ++i) {
    const std::size_t n = std::min(kChunks[i % std::size(kChunks)], kPrefilled - done);
    const std::vector<float> part = layer.prefill(x.data() + done * H, n);
    y.insert(y.end(), part.begin(), part.end());
    done += n;
  }
  for (std::size_t t = kPrefilled; t < kTokens; ++t) {
    const std::vector<float> row = layer.decode(x.data() + t * H);
    y.insert(y.end(), row.begin(), row.end());
  }
  return y;
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::fabs(e));
  return m;
}

// max |a − b| / scale.
double relative_diff(const std::vector<float>& a, const std::vector<float>& b, double scale) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(e)) return INFINITY;
    m = std::max(m, e);
  }
  return m / scale;
}

// The float64 layer's outputs of one shape, computed once per test.
struct Truth {
  LayerConfig config;
  LayerWeights weights;
  std::vector<float> x;
  std::vector<double> out;
  double max_out;

  explicit Truth(const Attn& a)
      : config(shape_of(a)), weights(peaked_weights(config)), x(kTokens * 48) {
    fill_uniform(x, 23, -1, 1);
    out = test::reference_layer(shape_of(a), weights, x, kTokens);
    max_out = max_abs(out);
  }
};

using test::format_step;
using Param = std::tuple<Isa, Attn>;
class DecoderLayerIsa : public ::testing::TestWithParam<Param> {};

// Tolerances, relative to max |float64 output|, u = 2^-24:
//   between two f32 computations of the same layer (split vs whole, ISA vs scalar, f32 cache
//   vs float64): 32u. Measured: ≤ 6u. The paths differ in summation order only.
//   with a reduced cache, two paths may also round a K or V element to opposite sides of a
//   format step where their f32 projections differ in the last bit; one such flip moves the
//   output by at most a fraction of a step: 32u + step/4. Measured: ≤ step/60.
//   a reduced cache against float64 (which stores nothing rounded): 2 steps. Measured:
//   ≤ 0.3 step (f16, bf16), ≤ 0.9 step (int8, whose step is relative to the row's absmax;
//   int4, relative to each group's absmax; int8:f16 takes the coarser of its two steps).

TEST_P(DecoderLayerIsa, EveryCacheTypeSplitAndWholeMatchReferences) {
  const auto [isa, attn] = GetParam();
  if (!cpu_supports(isa)) GTEST_SKIP() << "CPU lacks " << to_string(isa);
  const Truth truth(attn);
  const LayerConfig& c = truth.config;
  const double u = 0x1p-24;
  for (KvTypes dtype :
       {KvTypes(KvDtype::f32), KvTypes(KvDtype::f16), KvTypes(KvDtype::bf16),
        KvTypes(KvDtype::int8), KvTypes(KvDtype::int4), KvTypes(KvDtype::int8, KvDtype::f16)}) {
    SCOPED_TRACE(to_string(dtype));
    const double step = std::max(format_step(dtype.k), format_step(dtype.v));
    const double same = 32 * u + step / 4;
    const std::vector<float> whole = run_whole(c, truth.weights, dtype, isa, truth.x);
    const std::vector<float> split = run_split(c, truth.weights, dtype, isa, truth.x);
    ASSERT_EQ(split.size(), whole.size());
    const double split_err = relative_diff(split, whole, truth.max_out);
    const double err = test::relative_error(whole, truth.out);
    EXPECT_LE(split_err, same) << "prefill chunks and decode steps vs one prefill";
    EXPECT_LE(err, dtype == KvDtype::f32 ? 32 * u : 2 * step) << "one prefill vs float64";
    EXPECT_LE(test::relative_error(split, truth.out), dtype == KvDtype::f32 ? 32 * u : 2 * step)
        << "split vs float64";
    // The scalar layer with the same cache type (f32 and the scaled int8; the scalar run of
    // 1,040 tokens is the costly part, and f16/bf16 reach the kernels' tests instead).
    double isa_err = 0;
    if (isa != Isa::scalar &&
        (dtype == KvDtype::f32 || dtype == KvDtype::int8 || dtype == KvDtype::int4)) {
      const std::vector<float> scalar = run_whole(c, truth.weights, dtype, Isa::scalar, truth.x);
      isa_err = relative_diff(whole, scalar, truth.max_out);
      EXPECT_LE(isa_err, same) << "vs the scalar layer";
    }
    std::printf("%-6s %-4s %-8s max|diff|/max|out|: split %.3g, vs scalar %.3g, vs f64 %.3g\n",
                std::string(to_string(isa)).c_str(), attn.name, to_string(dtype).c_str(), split_err,
                isa_err, err);
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsasMhaGqaMqa, DecoderLayerIsa,
                         ::testing::Combine(::testing::Values(Isa::scalar, Isa::sse2, Isa::avx2,
                                                              Isa::avx512),
                                            ::testing::Values(kMha, kGqa, kMqa)),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(to_string(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param).name;
                         });

}  // namespace
}  // namespace kvscope
