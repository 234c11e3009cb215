// The report's JSON, CSV and SVG from fixed rows (no measurement involved).
#include "tools/report_output.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "tools/svg_plot.hpp"

namespace kvscope::cli {
namespace {

std::vector<ReportRow> fixed_rows() {
  std::vector<ReportRow> rows;
  for (std::int64_t tokens : {512, 2000, 8192}) {
    for (std::int64_t kv : {32, 1}) {
      for (KvDtype dtype : {KvDtype::f32, KvDtype::int8}) {
        ReportRow r;
        r.variant = kv == 32 ? "MHA" : "MQA";
        r.n_heads = 32;
        r.n_kv_heads = kv;
        r.head_dim = 128;
        r.tokens = tokens;
        r.kv_dtype = dtype;
        r.isa = Isa::avx512;
        r.threads = 2;
        r.bytes_read_per_step = static_cast<std::uint64_t>(tokens * kv * 1024);
        r.cache_bytes = r.bytes_read_per_step;
        r.flops_per_step = 4u * 32 * 128 * tokens;
        r.attn_seconds_median = r.attn_seconds_min = r.attn_seconds_max = 1e-6 * tokens * kv;
        r.attn_tokens_per_s = 1 / r.attn_seconds_median;
        r.attn_gbps = 10;
        r.read_bandwidth_gbps = 20;
        r.fraction_of_bandwidth = 0.5;
        r.fma_peak_gflops = 100;
        r.speed_of_light_seconds = 1e-3;
        r.fraction_of_speed_of_light = 0.5;
        r.bound = "memory";
        r.layers = 4;
        r.cache_bytes_all_layers = 4 * r.cache_bytes;
        r.cache_state = CacheState::cold;
        r.cold_method = "copies";
        r.caches_allocated = 40;
        r.llc_bytes = 32u << 20;
        r.model_attn_seconds_median = 4 * r.attn_seconds_median;
        r.model_attn_tokens_per_s = 1 / r.model_attn_seconds_median;
        r.bytes_read_per_model_step = 4 * r.bytes_read_per_step;
        rows.push_back(r);
      }
    }
  }
  return rows;
}

TEST(ReportOutput, JsonRowsHaveTheDocumentedFields) {
  const nlohmann::json j = report_json(fixed_rows());
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 12u);
  for (const char* key :
       {"variant", "n_heads", "n_kv_heads", "head_dim", "tokens", "kv_dtype", "isa", "threads",
        "cache_bytes", "bytes_read_per_step", "attn_seconds_median", "attn_tokens_per_s",
        "attn_gbps", "read_bandwidth_gbps", "fraction_of_bandwidth", "layer_tokens_per_s"}) {
    EXPECT_TRUE(j[0].contains(key)) << key;
  }
  EXPECT_EQ(j[1]["kv_dtype"], "int8");
  EXPECT_EQ(j[0]["isa"], "avx512");
  EXPECT_EQ(j[2]["variant"], "MQA");
  for (const char* key :
       {"cache_state", "llc_bytes", "cold_method", "caches_allocated", "model_attn_seconds_median",
        "model_attn_tokens_per_s", "bytes_read_per_model_step", "weights_dtype",
        "layer_weight_bytes", "layer_weights_share", "prefill_seconds", "prefill_tokens_per_s",
        "prefill_attention_share", "layer_over_main_weights"}) {
    EXPECT_TRUE(j[0].contains(key)) << key;
  }
  EXPECT_EQ(j[0]["cache_state"], "cold");
  EXPECT_EQ(j[0]["llc_bytes"], 32u << 20);
  EXPECT_EQ(j[0]["caches_allocated"], 40);
}

// The weights table: the main row's ratio is 1, a compared row's the pairs' median and middle
// half; the sentence names both types, the ratio and the weight bytes' ratio.
TEST(ReportOutput, WeightsTableAndSentenceGiveThePairedRatio) {
  std::vector<ReportRow> rows(2, fixed_rows()[0]);
  for (ReportRow& r : rows) {
    r.layer_tokens_per_s = 100;
    r.layer_weights_share = 0.9;
    r.layer_bytes_per_step = 470'300'000;
  }
  rows[0].weights_dtype = WeightDtype::bf16;
  rows[0].layer_seconds_median = 9.5e-3;
  rows[0].layer_weight_bytes = 404'800'000;
  rows[1].weights_dtype = WeightDtype::f32;
  rows[1].layer_seconds_median = 17.1e-3;
  rows[1].layer_weight_bytes = 809'500'000;
  rows[1].layer_over_main_weights = {.median = 1.807, .low = 1.780, .high = 1.815, .pairs = 12};
  const std::string table = report_weights_table(rows);
  EXPECT_NE(table.find("1 (main)"), std::string::npos) << table;
  EXPECT_NE(table.find("1.807 (1.780-1.815)"), std::string::npos) << table;
  const std::string text = explain_weights(rows);
  EXPECT_NE(text.find("With f32 weights the layer step (MHA f32, 512 tokens) takes 1.81× the "
                      "time it takes with bf16 weights"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("median of 12 pairs"), std::string::npos) << text;
  EXPECT_NE(text.find("for 2.00× the weight bytes"), std::string::npos) << text;
  rows[1].layer_over_main_weights = {};  // not a compared row: no sentence
  EXPECT_EQ(explain_weights(rows), "");
}

// The batch table's weight rate: 354.5 MB read in 74% of a 12.72 ms step is 37.7 GB/s; a row
// without a timed layer reads none and is left out of the table.
TEST(ReportOutput, BatchTableGivesTheRateTheProjectionsReadTheWeightsAt) {
  std::vector<ReportRow> rows = fixed_rows();
  ReportRow& r = rows[0];
  r.batch = 8;
  r.layer_tokens_per_s = 628.9;
  r.layer_seconds_median = 12.72e-3;
  r.layer_weight_bytes = 354'500'000;
  r.layer_weights_share = 0.74;
  r.layer_attention_share = 0.25;
  r.layer_bytes_per_step = 485'500'000;
  EXPECT_NEAR(weights_read_gbps(r), 37.66, 0.01);
  EXPECT_EQ(weights_read_gbps(rows[1]), 0.0);
  const std::string table = report_batch_table(rows);
  EXPECT_NE(table.find("weight GB/s"), std::string::npos) << table;
  EXPECT_NE(table.find(" 37.7 "), std::string::npos) << table;
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2) << table;  // header and one row
}

// A batch whose projections read the weights under 0.9x batch 1's rate gets a sentence saying
// so; one at about batch 1's rate does not.
TEST(ReportOutput, BatchSentenceNamesAWeightRateBelowBatchOnes) {
  std::vector<ReportRow> rows = fixed_rows();
  rows.resize(1);
  ReportRow& one = rows[0];
  one.batch = 1;
  one.layer_tokens_per_s = 140;
  one.layer_seconds_median = 7.133e-3;
  one.layer_weight_bytes = 354'500'000;
  one.layer_weights_share = 0.94;  // 52.9 GB/s
  ReportRow eight = one;
  eight.batch = 8;
  eight.layer_seconds_median = 12.72e-3;
  eight.layer_weights_share = 0.74;  // 37.7 GB/s
  rows.push_back(eight);
  std::string text = explain_batches(rows);
  EXPECT_NE(text.find("read the weights at 37.7 GB/s against 52.9 at batch 1"), std::string::npos)
      << text;
  rows[1].layer_seconds_median = 7.6e-3;  // 50.4 GB/s: within 10% of batch 1
  rows[1].layer_weights_share = 0.925;
  text = explain_batches(rows);
  EXPECT_EQ(text.find("read the weights at"), std::string::npos) << text;
}

TEST(ReportOutput, CsvHasHeaderAndOneLinePerRow) {
  std::istringstream csv(report_csv(fixed_rows()));
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("variant,n_heads,n_kv_heads,head_dim,tokens,", 0), 0u) << header;
  for (const char* column :
       {"kv_dtype", "isa", "threads", "cache_bytes", "bytes_read_per_step", "attn_seconds_median",
        "attn_tokens_per_s", "attn_gbps", "read_bandwidth_gbps", "fraction_of_bandwidth",
        "layer_tokens_per_s"}) {
    EXPECT_NE(header.find(column), std::string::npos) << column;
  }
  const auto columns = std::count(header.begin(), header.end(), ',');
  int lines = 0;
  while (std::getline(csv, line)) {
    ++lines;
    EXPECT_EQ(std::count(line.begin(), line.end(), ','), columns) << line;
  }
  EXPECT_EQ(lines, 12);
}

// Tags open and close in order: a small well-formedness check without an XML library.
void expect_well_formed(const std::string& svg) {
  std::vector<std::string> open;
  for (std::size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const std::size_t end = svg.find('>', at);
    ASSERT_NE(end, std::string::npos) << "unclosed tag at " << at;
    const std::string tag = svg.substr(at + 1, end - at - 1);
    if (tag.empty() || tag[0] == '?' || tag[0] == '!') continue;  // declaration, comment
    const bool closing = tag[0] == '/', self_closing = tag.back() == '/';
    const std::size_t name_begin = closing ? 1 : 0;
    const std::string name =
        tag.substr(name_begin, tag.find_first_of(" /", name_begin) - name_begin);
    if (self_closing) continue;
    if (!closing) {
      open.push_back(name);
    } else {
      ASSERT_FALSE(open.empty()) << "</" << name << "> closes nothing";
      ASSERT_EQ(open.back(), name);
      open.pop_back();
    }
  }
  EXPECT_TRUE(open.empty()) << open.size() << " tags left open";
}

TEST(ReportOutput, SvgIsWellFormedWithOneSeriesPerVariantAndCacheType) {
  const std::string svg = report_svg(fixed_rows());
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  expect_well_formed(svg);
  for (const char* series : {"MHA f32", "MHA int8", "MQA f32", "MQA int8"}) {
    EXPECT_NE(svg.find("data-name=\"" + std::string(series) + "\""), std::string::npos) << series;
  }
  std::size_t polylines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1))
    ++polylines;
  EXPECT_EQ(polylines, 8u);  // each series and its thin speed-of-light line
  std::size_t limits = 0;
  for (std::size_t at = svg.find("<g class=\"limit\">"); at != std::string::npos;
       at = svg.find("<g class=\"limit\">", at + 1))
    ++limits;
  EXPECT_EQ(limits, 4u);
  EXPECT_NE(svg.find("thin: speed of light"), std::string::npos);
  EXPECT_NE(svg.find("context length"), std::string::npos);           // x label
  EXPECT_NE(svg.find("decode steps per second"), std::string::npos);  // y label
  EXPECT_NE(svg.find(">2k<"), std::string::npos);                     // a tick inside the range
}

TEST(SvgPlot, RejectsNothingToPlotAndNonPositivePoints) {
  EXPECT_THROW(render_line_chart_svg({}), std::invalid_argument);
  EXPECT_THROW(render_line_chart_svg({.series = {{.name = "a", .points = {{0, 1}}}}}),
               std::invalid_argument);
  const std::string svg = render_line_chart_svg(
      {.title = "a < b & c", .series = {{.name = "x\"y", .points = {{1, 1}}}}});
  EXPECT_NE(svg.find("a &lt; b &amp; c"), std::string::npos);
  EXPECT_NE(svg.find("x&quot;y"), std::string::npos);
  expect_well_formed(svg);
}

// The paragraphs explain the largest context measured (8,192 tokens), not the first.
TEST(ReportOutput, ExplanationNamesRecomputedAndReReadWork) {
  const std::string text = explain_report(fixed_rows());
  EXPECT_NE(text.find("One decode step at 8,192 tokens"), std::string::npos) << text;
  EXPECT_NE(text.find("1×8,193 score row per query head"), std::string::npos) << text;
  EXPECT_NE(text.find("8,192 K rows"), std::string::npos) << text;
  EXPECT_NE(text.find("Where the time goes (MHA f32): moving 268.4 MB"), std::string::npos) << text;
  EXPECT_EQ(text.find("512 K rows"), std::string::npos) << text;
  EXPECT_NE(text.find("memory-bound"), std::string::npos) << text;
  EXPECT_NE(text.find("MQA f32 reads 32.0× fewer bytes"), std::string::npos) << text;
}

// A window row at 8,192 tokens reads 2,048 tokens' bytes: a quarter of its full row's.
TEST(ReportOutput, WindowRowIsExplainedAndCarriesItsWindow) {
  std::vector<ReportRow> rows = fixed_rows();
  EXPECT_EQ(explain_report(rows).find("sliding-window"), std::string::npos);
  ReportRow w = rows[8];  // MHA f32 at 8,192 tokens
  ASSERT_EQ(w.tokens, 8192);
  w.variant = "MHA SWA-2048";
  w.window = 2048;
  w.bytes_read_per_step = w.cache_bytes = 2048u * 32 * 1024;
  rows.push_back(w);
  const std::string text = explain_report(rows);
  EXPECT_NE(text.find("The sliding-window row MHA SWA-2048 f32 keeps a ring of the last 2,048 "
                      "tokens per kv head: decode reads stop growing at W = 2,048, so at 8,192 "
                      "tokens it reads 2,048/8,192 = 25% of the MHA f32 row's bytes (67.1 MB "
                      "against 268.4 MB)."),
            std::string::npos)
      << text;
  // The paragraphs still explain the full MHA f32 row, not the window row.
  EXPECT_NE(text.find("Where the time goes (MHA f32): moving 268.4 MB"), std::string::npos) << text;
  const nlohmann::json j = report_json(rows);
  EXPECT_EQ(j.back()["window"], 2048);
  EXPECT_EQ(j.front()["window"], 0);
  const std::string table = report_table(rows);
  EXPECT_NE(table.find("MHA SWA-2048 "), std::string::npos) << table;
  EXPECT_EQ(table.find("variant     "), 0u) << table;  // the column is as wide as the name
}

TEST(ReportOutput, ExplanationSaysWhetherTheModelsCacheFitsTheLastLevelCache) {
  std::vector<ReportRow> rows = fixed_rows();  // MHA f32 at 8,192 tokens: 4 × 268.4 MB
  std::string text = explain_cache_fit(rows);
  EXPECT_NE(text.find("does not fit in the 34 MB last-level cache"), std::string::npos) << text;
  EXPECT_NE(text.find("4 layers"), std::string::npos) << text;
  EXPECT_NE(text.find("cold figures are the truth"), std::string::npos) << text;
  for (ReportRow& r : rows) r.llc_bytes = std::uint64_t{2} << 30;
  text = explain_cache_fit(rows);
  EXPECT_NE(text.find("fits in the 2147 MB last-level cache"), std::string::npos) << text;
  EXPECT_NE(text.find("warm figures would be the truth"), std::string::npos) << text;
  EXPECT_NE(explain_report(rows).find("last-level cache"), std::string::npos);
  EXPECT_EQ(describe_cache_state(rows[0]).rfind("cold (40 caches cycled", 0), 0u);
  rows[0].cache_state = CacheState::warm;
  EXPECT_EQ(describe_cache_state(rows[0]).rfind("warm", 0), 0u);
}

}  // namespace
}  // namespace kvscope::cli
