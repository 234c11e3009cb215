#pragma once
// How report rows are shown: a text table with a plain-language answer, JSON, CSV, SVG.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/measure/report.hpp"

namespace kvscope::cli {

nlohmann::json report_json(const std::vector<ReportRow>& rows);
std::string report_csv(const std::vector<ReportRow>& rows);
std::string report_table(const std::vector<ReportRow>& rows);

// What one decode step recomputes, what it only re-reads, and where the time goes, at the
// largest context length in `rows` (its MHA f32 row if present, else its first row), and
// what a sliding-window row reads against its full row.
std::string explain_report(const std::vector<ReportRow>& rows);

// "cold (18 caches cycled)", "cold (flushed after each step)", "warm" for a row.
std::string describe_cache_state(const ReportRow& row);

// One sentence on the full-layer step of the largest context's first row: the bytes it
// reads (weights in their dtype, cache) and the share of weights, attention and the rest.
// Empty when the layer was not measured.
std::string explain_layer_step(const std::vector<ReportRow>& rows);

// Whether all layers' caches fit in the last-level cache, what that makes of the step, and
// what cold or warm means for the figures (the row explain_report explains).
std::string explain_cache_fit(const std::vector<ReportRow>& rows);

// One sentence per paged row: its decode step against the contiguous row of the same shape
// and cache type, as a ratio.
std::string explain_paging(const std::vector<ReportRow>& rows);

// A summary of paired steps' ratios as JSON: median, low, high, pairs (the report's paged rows,
// `kvscope decode --versus`).
nlohmann::json ratio_json(const RatioSummary& r);

// The full layer's decode step per batch size: step time, tokens/s over the batch, bytes read
// (weights once, every sequence's cache), the weights' share and the rate the projections read
// them at, attention's share, and the context where the cache's bytes overtake the weights'.
// Rows without the layer are left out.
std::string report_batch_table(const std::vector<ReportRow>& rows);

// Whether two rows are of one shape, cache type and layout (context, kv heads, window), of any
// batch size or weights type: a batch-1 row and the rows that extend it.
bool same_shape(const ReportRow& a, const ReportRow& b);

// GB/s at which a row's layer step read its weights: their bytes over the projections' share
// of the step (0 without a timed layer). A batch's projections read W in pieces of rows and
// do B dot products per weight: where this falls below batch 1's, one of them costs.
double weights_read_gbps(const ReportRow& row);

// The full layer's step per weights type (rows of the report's compared_weights_dtypes
// beside their main-weights rows): step, tokens/s, bytes, the rate the weights are read at,
// and the step ÷ the main weights' step, pair by pair.
std::string report_weights_table(const std::vector<ReportRow>& rows);

// One sentence per compared weights type, on its first row: how much longer (or shorter) its
// step is than the main weights', for how many more weight bytes.
std::string explain_weights(const std::vector<ReportRow>& rows);

// One sentence per batch size: the context at which KV-cache bytes read per step overtake
// the weight bytes, for the first row of that batch.
std::string explain_batches(const std::vector<ReportRow>& rows);

// Decode tokens/s against context length, one line per variant × cache type, each with a
// thin line of the same colour at its speed of light.
std::string report_svg(const std::vector<ReportRow>& rows);

}  // namespace kvscope::cli
