// Batched decode: B sequences of different lengths advanced one token each per step. Each
// sequence's outputs must equal running it alone, and match the float64 layer over its whole
// token history; a bad batch must leave every cache as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "engine/decoder_layer.hpp"
#include "kernels/units/compute_unit.hpp"
#include "kernels/units/cpu_features.hpp"
#include "support/reference_layer.hpp"

namespace kvscope {
namespace {

struct BatchCase {
  Isa isa;
  KvTypes kv;
  ComputeMode compute;
  std::int64_t window;  // 0: none
  double tolerance;     // against running alone (float32 summation orders differ)
  KvLayout layout{};    // the batch's; running alone is always contiguous
  WeightDtype weights = WeightDtype::f32;
};

void PrintTo(const BatchCase& b, std::ostream* os) {
  *os << to_string(b.isa) << " " << to_string(b.kv) << " " << to_string(b.compute) << " window "
      << b.window << " " << to_string(b.layout) << " " << to_string(b.weights) << " weights";
}

LayerShape batch_shape(std::int64_t capacity, std::int64_t window) {
  return {.hidden_size = 48,
          .n_heads = 4,
          .n_kv_heads = 2,
          .head_dim = 16,
          .ffn_size = 80,
          .capacity = capacity,
          .sliding_window = window};
}

double max_relative_difference(const float* a, const float* b, std::size_t n) {
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < n; ++i) {
    err = std::max(err, std::fabs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(b[i])));
  }
  return err / mag;
}

class DecoderBatchTest : public ::testing::TestWithParam<BatchCase> {};

// Three sequences prefilled to 5, 0 and 11 tokens decode 6 steps together (ragged: each at
// its own position). The same tokens through a layer of their own give the same outputs.
TEST_P(DecoderBatchTest, EachSequenceEqualsRunningItAlone) {
  const BatchCase bc = GetParam();
  if (!cpu_supports(bc.isa)) GTEST_SKIP() << "this CPU lacks " << to_string(bc.isa);
  const std::size_t capacity = 20, steps = 6;
  const LayerShape shape = batch_shape(capacity, bc.window);
  const LayerConfig c(shape);
  const LayerWeights w = LayerWeights::random(c, 3, bc.weights);
  // bf16 weights in fast mode: a batch's rows go through gemm_bf16_dot, each row bit for bit
  // its GEMV, on AVX512-BF16 (elsewhere oneDNN rounds x to bf16 where the GEMV widens exactly:
  // 2^-8 relative per element of x). Where AMX-BF16 takes the batch (gemm_bf16_amx), x is
  // rounded alike and every product is exact, but the f32 sums run in another order than the
  // GEMV's: a few units of 2^-24 per sum (measured 8e-8 of the outputs), held to 1e-6.
  double tolerance = bc.tolerance;
  if (bc.weights == WeightDtype::bf16 && !cpu_features().avx512_bf16) tolerance = 1e-2;
  if (bc.weights == WeightDtype::bf16 && bc.compute == ComputeMode::fast &&
      cpu_has(ComputeUnit::amx_bf16) && tolerance < 1e-6) {
    tolerance = 1e-6;
  }
  const std::size_t H = c.hidden_size();
  const std::vector<std::size_t> prefilled{5, 0, 11};
  const DecoderLayer::Options options{
      .kv_dtype = bc.kv, .isa = bc.isa, .threads = 2, .compute = bc.compute};
  DecoderLayer::Options batch_options = options;
  batch_options.kv_layout = bc.layout;
  DecoderLayer layer(c, w, batch_options);

  std::vector<std::vector<float>> tokens(prefilled.size());  // each sequence's whole input
  std::vector<LayerSequence> sequences;
  std::vector<std::vector<float>> batched_out(prefilled.size());
  for (std::size_t s = 0; s < prefilled.size(); ++s) {
    tokens[s].resize((prefilled[s] + steps) * H);
    fill_uniform(tokens[s], 100 + s, -1, 1);
    sequences.push_back(layer.new_sequence());
    if (prefilled[s] > 0)
      batched_out[s] = layer.prefill(sequences[s], tokens[s].data(), prefilled[s]);
  }
  std::vector<LayerSequence*> batch;
  for (LayerSequence& s : sequences) batch.push_back(&s);
  for (std::size_t step = 0; step < steps; ++step) {
    std::vector<float> x;
    for (std::size_t s = 0; s < prefilled.size(); ++s) {
      const float* row = tokens[s].data() + (prefilled[s] + step) * H;
      x.insert(x.end(), row, row + H);
    }
    const std::vector<float> y = layer.decode_batch(x.data(), batch);
    ASSERT_EQ(y.size(), prefilled.size() * H);
    for (std::size_t s = 0; s < prefilled.size(); ++s)
      batched_out[s].insert(batched_out[s].end(), y.begin() + s * H, y.begin() + (s + 1) * H);
  }
  for (std::size_t s = 0; s < prefilled.size(); ++s) {
    EXPECT_EQ(sequences[s].position, prefilled[s] + steps);
    DecoderLayer alone(c, w, options);
    std::vector<float> want;
    if (prefilled[s] > 0) want = alone.prefill(tokens[s].data(), prefilled[s]);
    for (std::size_t step = 0; step < steps; ++step) {
      const std::vector<float> y = alone.decode(tokens[s].data() + (prefilled[s] + step) * H);
      want.insert(want.end(), y.begin(), y.end());
    }
    ASSERT_EQ(batched_out[s].size(), want.size());
    EXPECT_LE(max_relative_difference(batched_out[s].data(), want.data(), want.size()), tolerance)
        << "sequence " << s;
    if (bc.kv == KvTypes(KvDtype::f32) && bc.compute == ComputeMode::exact) {
      const std::size_t n = prefilled[s] + steps;
      EXPECT_LT(test::relative_error(batched_out[s], test::reference_layer(shape, w, tokens[s], n)),
                1e-4)
          << "sequence " << s;
    }
  }
}

// Scalar runs every row through the same reference loops whatever the batch: bit-equal.
// SIMD projections of B rows run as one matmul, whose sums may be ordered differently from
// a GEMV's: a few float32 roundings of O(1) values (1e-5); int8 attention adds nothing, its
// rows are quantized per token whatever the batch. Paged batches (sequences sharing one pool,
// pages of 3-16 tokens, a ring across pages) against contiguous runs alone: the scalar
// reference reads row by row, bit-equal; SIMD blocks end at pages, a rescale more (1e-5).
// int8 fast prefills on VNNI where the CPU has it, whose u8 weights are scaled per key block:
// pages of 4 end a block every 4 keys, so they round differently, within a step of 2/254 of
// max|v| per attention output (dot_unit_attention_test): measured 5e-4 of the layer output.
INSTANTIATE_TEST_SUITE_P(
    Batches, DecoderBatchTest,
    ::testing::Values(
        BatchCase{Isa::scalar, KvDtype::f32, ComputeMode::exact, 0, 0.0},
        BatchCase{Isa::scalar, KvDtype::f32, ComputeMode::exact, 4, 0.0},
        BatchCase{Isa::avx2, KvDtype::f32, ComputeMode::exact, 0, 1e-5},
        BatchCase{Isa::avx512, KvDtype::f32, ComputeMode::exact, 0, 1e-5},
        BatchCase{Isa::avx512, KvDtype::int8, ComputeMode::fast, 0, 1e-5},
        BatchCase{Isa::avx512, KvTypes{KvDtype::int8, KvDtype::f16}, ComputeMode::exact, 7, 1e-5},
        BatchCase{Isa::scalar, KvDtype::f32, ComputeMode::exact, 0, 0.0, {4}},
        BatchCase{Isa::scalar, KvDtype::f32, ComputeMode::exact, 4, 0.0, {3}},
        BatchCase{Isa::avx512, KvDtype::int8, ComputeMode::fast, 0, 2e-3, {4}},
        BatchCase{
            Isa::avx2, KvTypes{KvDtype::int8, KvDtype::f16}, ComputeMode::exact, 7, 1e-5, {16}},
        BatchCase{Isa::avx512, KvDtype::f32, ComputeMode::fast, 0, 0.0, {}, WeightDtype::bf16}));

class DecoderBatchErrors : public ::testing::Test {
 protected:
  LayerConfig c{batch_shape(4, 0)};
  LayerWeights w = LayerWeights::random(c, 5);
  DecoderLayer layer{c, w, {.threads = 1}};
  LayerSequence a = layer.new_sequence(), b = layer.new_sequence();
  std::vector<float> x = std::vector<float>(2 * c.hidden_size(), 0.5f);

  void expect_unchanged(std::size_t pa, std::size_t pb) {
    EXPECT_EQ(a.position, pa);
    EXPECT_EQ(a.cache.size(), pa);
    EXPECT_EQ(b.position, pb);
    EXPECT_EQ(b.cache.size(), pb);
  }
};

TEST_F(DecoderBatchErrors, EmptyBatchIsRefused) {
  EXPECT_THROW(layer.decode_batch(x.data(), {}), std::invalid_argument);
}

TEST_F(DecoderBatchErrors, TheSameSequenceTwiceIsRefused) {
  try {
    layer.decode_batch(x.data(), {&a, &a});
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sequences 0 and 1"), std::string::npos) << e.what();
  }
  expect_unchanged(0, 0);
}

TEST_F(DecoderBatchErrors, AFullSequenceRefusesTheWholeStep) {
  std::vector<float> three(3 * c.hidden_size(), 0.25f);
  layer.prefill(b, three.data(), 3);
  layer.decode_batch(x.data(), {&a, &b});  // b reaches its capacity of 4
  try {
    layer.decode_batch(x.data(), {&a, &b});
    FAIL() << "no throw";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 1 of the batch"), std::string::npos) << e.what();
  }
  expect_unchanged(1, 4);
}

TEST_F(DecoderBatchErrors, NanInOneRowLeavesEveryCacheAsItWas) {
  x[c.hidden_size() + 3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(layer.decode_batch(x.data(), {&a, &b}), std::invalid_argument);
  expect_unchanged(0, 0);
}

TEST_F(DecoderBatchErrors, ASequenceOfAnotherShapeIsRefused) {
  LayerShape other = batch_shape(4, 0);
  other.n_kv_heads = 4;
  const LayerConfig oc(other);
  DecoderLayer other_layer(oc, LayerWeights::random(oc, 5), {.threads = 1});
  LayerSequence foreign = other_layer.new_sequence();
  EXPECT_THROW(layer.decode_batch(x.data(), {&a, &foreign}), std::invalid_argument);
  DecoderLayer int8_layer(c, w, {.kv_dtype = KvDtype::int8, .threads = 1});
  LayerSequence int8_sequence = int8_layer.new_sequence();
  EXPECT_THROW(layer.decode_batch(x.data(), {&int8_sequence, &a}), std::invalid_argument);
  expect_unchanged(0, 0);
}

}  // namespace
}  // namespace kvscope
