// DeepSeek-V2's dense layers (multi-head latent attention) written in their Hugging Face
// format (config.json as DeepSeek-V2-Lite's, the MLA tensors), read back through parse and
// loader, and run against the independent float64 layer of tests/support/reference_mla.hpp:
// q_lora_rank null (q_proj) and set (q_a_proj, q_a_layernorm, q_b_proj); F32 and BF16
// weights; one prefill (the plain form) and prefill/decode splits (decode takes the absorbed
// form); scalar and the best ISA; 1 and 2 threads.
#include <gtest/gtest.h>

#include <string>

#include "engine/decoder_layer.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/model_loader.hpp"
#include "support/model_files.hpp"
#include "support/reference_layer.hpp"
#include "support/reference_mla.hpp"
#include "support/run_split.hpp"

namespace kvscope {
namespace {

// Tiny but every size distinct: hidden 64, 4 heads, latent 32, rope 8, nope 16, v 12.
LayerShape mla_shape(std::int64_t q_lora_rank) {
  LayerShape s{.hidden_size = 64,
               .n_heads = 4,
               .n_kv_heads = 4,
               .head_dim = 8,
               .ffn_size = 96,
               .rms_norm_eps = 1e-5,  // ≠ the latent norms' 1e-6
               .rope_theta = 10000.0,
               .capacity = 11};
  s.mla = {.kv_lora_rank = 32,
           .q_lora_rank = q_lora_rank,
           .qk_nope_head_dim = 16,
           .qk_rope_head_dim = 8,
           .v_head_dim = 12};
  return s;
}

struct Case {
  std::int64_t q_lora_rank;
  const char* dtype;
};

class MlaFamily : public ::testing::TestWithParam<Case> {};

TEST_P(MlaFamily, MatchesFloat64ReferenceForEverySplit) {
  const Case& c = GetParam();
  test::TempDir dir;
  const LayerShape shape = mla_shape(c.q_lora_rank);
  const LayerWeights written =
      test::write_model(dir.path(), shape, c.dtype, false, 7, "deepseek_v2");

  HfModelConfig hf = load_hf_config(dir / "config.json");
  EXPECT_EQ(hf.model_type, "deepseek_v2");
  EXPECT_EQ(hf.first_moe_layer, 2);
  const std::size_t n = 11;
  hf.shape.capacity = n;
  const LayerConfig config(hf.shape);
  ASSERT_TRUE(config.is_mla());
  EXPECT_EQ(config.q_lora_rank(), static_cast<std::size_t>(c.q_lora_rank));
  const LayerWeights loaded = load_layer_weights(dir.path(), 1, config);
  const std::vector<float> x = test::test_input(n, 64, 3);
  const std::vector<double> want = test::reference_mla_layer(shape, written, x, n);

  for (Isa isa : {Isa::scalar, best_isa()}) {
    for (int threads : {1, 2}) {
      for (std::size_t prefill : {n, std::size_t{0}, std::size_t{1}, std::size_t{6}}) {
        DecoderLayer layer(config, loaded, {.isa = isa, .threads = threads});
        const std::vector<float> got = test::run_split(layer, x, n, prefill);
        EXPECT_LT(test::relative_error(got, want), 1e-4)
            << to_string(isa) << " threads " << threads << " prefill " << prefill;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(DeepseekV2, MlaFamily,
                         ::testing::Values(Case{0, "F32"}, Case{0, "BF16"}, Case{24, "F32"},
                                           Case{24, "BF16"}),
                         [](const auto& info) {
                           return std::string(info.param.q_lora_rank == 0 ? "q_proj" : "q_lora") +
                                  "_" + info.param.dtype;
                         });

// The data make the softmax scale over nope + rope visible: a float64 layer scaled by
// 1/√nope instead differs by more than the 1e-4 the tests allow, so the tests could fail.
TEST(MlaReference, ScaleMattersOnThisData) {
  const LayerShape shape = mla_shape(0);
  const LayerWeights w = test::test_weights(shape, 7, "F32");
  const std::size_t n = 11;
  const std::vector<float> x = test::test_input(n, 64, 3);
  const std::vector<double> want = test::reference_mla_layer(shape, w, x, n);
  // Scale 1/√nope instead of 1/√(nope + rope): the same as scaling q_nope and q_pe up.
  LayerWeights scaled = w;
  std::vector<float> q = w.wq.to_f32();
  for (float& v : q) v *= std::sqrt(24.0f / 16.0f);
  scaled.wq = WeightMatrix(q, w.wq.rows(), w.wq.cols());
  const std::vector<double> other = test::reference_mla_layer(shape, scaled, x, n);
  EXPECT_GT(test::relative_error(std::vector<float>(other.begin(), other.end()), want), 1e-3);
}

// The latent norms use ε = 1e-6 whatever rms_norm_eps says (transformers' DeepseekV2RMSNorm
// default). With a latent whose mean square is near ε (kv_a_proj scaled down) the two
// choices differ by far more than the tolerance, so this test sees which one runs.
TEST(MlaFamilyEps, LatentNormsUseTransformersDefaultEpsilon) {
  LayerShape shape = mla_shape(24);
  shape.rms_norm_eps = 1e-3;
  LayerWeights w = test::test_weights(shape, 7, "F32");
  for (WeightMatrix* m : {&w.wkv_a, &w.wq_a}) {
    std::vector<float> v = m->to_f32();
    for (float& e : v) e *= 1e-3f;
    *m = WeightMatrix(v, m->rows(), m->cols());
  }
  const std::size_t n = 6;
  shape.capacity = n;
  const std::vector<float> x = test::test_input(n, 64, 3);
  const std::vector<double> want = test::reference_mla_layer(shape, w, x, n);
  DecoderLayer layer(LayerConfig(shape), w, {.isa = best_isa(), .threads = 1});
  EXPECT_LT(test::relative_error(test::run_split(layer, x, n, 3), want), 1e-4);
}

}  // namespace
}  // namespace kvscope
