#include "tools/report_output.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "engine/memory.hpp"
#include "tools/cli_support.hpp"
#include "tools/svg_plot.hpp"

namespace kvscope::cli {
namespace {

// The CSV and JSON columns, in order.
const std::vector<std::string> kColumns = {"variant",
                                           "n_heads",
                                           "n_kv_heads",
                                           "head_dim",
                                           "tokens",
                                           "window",
                                           "layers",
                                           "batch",
                                           "kv_dtype",
                                           "k_dtype",
                                           "v_dtype",
                                           "kv_layout",
                                           "isa",
                                           "compute",
                                           "compute_unit",
                                           "threads",
                                           "cache_bytes",
                                           "cache_bytes_all_layers",
                                           "bytes_read_per_step",
                                           "flops_per_step",
                                           "attn_seconds_median",
                                           "attn_seconds_min",
                                           "attn_seconds_max",
                                           "repetitions",
                                           "attn_seconds_mean",
                                           "attn_seconds_stdev",
                                           "attn_tokens_per_s",
                                           "attn_gbps",
                                           "read_bandwidth_gbps",
                                           "fraction_of_bandwidth",
                                           "fma_peak_gflops",
                                           "compute_peak_gops",
                                           "speed_of_light_seconds",
                                           "fraction_of_speed_of_light",
                                           "bound",
                                           "layer_tokens_per_s",
                                           "layer_seconds_median",
                                           "weights_dtype",
                                           "layer_weight_bytes",
                                           "layer_bytes_per_step",
                                           "layer_weights_share",
                                           "layer_attention_share",
                                           "layer_other_share",
                                           "kv_overtakes_weights_tokens",
                                           "prefill_seconds",
                                           "prefill_tokens_per_s",
                                           "prefill_attention_share",
                                           "cache_state",
                                           "cold_method",
                                           "caches_allocated",
                                           "llc_bytes",
                                           "model_attn_seconds_median",
                                           "model_attn_tokens_per_s",
                                           "bytes_read_per_model_step",
                                           "attn_rel_error",
                                           "attn_weight_kl",
                                           "unstable",
                                           "unstable_reason"};

nlohmann::json row_json(const ReportRow& r) {
  return {{"variant", r.variant},
          {"batch", r.batch},
          {"n_heads", r.n_heads},
          {"n_kv_heads", r.n_kv_heads},
          {"head_dim", r.head_dim},
          {"tokens", r.tokens},
          {"window", r.window},
          {"layers", r.layers},
          {"kv_dtype", to_string(r.kv_dtype)},
          {"k_dtype", to_string(r.kv_dtype.k)},
          {"v_dtype", to_string(r.kv_dtype.v)},
          {"kv_layout", to_string(r.kv_layout)},
          {"paged_over_contiguous", ratio_json(r.paged_over_contiguous)},
          {"layer_over_main_weights", ratio_json(r.layer_over_main_weights)},
          {"isa", to_string(r.isa)},
          {"compute", to_string(r.compute)},
          {"compute_unit", to_string(r.compute_unit)},
          {"threads", r.threads},
          {"cache_bytes", r.cache_bytes},
          {"cache_bytes_all_layers", r.cache_bytes_all_layers},
          {"bytes_read_per_step", r.bytes_read_per_step},
          {"flops_per_step", r.flops_per_step},
          {"attn_seconds_median", r.attn_seconds_median},
          {"attn_seconds_min", r.attn_seconds_min},
          {"attn_seconds_max", r.attn_seconds_max},
          {"repetitions", r.repetitions},
          {"attn_seconds_mean", r.attn_seconds_mean},
          {"attn_seconds_stdev", r.attn_seconds_stdev},
          {"attn_seconds_repetitions", r.attn_seconds_repetitions},
          {"read_bandwidth_gbps_repetitions", r.read_bandwidth_repetitions},
          {"fma_peak_gflops_repetitions", r.fma_peak_repetitions},
          {"compute_peak_gops_repetitions", r.compute_peak_repetitions},
          {"attn_tokens_per_s", r.attn_tokens_per_s},
          {"attn_gbps", r.attn_gbps},
          {"read_bandwidth_gbps", r.read_bandwidth_gbps},
          {"fraction_of_bandwidth", r.fraction_of_bandwidth},
          {"fma_peak_gflops", r.fma_peak_gflops},
          {"compute_peak_gops", r.compute_peak_gops},
          {"speed_of_light_seconds", r.speed_of_light_seconds},
          {"fraction_of_speed_of_light", r.fraction_of_speed_of_light},
          {"speed_of_light_pairs", ratio_json(r.speed_of_light_pairs)},
          {"bound", r.bound},
          {"layer_tokens_per_s", r.layer_tokens_per_s},
          {"layer_seconds_median", r.layer_seconds_median},
          {"weights_dtype", to_string(r.weights_dtype)},
          {"layer_weight_bytes", r.layer_weight_bytes},
          {"layer_bytes_per_step", r.layer_bytes_per_step},
          {"layer_weights_share", r.layer_weights_share},
          {"layer_attention_share", r.layer_attention_share},
          {"layer_other_share", r.layer_other_share},
          {"kv_overtakes_weights_tokens", r.kv_overtakes_weights_tokens},
          {"prefill_seconds", r.prefill_seconds},
          {"prefill_tokens_per_s", r.prefill_tokens_per_s},
          {"prefill_attention_share", r.prefill_attention_share},
          {"cache_state", to_string(r.cache_state)},
          {"cold_method", r.cold_method},
          {"caches_allocated", r.caches_allocated},
          {"llc_bytes", r.llc_bytes},
          {"model_attn_seconds_median", r.model_attn_seconds_median},
          {"model_attn_tokens_per_s", r.model_attn_tokens_per_s},
          {"bytes_read_per_model_step", r.bytes_read_per_model_step},
          {"attn_rel_error", r.attn_rel_error},
          {"attn_weight_kl", r.attn_weight_kl},
          {"unstable", r.unstable},
          {"unstable_reason", r.unstable_reason}};
}

std::string mb(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  return text;
}

// A CSV field: quoted (quotes doubled) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The row the plain-language paragraphs explain: MHA f32 (else the first row) at the largest
// context measured, where the step is longest and its figures steadiest.
const ReportRow& explained_row(const std::vector<ReportRow>& rows);

const ReportRow* find_row(const std::vector<ReportRow>& rows, std::int64_t tokens,
                          std::int64_t kv_heads, KvTypes dtype, KvLayout layout = {}) {
  for (const ReportRow& r : rows) {
    if (r.tokens == tokens && r.n_kv_heads == kv_heads && r.kv_dtype == dtype &&
        r.kv_layout == layout && r.batch == 1 && r.window == 0)
      return &r;
  }
  return nullptr;
}

// The cache column: its type, and its layout when paged ("int8 paged:16").
std::string cache_label(const ReportRow& r) {
  return to_string(r.kv_dtype) + (r.kv_layout.paged() ? " " + to_string(r.kv_layout) : "");
}

const ReportRow& explained_row(const std::vector<ReportRow>& rows) {
  std::int64_t tokens = rows.front().tokens;
  for (const ReportRow& r : rows) tokens = std::max(tokens, r.tokens);
  const ReportRow* base = find_row(rows, tokens, rows.front().n_heads, KvDtype::f32);
  if (base != nullptr) return *base;
  for (const ReportRow& r : rows) {
    if (r.tokens == tokens) return r;
  }
  return rows.front();
}

// The variant column's width: "GQA-8 SWA-4096" is wider than "variant".
int variant_width(const std::vector<ReportRow>& rows) {
  std::size_t width = 7;
  for (const ReportRow& r : rows) width = std::max(width, r.variant.size());
  return static_cast<int>(width);
}

// One sentence on a sliding-window row (at the explained context and cache type if there is
// one there): its reads stop at W, so at context C it reads W/C of the full row's bytes.
std::string explain_window(const std::vector<ReportRow>& rows, const ReportRow& explained) {
  const ReportRow* w = nullptr;
  for (const ReportRow& r : rows) {
    if (r.window == 0) continue;
    const bool here = r.tokens == explained.tokens && r.kv_dtype == explained.kv_dtype;
    if (w == nullptr ||
        (here && !(w->tokens == explained.tokens && w->kv_dtype == explained.kv_dtype))) {
      w = &r;
    }
  }
  if (w == nullptr) return "";
  const ReportRow* full = find_row(rows, w->tokens, w->n_kv_heads, w->kv_dtype);
  const std::string dtype(to_string(w->kv_dtype));
  std::string against = "what full attention over them would read";
  if (full != nullptr) {
    against = "the " + full->variant + " " + dtype + " row's bytes (" + mb(w->bytes_read_per_step) +
              " against " + mb(full->bytes_read_per_step) + ")";
  }
  char buf[800];
  std::snprintf(buf, sizeof buf,
                "The sliding-window row %s %s keeps a ring of the last %s tokens per kv head: "
                "decode reads stop growing at W = %s, so at %s tokens it reads %s/%s = %.0f%% "
                "of %s.\n",
                w->variant.c_str(), dtype.c_str(), with_commas(w->window).c_str(),
                with_commas(w->window).c_str(), with_commas(w->tokens).c_str(),
                with_commas(w->window).c_str(), with_commas(w->tokens).c_str(),
                100.0 * static_cast<double>(w->window) / static_cast<double>(w->tokens),
                against.c_str());
  return buf;
}

}  // namespace

nlohmann::json ratio_json(const RatioSummary& r) {
  return {{"median", r.median}, {"low", r.low}, {"high", r.high}, {"pairs", r.pairs}};
}

nlohmann::json report_json(const std::vector<ReportRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const ReportRow& r : rows) out.push_back(row_json(r));
  return out;
}

std::string report_csv(const std::vector<ReportRow>& rows) {
  std::ostringstream out;
  for (std::size_t i = 0; i < kColumns.size(); ++i) out << (i ? "," : "") << kColumns[i];
  out << "\n";
  for (const ReportRow& r : rows) {
    const nlohmann::json j = row_json(r);
    for (std::size_t i = 0; i < kColumns.size(); ++i) {
      const nlohmann::json& v = j.at(kColumns[i]);
      out << (i ? "," : "") << (v.is_string() ? csv_field(v.get<std::string>()) : v.dump());
    }
    out << "\n";
  }
  return out.str();
}

std::string report_table(const std::vector<ReportRow>& rows) {
  std::string out;
  char line[400];
  const int vw = variant_width(rows);
  int cache_width = 8;
  for (const ReportRow& r : rows)
    cache_width = std::max(cache_width, static_cast<int>(cache_label(r).size()));
  std::snprintf(line, sizeof line,
                "%-*s %4s %-*s %-11s %7s %11s %11s %24s %10s %8s %9s %6s %10s %6s %10s %11s %9s "
                "%9s\n",
                vw, "variant", "kv", cache_width, "cache", "unit", "tokens", "cache/layer",
                "read/step", "step median ± stdev", "tokens/s", "GB/s", "read GB/s", "of bw",
                "light", "of SoL", "layer t/s", "prefill t/s", "rel err", "KL");
  out += line;
  for (const ReportRow& r : rows) {
    const std::string range =
        format_seconds(r.attn_seconds_median) + " ± " + format_seconds(r.attn_seconds_stdev);
    char layer[32] = "-";
    if (r.layer_tokens_per_s > 0) std::snprintf(layer, sizeof layer, "%.1f", r.layer_tokens_per_s);
    char prefill[32] = "-";
    if (r.prefill_tokens_per_s > 0) {
      std::snprintf(prefill, sizeof prefill, "%.0f", r.prefill_tokens_per_s);
    }
    std::snprintf(
        line, sizeof line,
        "%-*s %4lld %-*s %-11s %7lld %11s %11s %24s %10.1f %8.2f %9.2f %5.0f%% %10s %5.0f%% "
        "%10s %11s %9.2e %9.2e\n",
        vw, r.variant.c_str(), static_cast<long long>(r.n_kv_heads), cache_width,
        cache_label(r).c_str(), std::string(to_string(r.compute_unit)).c_str(),
        static_cast<long long>(r.tokens), mb(r.cache_bytes).c_str(),
        mb(r.bytes_read_per_step).c_str(), range.c_str(), r.attn_tokens_per_s, r.attn_gbps,
        r.read_bandwidth_gbps, 100 * r.fraction_of_bandwidth,
        format_seconds(r.speed_of_light_seconds).c_str(), 100 * r.fraction_of_speed_of_light, layer,
        prefill, r.attn_rel_error, r.attn_weight_kl);
    out += line;
  }
  return out;
}

// The first paragraph for an MLA row: what its decode step reads.
std::string explain_mla(const ReportRow& b) {
  char buf[1200];
  std::snprintf(buf, sizeof buf,
                "One decode step at %s tokens (%lld query heads, multi-head latent attention, "
                "absorbed) folds W_UK into each head's query, so every head asks a question of "
                "%lld values (latent + rope), and reads the shared latent cache once for all "
                "heads: %s rows, %s in all for MLA f32. W_UV turns each head's attended latent "
                "into its value afterwards (both folds are projections, in the layer's step, not "
                "in this attention time).\n",
                with_commas(b.tokens).c_str(), static_cast<long long>(b.n_heads),
                static_cast<long long>(b.head_dim), with_commas(b.tokens).c_str(),
                mb(b.bytes_read_per_step).c_str());
  return buf;
}

std::string explain_report(const std::vector<ReportRow>& rows) {
  if (rows.empty()) return "";
  const ReportRow& b = explained_row(rows);
  const ReportRow* base = &b;
  const std::int64_t tokens = b.tokens;
  std::string text;
  char buf[1200];
  if (b.variant == "MLA") {
    text += explain_mla(b);
  } else {
    std::snprintf(
        buf, sizeof buf,
        "One decode step at %s tokens (%lld query heads × d_head %lld) recomputes only the "
        "new token: its q, k and v (one row through W_Q, W_K, W_V) and one 1×%s score row "
        "per query head. It only re-reads the cache: %s K rows and as many V rows per kv "
        "head, %s in all for %s %s.\n",
        with_commas(tokens).c_str(), static_cast<long long>(b.n_heads),
        static_cast<long long>(b.head_dim), with_commas(tokens + 1).c_str(),
        with_commas(tokens).c_str(), mb(b.bytes_read_per_step).c_str(), b.variant.c_str(),
        std::string(to_string(b.kv_dtype)).c_str());
    text += buf;
  }
  const double memory_s =
      static_cast<double>(b.bytes_read_per_step) / (b.read_bandwidth_gbps * 1e9);
  const double compute_s = static_cast<double>(b.flops_per_step) / (b.compute_peak_gops * 1e9);
  std::snprintf(buf, sizeof buf,
                "Where the time goes (%s %s): moving %s at the measured %.1f GB/s takes %s; its "
                "%.1f MFLOP at the measured %.0f GOP/s peak of %s take %s. The step is %s-bound "
                "(%.0f× apart); the measured %s is %.0f%% of that speed of light%s.\n",
                b.variant.c_str(), std::string(to_string(b.kv_dtype)).c_str(),
                mb(b.bytes_read_per_step).c_str(), b.read_bandwidth_gbps,
                format_seconds(memory_s).c_str(), static_cast<double>(b.flops_per_step) / 1e6,
                b.compute_peak_gops, std::string(to_string(b.compute_unit)).c_str(),
                format_seconds(compute_s).c_str(), b.bound.c_str(),
                std::max(memory_s, compute_s) / std::min(memory_s, compute_s),
                format_seconds(b.attn_seconds_median).c_str(), 100 * b.fraction_of_speed_of_light,
                b.speed_of_light_pairs.pairs > 0
                    ? (" (the median over " + with_commas(b.speed_of_light_pairs.pairs) +
                       " steps, each against a step of the read loop beside it)")
                          .c_str()
                    : "");
  text += buf;
  std::string gains;
  for (const ReportRow& r : rows) {
    if (r.tokens != tokens || &r == base) continue;
    if (r.kv_dtype != b.kv_dtype && r.n_kv_heads != b.n_kv_heads) continue;
    const double speedup = b.attn_seconds_median / r.attn_seconds_median;
    std::snprintf(
        buf, sizeof buf, "%s%s %s reads %.1f× fewer bytes and its step is %.1f× %s",
        gains.empty() ? "" : "; ", r.variant.c_str(), std::string(to_string(r.kv_dtype)).c_str(),
        static_cast<double>(b.bytes_read_per_step) / static_cast<double>(r.bytes_read_per_step),
        speedup >= 1 ? speedup : 1 / speedup, speedup >= 1 ? "faster" : "slower");
    gains += buf;
  }
  if (!gains.empty()) text += "Against it: " + gains + ".\n";
  text += explain_window(rows, b);
  if (b.variant == "MLA") {
    // An f32 MHA cache: 4·heads·d FLOPs per token against 2·heads·d·4 bytes.
    const double intensity =
        static_cast<double>(b.flops_per_step) / static_cast<double>(b.bytes_read_per_step);
    std::snprintf(buf, sizeof buf,
                  "MLA's absorbed decode is compute-heavier per byte: %.1f FLOPs per byte read "
                  "(each of the %lld heads scores and sums the whole shared row of %lld values), "
                  "against 0.5 for an f32 MHA cache and 0.5 × the group size for GQA, so it meets "
                  "the compute roof at caches where the K/V variants are still bound by memory.\n",
                  intensity, static_cast<long long>(b.n_heads), static_cast<long long>(b.head_dim));
    text += buf;
  }
  return text + explain_cache_fit(rows);
}

std::string describe_cache_state(const ReportRow& r) {
  if (r.cache_state == CacheState::warm) return "warm (the same caches re-read every step)";
  if (r.cold_method == "flush") return "cold (caches flushed from every level after each step)";
  return "cold (" + std::to_string(r.caches_allocated) +
         " caches cycled, more than 4 × every last-level cache the threads reach read between "
         "two reads of one)";
}

std::string explain_cache_fit(const std::vector<ReportRow>& rows) {
  if (rows.empty()) return "";
  const ReportRow& b = explained_row(rows);
  const double llc_mb = static_cast<double>(b.llc_bytes) / 1e6;
  const bool fits = b.cache_bytes_all_layers <= b.llc_bytes;
  std::string text;
  char buf[1200];
  std::snprintf(buf, sizeof buf,
                "The model's cache (%s %s, %lld layer%s × %s = %s) %s the %.0f MB last-level "
                "cache. ",
                b.variant.c_str(), std::string(to_string(b.kv_dtype)).c_str(),
                static_cast<long long>(b.layers), b.layers == 1 ? "" : "s",
                mb(b.cache_bytes).c_str(), mb(b.cache_bytes_all_layers).c_str(),
                fits ? "fits in" : "does not fit in", llc_mb);
  text += buf;
  if (fits) {
    text +=
        "Were nothing else to pass through, a step would find it there and warm figures would "
        "be the truth for this model; a real step also streams every layer's weights, which "
        "evict it unless they fit as well.";
  } else {
    text +=
        "Between two reads of one layer's cache the other layers' caches alone stream past "
        "and evict it, so every step reads its K/V from memory: cold figures are the truth "
        "for this model";
    text +=
        b.cache_state == CacheState::warm ? ", and a warm run of fewer layers overstates it." : ".";
  }
  const std::string scope =
      b.layers == 1 ? "the layer's cache" : "all " + std::to_string(b.layers) + " layers' caches";
  std::snprintf(buf, sizeof buf, " Measured %s: one step over %s takes %s (%.1f steps/s)%s%s.\n",
                b.cache_state == CacheState::cold ? "cold" : "warm", scope.c_str(),
                format_seconds(b.model_attn_seconds_median).c_str(), b.model_attn_tokens_per_s,
                b.layers == 1 ? "" : ", per layer ",
                b.layers == 1 ? "" : format_seconds(b.attn_seconds_median).c_str());
  text += buf;
  return text;
}

bool same_shape(const ReportRow& a, const ReportRow& b) {
  return a.tokens == b.tokens && a.n_kv_heads == b.n_kv_heads && a.kv_dtype == b.kv_dtype &&
         a.kv_layout == b.kv_layout && a.window == b.window;
}

double weights_read_gbps(const ReportRow& r) {
  const double seconds = r.layer_weights_share * r.layer_seconds_median;
  return seconds > 0 ? static_cast<double>(r.layer_weight_bytes) / seconds / 1e9 : 0.0;
}

std::string explain_layer_step(const std::vector<ReportRow>& rows) {
  const ReportRow* r = nullptr;
  for (const ReportRow& row : rows) {
    if (row.layer_tokens_per_s > 0 && (r == nullptr || row.tokens > r->tokens)) r = &row;
  }
  if (r == nullptr) return "";
  char buf[1000];
  std::snprintf(buf, sizeof buf,
                "The full layer (%s %s, %s tokens, %s weights): a step takes %s and reads %s, "
                "%s of weights and %s of cache. Timed inside the step: the projections "
                "(reading the weights, %.1f GB/s) take %.0f%% of it, attention (reading the "
                "cache) %.0f%%, the rest (norms, RoPE, SwiGLU, residuals) %.0f%%.\n",
                r->variant.c_str(), std::string(to_string(r->kv_dtype)).c_str(),
                with_commas(r->tokens).c_str(), std::string(to_string(r->weights_dtype)).c_str(),
                format_seconds(r->layer_seconds_median).c_str(),
                mb(r->layer_bytes_per_step).c_str(), mb(r->layer_weight_bytes).c_str(),
                mb(r->layer_bytes_per_step - r->layer_weight_bytes).c_str(), weights_read_gbps(*r),
                100 * r->layer_weights_share, 100 * r->layer_attention_share,
                100 * r->layer_other_share);
  std::string text = buf;
  if (r->prefill_seconds > 0) {
    std::snprintf(buf, sizeof buf,
                  "Its prefill of the %s tokens from an empty cache (the time to first token) "
                  "takes %s, %.0f tokens/s, %.0f%% of it in attention.\n",
                  with_commas(r->tokens).c_str(), format_seconds(r->prefill_seconds).c_str(),
                  r->prefill_tokens_per_s, 100 * r->prefill_attention_share);
    text += buf;
  }
  return text;
}

std::string explain_paging(const std::vector<ReportRow>& rows) {
  std::string text;
  for (const ReportRow& r : rows) {
    if (!r.kv_layout.paged() || r.batch != 1 || r.window != 0) continue;
    const ReportRow* flat = find_row(rows, r.tokens, r.n_kv_heads, r.kv_dtype);
    if (flat == nullptr || flat->attn_seconds_median <= 0) continue;
    // The two rows' steps taken in turn give the ratio pair by pair; else their medians.
    const RatioSummary& paired = r.paged_over_contiguous;
    const double ratio =
        paired.pairs > 0 ? paired.median : r.attn_seconds_median / flat->attn_seconds_median;
    char buf[600];
    std::snprintf(buf, sizeof buf,
                  "Paged (%s tokens a page, pages scattered in a shared pool) %s %s at %s tokens: "
                  "the decode step takes %s against %s contiguous, %.2f× (%s%.0f%%)",
                  with_commas(r.kv_layout.page_tokens).c_str(), r.variant.c_str(),
                  to_string(r.kv_dtype).c_str(), with_commas(r.tokens).c_str(),
                  format_seconds(r.attn_seconds_median).c_str(),
                  format_seconds(flat->attn_seconds_median).c_str(), ratio, ratio >= 1 ? "+" : "",
                  100 * (ratio - 1));
    text += buf;
    if (paired.pairs > 0) {
      std::snprintf(buf, sizeof buf,
                    ", the median of %zu pairs of steps taken in turn (middle half %.2f–%.2f×)",
                    paired.pairs, paired.low, paired.high);
      text += buf;
    }
    text += ".\n";
  }
  return text;
}

std::string report_batch_table(const std::vector<ReportRow>& rows) {
  std::string out;
  char line[300];
  const int vw = variant_width(rows);
  std::snprintf(line, sizeof line, "%-*s %4s %-8s %7s %6s %12s %12s %12s %8s %11s %8s %16s\n", vw,
                "variant", "kv", "cache", "tokens", "batch", "layer step", "layer t/s", "read/step",
                "weights", "weight GB/s", "attn", "KV > weights at");
  out += line;
  for (const ReportRow& r : rows) {
    if (r.layer_tokens_per_s <= 0) continue;
    // A window row's ring stops at W: its cache may never reach the weights.
    const std::string overtakes =
        r.window > 0 && r.kv_overtakes_weights_tokens == 0
            ? "never"
            : with_commas(static_cast<std::uint64_t>(r.kv_overtakes_weights_tokens)) + " tokens";
    std::snprintf(line, sizeof line,
                  "%-*s %4lld %-8s %7lld %6lld %12s %12.1f %12s %7.0f%% %11.1f %7.0f%% %16s\n", vw,
                  r.variant.c_str(), static_cast<long long>(r.n_kv_heads),
                  to_string(r.kv_dtype).c_str(), static_cast<long long>(r.tokens),
                  static_cast<long long>(r.batch), format_seconds(r.layer_seconds_median).c_str(),
                  r.layer_tokens_per_s, mb(r.layer_bytes_per_step).c_str(),
                  100 * r.layer_weights_share, weights_read_gbps(r), 100 * r.layer_attention_share,
                  overtakes.c_str());
    out += line;
  }
  return out;
}

std::string explain_batches(const std::vector<ReportRow>& rows) {
  std::string text;
  std::vector<std::int64_t> seen;
  for (const ReportRow& r : rows) {  // one sentence per batch size, on its first full row
    if (r.layer_tokens_per_s <= 0 || r.window > 0 ||
        std::find(seen.begin(), seen.end(), r.batch) != seen.end())
      continue;
    seen.push_back(r.batch);
    const std::uint64_t per_token = r.cache_bytes / static_cast<std::uint64_t>(r.tokens);
    char buf[700];
    std::snprintf(
        buf, sizeof buf,
        "At batch %lld (%s %s), a step reads the %s of weights once for %lld token%s and "
        "%s bytes of cache per token of context per sequence: the cache's bytes overtake the "
        "weights' from a context of %s tokens%s.\n",
        static_cast<long long>(r.batch), r.variant.c_str(), to_string(r.kv_dtype).c_str(),
        mb(r.layer_weight_bytes).c_str(), static_cast<long long>(r.batch), r.batch == 1 ? "" : "s",
        with_commas(per_token).c_str(),
        with_commas(static_cast<std::uint64_t>(r.kv_overtakes_weights_tokens)).c_str(),
        r.tokens >= r.kv_overtakes_weights_tokens
            ? (" (at " + with_commas(r.tokens) + " tokens the cache already dominates)").c_str()
            : "");
    text += buf;
    // Where the batch's projections read the weights slower than one token's do, say so, and
    // what differs: the order W is read in and the B dot products per weight. Which one costs
    // depends on the CPU and the batch (AMD Zen 5 at batch 8: the order; with the dot
    // products switched off the kernel read W no faster), so the sentence names both.
    const auto single = std::find_if(rows.begin(), rows.end(), [&](const ReportRow& o) {
      return o.batch == 1 && o.tokens == r.tokens && o.n_kv_heads == r.n_kv_heads &&
             o.kv_dtype == r.kv_dtype && o.window == 0 && weights_read_gbps(o) > 0;
    });
    if (r.batch > 1 && single != rows.end() &&
        weights_read_gbps(r) < 0.9 * weights_read_gbps(*single)) {
      std::snprintf(buf, sizeof buf,
                    "Its projections read the weights at %.1f GB/s against %.1f at batch 1: "
                    "a batch's kernel reads W in another order than one token's (in blocks of "
                    "rows, so that its rows of x stay in cache) and does %lld dot products per "
                    "weight, and either can cost (bench/projection_bench: BM_SmallBatch times "
                    "it cold, BM_SmallBatchWarm with the weights in cache).\n",
                    weights_read_gbps(r), weights_read_gbps(*single),
                    static_cast<long long>(r.batch));
      text += buf;
    }
  }
  return text;
}

std::string report_weights_table(const std::vector<ReportRow>& rows) {
  std::string out;
  char line[300];
  const int vw = variant_width(rows);
  std::snprintf(line, sizeof line, "%-*s %4s %-8s %7s %7s %12s %12s %12s %11s  %s\n", vw, "variant",
                "kv", "cache", "tokens", "weights", "layer step", "layer t/s", "read/step",
                "weight GB/s", "step ÷ main");
  out += line;
  for (const ReportRow& r : rows) {
    if (r.layer_tokens_per_s <= 0) continue;
    const RatioSummary& q = r.layer_over_main_weights;
    char ratio[64] = "1 (main)";
    if (q.pairs > 0) {
      std::snprintf(ratio, sizeof ratio, "%.3f (%.3f-%.3f)", q.median, q.low, q.high);
    }
    std::snprintf(line, sizeof line, "%-*s %4lld %-8s %7lld %7s %12s %12.1f %12s %11.1f  %s\n", vw,
                  r.variant.c_str(), static_cast<long long>(r.n_kv_heads), cache_label(r).c_str(),
                  static_cast<long long>(r.tokens), std::string(to_string(r.weights_dtype)).c_str(),
                  format_seconds(r.layer_seconds_median).c_str(), r.layer_tokens_per_s,
                  mb(r.layer_bytes_per_step).c_str(), weights_read_gbps(r), ratio);
    out += line;
  }
  return out;
}

std::string explain_weights(const std::vector<ReportRow>& rows) {
  std::string text;
  std::vector<WeightDtype> seen;
  char buf[600];
  for (const ReportRow& r : rows) {  // one sentence per compared type, on its first row
    if (r.layer_over_main_weights.pairs == 0 ||
        std::find(seen.begin(), seen.end(), r.weights_dtype) != seen.end())
      continue;
    const auto main = std::find_if(rows.begin(), rows.end(), [&](const ReportRow& o) {
      return o.layer_over_main_weights.pairs == 0 && o.layer_tokens_per_s > 0 && same_shape(o, r);
    });
    if (main == rows.end() || main->layer_weight_bytes == 0) continue;
    seen.push_back(r.weights_dtype);
    const RatioSummary& q = r.layer_over_main_weights;
    std::snprintf(
        buf, sizeof buf,
        "With %s weights the layer step (%s %s, %s tokens) takes %.2f× the time it "
        "takes with %s weights (%s against %s; the median of %zu pairs of steps taken "
        "in turn, middle half %.2f-%.2f) for %.2f× the weight bytes (%s against %s).\n",
        std::string(to_string(r.weights_dtype)).c_str(), r.variant.c_str(), cache_label(r).c_str(),
        with_commas(r.tokens).c_str(), q.median,
        std::string(to_string(main->weights_dtype)).c_str(),
        format_seconds(r.layer_seconds_median).c_str(),
        format_seconds(main->layer_seconds_median).c_str(), q.pairs, q.low, q.high,
        static_cast<double>(r.layer_weight_bytes) / static_cast<double>(main->layer_weight_bytes),
        mb(r.layer_weight_bytes).c_str(), mb(main->layer_weight_bytes).c_str());
    text += buf;
  }
  return text;
}

std::string report_svg(const std::vector<ReportRow>& rows) {
  // Colour tells the variant, the dash pattern the cache type.
  std::map<std::string, PlotSeries> series;  // keyed by name, kept in first-seen order below
  std::vector<std::string> order;
  std::map<std::string, int> variant_color;  // a window row has its own colour
  for (const ReportRow& r : rows) {
    if (r.batch != 1) continue;  // batch rows repeat their batch-1 row's attention
    const std::string name = r.variant + " " + cache_label(r);
    if (!series.count(name)) {
      order.push_back(name);
      PlotSeries& s = series[name];
      s.name = name;
      s.color =
          variant_color.emplace(r.variant, static_cast<int>(variant_color.size())).first->second;
      s.dash = r.kv_dtype == KvDtype::f32 ? "" : r.kv_dtype == KvDtype::int8 ? "2 3" : "8 4";
    }
    series[name].points.emplace_back(static_cast<double>(r.tokens), r.attn_tokens_per_s);
    if (r.speed_of_light_seconds > 0) {
      series[name].limit.emplace_back(static_cast<double>(r.tokens), 1 / r.speed_of_light_seconds);
    }
  }
  PlotSpec spec;
  if (!rows.empty()) {
    char title[160];
    std::snprintf(
        title, sizeof title, "Decode attention, %lld query heads × d_head %lld (%s, %d threads)",
        static_cast<long long>(rows.front().n_heads), static_cast<long long>(rows.front().head_dim),
        std::string(to_string(rows.front().isa)).c_str(), rows.front().threads);
    spec.title = title;
  }
  spec.x_label = "context length (tokens in the KV cache)";
  spec.y_label = "decode steps per second (attention, one layer)";
  spec.limit_legend = "thin: speed of light";
  for (const std::string& name : order) spec.series.push_back(series[name]);
  return render_line_chart_svg(spec);
}

}  // namespace kvscope::cli
