// Report arithmetic against hand-computed values, and a tiny real report's bookkeeping.
#include "engine/measure/report.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "engine/layer_config.hpp"
#include "engine/measure/cold_caches.hpp"

namespace kvscope {
namespace {

TEST(ReportArithmetic, DecodeFlopsAreFourTimesHeadsDimTokens) {
  // 32 heads × 128 × 2000 keys: QKᵀ 2·128 and AV 2·128 FLOPs per key per head.
  EXPECT_EQ(decode_attention_flops(32, 128, 2000), 32'768'000u);
  EXPECT_THROW(decode_attention_flops(std::int64_t{1} << 40, std::int64_t{1} << 20, 1 << 10),
               std::overflow_error);
}

TEST(ReportArithmetic, SpeedOfLightIsTheSlowerOfBytesAndFlops) {
  // 65,536,000 bytes at 40 GB/s = 1.6384 ms; 32,768,000 FLOPs at 100 GFLOP/s = 0.32768 ms.
  EXPECT_DOUBLE_EQ(speed_of_light_seconds(65'536'000, 32'768'000, 40, 100), 1.6384e-3);
  // Compute-bound when the FLOPs take longer: 1e9 FLOPs at 100 GFLOP/s = 10 ms.
  EXPECT_DOUBLE_EQ(speed_of_light_seconds(1000, 1'000'000'000, 40, 100), 1e-2);
}

TEST(ReportArithmetic, PeakBytesCountCacheReadBufferAndWeights) {
  ReportRequest r{.n_heads = 4,
                  .head_dim = 16,
                  .tokens = {100},
                  .kv_heads = {4},
                  .kv_dtypes = {KvDtype::f32},
                  .hidden_size = 64,
                  .ffn_size = 128,
                  .steps = 3,
                  .cache_state = CacheState::warm};
  const LayerConfig c({.hidden_size = 64,
                       .n_heads = 4,
                       .n_kv_heads = 4,
                       .head_dim = 16,
                       .ffn_size = 128,
                       .capacity = 100 + 3 + 2});
  // The prefill of 100 tokens holds the weights, its cache and 100 rows of activations:
  // x, h, attention out, y, out (4 × 64 wide, counted as 4), q and heads (2 × 64), k and v
  // (2 × 64), gate and up (2 × 128), in f32 — more than the attention phase's two caches.
  const std::uint64_t activations = 100 * (4 * 64 + 2 * 64 + 2 * 64 + 2 * 128) * 4;
  EXPECT_EQ(report_peak_bytes(r),
            c.weight_bytes(WeightDtype::bf16) + c.kv_cache_bytes(KvDtype::f32) + activations);
  r.measure_prefill = false;
  EXPECT_EQ(report_peak_bytes(r),
            2 * c.kv_cache_bytes(KvDtype::f32) + c.weight_bytes(WeightDtype::bf16));
  r.weights_dtype = WeightDtype::f32;
  EXPECT_EQ(report_peak_bytes(r), 2 * c.kv_cache_bytes(KvDtype::f32) + c.weight_bytes());
  // Batch sizes step in turn: the weights beside every size's caches at once (1 + 3 + 8).
  r.batches = {1, 3, 8};
  EXPECT_EQ(report_peak_bytes(r), 12 * c.kv_cache_bytes(KvDtype::f32) + c.weight_bytes());
  r.batches = {8, 3};  // batch 1 is always timed
  EXPECT_EQ(report_peak_bytes(r), 12 * c.kv_cache_bytes(KvDtype::f32) + c.weight_bytes());
  r.batches = {1};
  // A compared weights type: its layer's weights and one more cache beside the main layer's.
  r.compared_weights_dtypes = {WeightDtype::bf16};
  EXPECT_EQ(report_peak_bytes(r), 2 * c.kv_cache_bytes(KvDtype::f32) + c.weight_bytes() +
                                      c.weight_bytes(WeightDtype::bf16));
  r.compared_weights_dtypes = {};
  r.measure_layer = false;
  EXPECT_EQ(report_peak_bytes(r), 2 * c.kv_cache_bytes(KvDtype::f32));
}

TEST(ReportArithmetic, ComparedWeightsTypesAreRefusedWhenRepeatedOrWithoutTheLayer) {
  ReportRequest r{.tokens = {16}, .weights_dtype = WeightDtype::bf16};
  for (const std::vector<WeightDtype>& bad :
       {std::vector{WeightDtype::bf16}, std::vector{WeightDtype::f32, WeightDtype::f32}}) {
    r.compared_weights_dtypes = bad;
    try {
      (void)report_peak_bytes(r);
      ADD_FAILURE() << "accepted a weights type listed twice";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("listed twice"), std::string::npos) << e.what();
    }
  }
  r.compared_weights_dtypes = {WeightDtype::f32};
  r.measure_layer = false;
  EXPECT_THROW((void)report_peak_bytes(r), std::invalid_argument);
}

// A compared weights type adds a row of its own layer, timed step by step beside the main
// weights' layer: the same decode figures, its own weight bytes and step, the pairs' ratio.
TEST(Report, ComparedWeightsTypesGetALayerRowWithThePairsRatio) {
  const ReportRequest r{.n_heads = 4,
                        .head_dim = 16,
                        .tokens = {32},
                        .kv_heads = {2},
                        .kv_dtypes = {KvDtype::f32},
                        .hidden_size = 64,
                        .ffn_size = 96,
                        .batches = {1, 2},
                        .weights_dtype = WeightDtype::bf16,
                        .compared_weights_dtypes = {WeightDtype::f32},
                        .steps = 8,
                        .repetitions = 1,
                        .cache_state = CacheState::warm};
  const std::vector<ReportRow> rows = run_report(r);
  ASSERT_EQ(rows.size(), 3u);  // batch 1 (bf16), batch 2 (bf16), batch 1 with f32 weights
  const ReportRow &main = rows[0], &batch = rows[1], &f32 = rows[2];
  EXPECT_EQ(main.weights_dtype, WeightDtype::bf16);
  EXPECT_EQ(batch.batch, 2);
  EXPECT_EQ(batch.weights_dtype, WeightDtype::bf16);
  EXPECT_EQ(batch.layer_over_main_weights.pairs, 0u);
  EXPECT_EQ(main.layer_over_main_weights.pairs, 0u);
  EXPECT_EQ(f32.batch, 1);
  EXPECT_EQ(f32.weights_dtype, WeightDtype::f32);
  const LayerConfig c({.hidden_size = 64,
                       .n_heads = 4,
                       .n_kv_heads = 2,
                       .head_dim = 16,
                       .ffn_size = 96,
                       .capacity = 64});
  EXPECT_EQ(main.layer_weight_bytes, c.weight_bytes(WeightDtype::bf16));
  EXPECT_EQ(f32.layer_weight_bytes, c.weight_bytes(WeightDtype::f32));
  EXPECT_EQ(f32.layer_bytes_per_step - f32.layer_weight_bytes,
            main.layer_bytes_per_step - main.layer_weight_bytes);  // one cache each
  EXPECT_GT(f32.layer_tokens_per_s, 0.0);
  EXPECT_EQ(f32.layer_over_main_weights.pairs, 4u);  // max(3, 8 / 2) steps of each
  EXPECT_GT(f32.layer_over_main_weights.median, 0.0);
  EXPECT_LE(f32.layer_over_main_weights.low, f32.layer_over_main_weights.median);
  EXPECT_GE(f32.layer_over_main_weights.high, f32.layer_over_main_weights.median);
  // Its decode figures are the row's; its prefill was not measured.
  EXPECT_EQ(f32.attn_seconds_median, main.attn_seconds_median);
  EXPECT_GT(main.prefill_seconds, 0.0);
  EXPECT_EQ(f32.prefill_seconds, 0.0);
  EXPECT_EQ(
      f32.kv_overtakes_weights_tokens,
      static_cast<std::int64_t>((f32.layer_weight_bytes + 2 * 2 * 16 * 4 - 1) / (2 * 2 * 16 * 4)));
}

TEST(Report, WarmReadsOnlyTheLayersCaches) {
  const std::vector<ReportRow> rows = run_report({.n_heads = 4,
                                                  .head_dim = 16,
                                                  .tokens = {32},
                                                  .kv_heads = {4},
                                                  .kv_dtypes = {KvDtype::f32},
                                                  .layers = 2,
                                                  .measure_layer = false,
                                                  .steps = 2,
                                                  .cache_state = CacheState::warm,
                                                  .llc_bytes = 256 << 10});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cache_state, CacheState::warm);
  EXPECT_EQ(rows[0].cold_method, "none");
  EXPECT_EQ(rows[0].caches_allocated, 2u);
}

TEST(ReportArithmetic, ColdPeakBytesCountTheCopies) {
  ReportRequest r{.n_heads = 4,
                  .head_dim = 16,
                  .tokens = {100},
                  .kv_heads = {4},
                  .kv_dtypes = {KvDtype::f32},
                  .measure_layer = false,
                  .steps = 3,
                  .llc_bytes = 1 << 20};
  const LayerConfig c({.hidden_size = 64,
                       .n_heads = 4,
                       .n_kv_heads = 4,
                       .head_dim = 16,
                       .ffn_size = 128,
                       .capacity = 100 + 3 + 2});
  const std::uint64_t cache = c.kv_cache_bytes(KvDtype::f32);
  // The copies that stream 4 × the LLC, and as many read-loop buffers beside them.
  EXPECT_EQ(report_peak_bytes(r), 2 * ((4u << 20) / cache + 2) * cache);  // 1 thread
  r.threads = 2;
  const std::uint64_t llcs = static_cast<std::uint64_t>(last_level_caches_reached(2));
  EXPECT_EQ(report_peak_bytes(r), 2 * ((4 * llcs << 20) / cache + 2) * cache);
  r.threads = 1;
  // A paged row's copies beside the contiguous row's (their steps go in turn).
  r.kv_layouts = {KvLayout{}, parse_kv_layout("paged:16")};
  EXPECT_EQ(report_peak_bytes(r), 3 * ((4u << 20) / cache + 2) * cache);
  r.kv_layouts = {KvLayout{}};
  r.cache_state = CacheState::warm;
  EXPECT_EQ(report_peak_bytes(r), 2 * cache);
}

TEST(ReportArithmetic, ImpossibleShapesAreRefusedBeforeAllocating) {
  ReportRequest r{.tokens = {std::int64_t{1} << 33}, .measure_layer = false};
  try {
    run_report(r);
    FAIL() << "accepted a report larger than memory";
  } catch (const std::length_error& e) {
    EXPECT_NE(std::string(e.what()).find("this report needs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_report({.n_heads = 32, .kv_heads = {5}}), std::invalid_argument);
  EXPECT_THROW(run_report({.tokens = {0}}), std::invalid_argument);
  EXPECT_THROW(run_report({.tokens = {}}), std::invalid_argument);
  EXPECT_THROW(run_report({.tokens = {16}, .steps = 0}), std::invalid_argument);
}

// Each pair gives read ÷ step and max(read, compute) ÷ step; the medians of those.
TEST(PairedFractions, ReadStepOrComputeAgainstEachStep) {
  const PairedFractions f = paired_fractions({1.0, 2.0, 4.0}, {0.5, 1.0, 3.0}, 1.5);
  EXPECT_EQ(f.bandwidth.pairs, 3u);
  EXPECT_DOUBLE_EQ(f.bandwidth.median, 0.5);  // 0.5, 0.5, 0.75
  EXPECT_DOUBLE_EQ(f.bandwidth.high, 0.75);
  EXPECT_DOUBLE_EQ(f.speed_of_light.median, 0.75);  // 1.5, 0.75, 0.75: compute bounds the first
  EXPECT_DOUBLE_EQ(f.speed_of_light.high, 1.5);
  // Memory 4× faster for the last two pairs: each pair still says 0.9, and so do the median
  // and the middle half (a read loop timed apart, at either speed, would say 3.6 or 0.225).
  const PairedFractions drift = paired_fractions({4.0, 4.0, 1.0, 1.0}, {3.6, 3.6, 0.9, 0.9}, 0.1);
  EXPECT_DOUBLE_EQ(drift.bandwidth.low, 0.9);
  EXPECT_DOUBLE_EQ(drift.bandwidth.median, 0.9);
  EXPECT_DOUBLE_EQ(drift.bandwidth.high, 0.9);
  EXPECT_THROW(paired_fractions({1.0, 2.0}, {1.0}, 0.0), std::invalid_argument);
  EXPECT_THROW(paired_fractions({}, {}, 0.0), std::invalid_argument);
}

TEST(Report, RowsCarryConsistentBytesFlopsAndRatios) {
  const ReportRequest r{.n_heads = 4,
                        .head_dim = 16,
                        .tokens = {64, 128},
                        .kv_heads = {4, 1},
                        .kv_dtypes = {KvDtype::f32, KvDtype::int8},
                        .layers = 3,
                        .hidden_size = 64,
                        .ffn_size = 96,
                        .steps = 2,
                        .llc_bytes = 256 << 10};
  const std::vector<ReportRow> rows = run_report(r);
  ASSERT_EQ(rows.size(), 8u);
  for (const ReportRow& row : rows) {
    const std::uint64_t per_token = row.kv_dtype == KvDtype::f32 ? 2u * row.n_kv_heads * 16 * 4
                                                                 : 2u * row.n_kv_heads * (16 + 4);
    EXPECT_EQ(row.bytes_read_per_step, per_token * row.tokens);
    EXPECT_EQ(row.cache_bytes, per_token * row.tokens);
    EXPECT_EQ(row.cache_bytes_all_layers, 3 * row.cache_bytes);
    EXPECT_EQ(row.flops_per_step, 4u * 4 * 16 * row.tokens);
    // The fractions are pair by pair, every step beside a read-loop step (3 passes of 1).
    EXPECT_EQ(row.speed_of_light_pairs.pairs, 3u);
    EXPECT_DOUBLE_EQ(row.fraction_of_speed_of_light, row.speed_of_light_pairs.median);
    EXPECT_GT(row.fraction_of_bandwidth, 0.0);
    EXPECT_GE(row.fraction_of_speed_of_light, row.fraction_of_bandwidth);
    EXPECT_DOUBLE_EQ(row.speed_of_light_seconds,
                     speed_of_light_seconds(row.bytes_read_per_step, row.flops_per_step,
                                            row.read_bandwidth_gbps, row.fma_peak_gflops));
    EXPECT_GT(row.layer_tokens_per_s, 0.0);
    // The step's shares add up; the prefill of `tokens` ran and attention took part of it.
    EXPECT_NEAR(row.layer_weights_share + row.layer_attention_share + row.layer_other_share, 1.0,
                1e-12);
    EXPECT_EQ(row.weights_dtype, WeightDtype::bf16);
    EXPECT_NEAR(row.prefill_tokens_per_s * row.prefill_seconds, static_cast<double>(row.tokens),
                1e-6 * row.tokens);
    EXPECT_GT(row.prefill_attention_share, 0.0);
    EXPECT_LT(row.prefill_attention_share, 1.0);
    EXPECT_TRUE(row.bound == "memory" || row.bound == "compute");
    // Cold by default: a step reads all 3 layers' caches, cycled among enough copies.
    EXPECT_EQ(row.cache_state, CacheState::cold);
    EXPECT_EQ(row.cold_method, "copies");
    EXPECT_EQ(row.llc_bytes, 256u << 10);
    EXPECT_GE(row.caches_allocated, 3u);
    EXPECT_GT((row.caches_allocated - 1) * row.cache_bytes, 2 * row.llc_bytes);
    EXPECT_EQ(row.bytes_read_per_model_step, 3 * row.bytes_read_per_step);
    EXPECT_DOUBLE_EQ(row.attn_seconds_median, row.model_attn_seconds_median / 3);
  }
  EXPECT_EQ(rows[0].variant, "MHA");
  EXPECT_EQ(rows[2].variant, "MQA");
  EXPECT_EQ(rows[4].tokens, 128);
}

TEST(Report, WindowRowsReadTheLastWTokensBesideUnchangedFullRows) {
  ReportRequest r{.n_heads = 4,
                  .head_dim = 16,
                  .tokens = {16, 48},
                  .kv_heads = {4, 2},
                  .kv_dtypes = {KvDtype::f32},
                  .hidden_size = 64,
                  .ffn_size = 96,
                  .batches = {1, 2},
                  .steps = 2,
                  .cache_state = CacheState::warm,
                  .windows = {32, 48},
                  .window_kv_heads = 2};
  const std::vector<ReportRow> rows = run_report(r);
  // 16: MHA, GQA-2; 48: MHA, GQA-2, GQA-2 SWA-32 (48 is not below 48); then batch 2 of each.
  ASSERT_EQ(rows.size(), 10u);
  const ReportRow& swa = rows[4];
  EXPECT_EQ(swa.variant, "GQA-2 SWA-32");
  EXPECT_EQ(swa.tokens, 48);
  EXPECT_EQ(swa.window, 32);
  const std::uint64_t per_token = 2u * 2 * 16 * 4;  // K and V, 2 kv heads × 16, f32
  EXPECT_EQ(swa.cache_bytes, per_token * 32);
  EXPECT_EQ(swa.bytes_read_per_step, per_token * 32);
  EXPECT_EQ(swa.flops_per_step, 4u * 4 * 16 * 32);
  EXPECT_DOUBLE_EQ(swa.speed_of_light_seconds,
                   speed_of_light_seconds(per_token * 32, 4u * 4 * 16 * 32, swa.read_bandwidth_gbps,
                                          swa.compute_peak_gops));
  // The full layer decodes at position 48 over its ring of 32 rows and prefills all 48.
  EXPECT_EQ(swa.layer_bytes_per_step, swa.layer_weight_bytes + per_token * 32);
  EXPECT_NEAR(swa.prefill_tokens_per_s * swa.prefill_seconds, 48.0, 1e-6 * 48);
  // 256 bytes per token reach the weights only past W: the ring never overtakes them.
  EXPECT_EQ(swa.kv_overtakes_weights_tokens, 0);
  EXPECT_EQ(rows[9].variant, "GQA-2 SWA-32");
  EXPECT_EQ(rows[9].batch, 2);
  EXPECT_EQ(rows[9].layer_bytes_per_step, swa.layer_weight_bytes + 2 * per_token * 32);

  r.windows.clear();
  const std::vector<ReportRow> full = run_report(r);
  ASSERT_EQ(full.size(), 8u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i].variant, full[i].variant);
    EXPECT_EQ(rows[i].tokens, full[i].tokens);
    EXPECT_EQ(rows[i].window, 0);
    EXPECT_EQ(rows[i].bytes_read_per_step, full[i].bytes_read_per_step);
    EXPECT_EQ(rows[i].kv_overtakes_weights_tokens, full[i].kv_overtakes_weights_tokens);
  }
  EXPECT_EQ(rows[3].bytes_read_per_step, per_token * 48);
}

TEST(ReportArithmetic, BadWindowsAreRefused) {
  EXPECT_THROW(report_peak_bytes({.tokens = {16}, .windows = {0}}), std::invalid_argument);
  EXPECT_THROW(report_peak_bytes({.tokens = {16}, .windows = {-4}}), std::invalid_argument);
  ReportRequest mla{.n_heads = 4, .tokens = {16}, .kv_dtypes = {KvDtype::f32}, .windows = {8}};
  mla.mla = {.kv_lora_rank = 32, .qk_nope_head_dim = 16, .qk_rope_head_dim = 8, .v_head_dim = 16};
  EXPECT_THROW(report_peak_bytes(mla), std::invalid_argument);
}

}  // namespace
}  // namespace kvscope
