#include "engine/kv_footprint.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace kvscope {
namespace {

TEST(KvFootprint, LessonShapeIs65536000Bytes) {
  // 32 heads × d_head 128 × 2000 tokens × 4 bytes, for K and for V.
  const KvFootprint f = kv_footprint({.n_kv_heads = 32, .head_dim = 128, .tokens = 2000});
  EXPECT_EQ(f.k_bytes, 32'768'000u);
  EXPECT_EQ(f.v_bytes, 32'768'000u);
  EXPECT_EQ(f.scale_bytes, 0u);
  EXPECT_EQ(f.total_bytes, 65'536'000u);
  EXPECT_EQ(f.bytes_per_token, 32'768u);
  EXPECT_EQ(f.bytes_per_layer, 65'536'000u);
}

TEST(KvFootprint, ElementSizesPerDtype) {
  for (auto [dtype, bytes] : {std::pair{KvDtype::f32, 4u}, std::pair{KvDtype::f16, 2u},
                              std::pair{KvDtype::bf16, 2u}, std::pair{KvDtype::int8, 1u}}) {
    const KvFootprint f =
        kv_footprint({.n_kv_heads = 8, .head_dim = 128, .tokens = 10, .dtype = dtype});
    EXPECT_EQ(f.k_bytes, 8u * 128 * 10 * bytes) << to_string(dtype);
  }
}

TEST(KvFootprint, Int8CountsOneScalePerTokenPerKvHeadForKAndV) {
  const KvFootprint f = kv_footprint({.n_kv_heads = 8,
                                      .head_dim = 128,
                                      .tokens = 2000,
                                      .layers = 2,
                                      .batch = 3,
                                      .dtype = KvDtype::int8});
  EXPECT_EQ(f.scale_bytes_per_token_layer, 2u * 8 * 4);
  EXPECT_EQ(f.scale_bytes, 2u * 8 * 4 * 2000 * 2 * 3);
  EXPECT_EQ(f.k_bytes, 8u * 128 * 2000 * 2 * 3);
  EXPECT_EQ(f.total_bytes, f.k_bytes + f.v_bytes + f.scale_bytes);
  EXPECT_EQ(f.bytes_per_token, (2u * 8 * 128 + 2u * 8 * 4) * 2);
  EXPECT_EQ(f.bytes_per_layer, (2u * 8 * 128 + 2u * 8 * 4) * 2000 * 3);
}

// int4: 16 bytes of nibbles and one f16 scale per group of 32 elements of a row.
TEST(KvFootprint, Int4CountsNibblesAsDataAndGroupScalesAsScales) {
  const KvFootprint f =
      kv_footprint({.n_kv_heads = 32, .head_dim = 128, .tokens = 2000, .dtype = KvDtype::int4});
  EXPECT_EQ(f.k_bytes + f.v_bytes, 8'192'000u);
  EXPECT_EQ(f.scale_bytes, 1'024'000u);
  EXPECT_EQ(f.total_bytes, 9'216'000u);
  // A head_dim that is not a multiple of 32 ends with a shorter group: 136 = 4 × 32 + 8 takes
  // 5 groups (the last one's nibbles padded to 16 bytes, zeros past head_dim).
  const KvFootprint odd =
      kv_footprint({.n_kv_heads = 1, .head_dim = 136, .tokens = 1, .dtype = KvDtype::int4});
  EXPECT_EQ(odd.k_bytes, 5u * 16);
  EXPECT_EQ(odd.scale_bytes, 2u * 5 * 2);
}

TEST(KvFootprint, KeysAndValuesOfDifferentTypesCountEachTheirOwn) {
  const KvFootprint f = kv_footprint({.n_kv_heads = 8,
                                      .head_dim = 128,
                                      .tokens = 10,
                                      .dtype = KvTypes(KvDtype::int8, KvDtype::f16)});
  EXPECT_EQ(f.k_bytes, 8u * 128 * 10);
  EXPECT_EQ(f.v_bytes, 8u * 128 * 10 * 2);
  EXPECT_EQ(f.scale_bytes, 8u * 10 * 4);  // K's int8 scales only
  EXPECT_EQ(f.total_bytes, f.k_bytes + f.v_bytes + f.scale_bytes);
}

TEST(KvFootprint, LayersAndBatchMultiply) {
  const KvFootprint one = kv_footprint({.n_kv_heads = 4, .head_dim = 64, .tokens = 100});
  const KvFootprint many =
      kv_footprint({.n_kv_heads = 4, .head_dim = 64, .tokens = 100, .layers = 22, .batch = 5});
  EXPECT_EQ(many.total_bytes, one.total_bytes * 22 * 5);
}

TEST(KvFootprint, RejectsZeroSizesAndOverflow) {
  EXPECT_THROW(kv_footprint({.n_kv_heads = 0}), std::invalid_argument);
  EXPECT_THROW(kv_footprint({.tokens = -5}), std::invalid_argument);
  EXPECT_THROW(kv_footprint({.batch = 0}), std::invalid_argument);
  EXPECT_THROW(kv_footprint({.tokens = std::int64_t{1} << 50, .layers = 1 << 20}),
               std::overflow_error);
}

TEST(KvFootprint, VariantNames) {
  EXPECT_EQ(attention_variant(32, 32), "MHA");
  EXPECT_EQ(attention_variant(32, 8), "GQA-8");
  EXPECT_EQ(attention_variant(32, 1), "MQA");
}

}  // namespace
}  // namespace kvscope
