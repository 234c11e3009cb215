// `kvscope report` (and `kvscope` with no arguments): cache size, measured decode step and
// the machine's limits side by side for MHA, GQA and MQA and each cache type.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "engine/measure/machine_limits.hpp"
#include "engine/measure/report.hpp"
#include "engine/memory.hpp"
#include "kernels/units/cpu_features.hpp"
#include "tools/cli_limits.hpp"
#include "tools/cli_support.hpp"
#include "tools/commands.hpp"
#include "tools/report_output.hpp"
#include "tools/roofline_svg.hpp"

namespace kvscope::cli {
namespace {

struct ReportFlags {
  AttentionShapeFlags shape;
  ComputeFlags compute;
  CacheStateFlags cache;
  std::string tokens = "2000";
  std::string kv_heads;
  std::string windows;  // sliding windows of the extra rows; empty: the model's, if any
  std::string kv_dtypes = "f32,bf16,int8";
  std::string kv_layouts = "contiguous";
  std::string data = "realistic";
  int steps = 10;
  int repetitions = 3;
  bool no_layer = false, no_prefill = false;
  std::string batches = "1";
  std::string weights_dtype = "bf16";
  bool json = false;
  bool csv = false;
  std::string svg;
  std::string roofline;
};

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) items.push_back(item);
  return items;
}

// A comma list of integers ≥ 1; an item that is not names the flag, the list and the item.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<std::int64_t> values;
  for (const std::string& item : split_list(text)) {
    values.push_back(parse_integer(flag + " '" + text + "'", item, 1, kNoLimit));
  }
  if (values.empty()) throw std::invalid_argument(flag + " is empty");
  return values;
}

// MHA, GQA with 8 kv heads (or the divisor nearest a quarter of the heads), MQA.
std::vector<std::int64_t> default_kv_heads(std::int64_t heads) {
  std::vector<std::int64_t> kv{heads};
  std::int64_t gqa = 0;
  if (heads > 8 && heads % 8 == 0) {
    gqa = 8;
  } else {
    for (std::int64_t d = heads / 4; d > 1; --d) {
      if (heads % d == 0) {
        gqa = d;
        break;
      }
    }
  }
  if (gqa > 1 && gqa < heads) kv.push_back(gqa);
  if (heads > 1) kv.push_back(1);
  return kv;
}

// The kv heads of the sliding-window rows: the model's (--model or --config), else the
// first GQA row's (8 of the default 32 heads, the shape of Mistral and Llama 3), else the
// first row's, so that each window row has a full-attention row of its shape beside it.
std::int64_t window_kv_heads(const AttentionShapeFlags& shape,
                             const std::vector<std::int64_t>& kv_heads) {
  if (shape.hidden_size > 0) return shape.kv_heads;
  for (std::int64_t kv : kv_heads) {
    if (kv > 1 && kv < shape.heads) return kv;
  }
  return kv_heads.front();
}

// Writes `text` to `path` unless the path is empty.
void write_file(const std::string& path, const std::string& text, const std::string& what) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + what + " to '" + path + "'");
}

// Llama's MLP width: 2/3 of 4 × hidden, rounded up to a multiple of 256.
std::int64_t llama_ffn_size(std::int64_t hidden) { return (8 * hidden / 3 + 255) / 256 * 256; }

// The request the flags describe, validated without measuring or allocating anything
// (report_peak_bytes checks every shape and the memory the report will need).
ReportRequest report_request(ReportFlags& f, const CLI::App& cmd) {
  f.shape.resolve(cmd);
  ReportRequest request;
  if (f.shape.is_mla()) {  // one MLA row per context; its cache is f32
    request.mla = {.kv_lora_rank = f.shape.mla_latent,
                   .q_lora_rank = f.shape.mla_q_lora_rank,
                   .qk_nope_head_dim = f.shape.d_head - f.shape.mla_rope,
                   .qk_rope_head_dim = f.shape.mla_rope,
                   .v_head_dim = f.shape.mla_v_head_dim};
  }
  request.n_heads = f.shape.heads;
  request.head_dim = f.shape.d_head;
  request.layers = f.shape.layers;
  request.tokens = parse_int_list(f.tokens, "--tokens");
  request.kv_heads = cmd.count("--kv-heads") == 0 ? default_kv_heads(f.shape.heads)
                                                  : parse_int_list(f.kv_heads, "--kv-heads");
  // Window rows go beside the full rows, not in their place: at context C a window W < C
  // reads W/C of what full attention reads, and the report shows both.
  if (cmd.count("--window") > 0) {
    request.windows = parse_int_list(f.windows, "--window");
  } else if (f.shape.window > 0) {
    request.windows = {f.shape.window};  // the preset's or config's
  }
  request.kv_dtypes.clear();
  for (const std::string& name : split_list(f.kv_dtypes))
    request.kv_dtypes.push_back(parse_kv_types(name));
  if (f.shape.is_mla() && cmd.count("--kv-dtypes") == 0) request.kv_dtypes = {KvDtype::f32};
  request.kv_layouts.clear();
  for (const std::string& name : split_list(f.kv_layouts))
    request.kv_layouts.push_back(parse_kv_layout(name));
  request.hidden_size = f.shape.heads * f.shape.d_head;
  request.ffn_size = llama_ffn_size(request.hidden_size);
  const bool from_model = f.shape.hidden_size > 0;  // --model or --config
  if (from_model && cmd.count("--heads") == 0 && cmd.count("--d-head") == 0) {
    request.hidden_size = f.shape.hidden_size;
    request.ffn_size = f.shape.ffn_size;
  }
  if (from_model && f.kv_heads.empty() &&
      std::find(request.kv_heads.begin(), request.kv_heads.end(), f.shape.kv_heads) ==
          request.kv_heads.end()) {
    request.kv_heads.push_back(f.shape.kv_heads);  // the model's own shape is always a row
  }
  request.window_kv_heads = window_kv_heads(f.shape, request.kv_heads);
  request.measure_layer = !f.no_layer;
  request.measure_prefill = !f.no_prefill;
  request.batches = parse_int_list(f.batches, "--batch");
  for (std::int64_t b : request.batches) {
    if (b > kMaxBatch) {
      throw std::invalid_argument("--batch " + std::to_string(b) + " is above the limit of " +
                                  std::to_string(kMaxBatch) + " sequences");
    }
  }
  // The first weights type is the rows'; each further one a layer compared with it.
  const std::vector<std::string> weights = split_list(f.weights_dtype);
  if (weights.empty()) throw std::invalid_argument("--weights-dtype names no type");
  request.weights_dtype = parse_weight_dtype(weights.front());
  for (std::size_t i = 1; i < weights.size(); ++i) {
    request.compared_weights_dtypes.push_back(parse_weight_dtype(weights[i]));
  }
  request.isa = f.compute.resolved_isa();
  request.compute = f.compute.resolved_compute();
  request.threads = f.compute.resolved_threads();
  request.steps = f.steps;
  request.repetitions = f.repetitions;
  request.cache_state = f.cache.state;
  request.data = parse_kv_data(f.data);
  request.cold_method = f.cache.method;
  require_memory(report_peak_bytes(request), "this report");
  return request;
}

void run_report_command(ReportRequest request, const ReportFlags& f) {
  if (!f.svg.empty() && request.tokens.size() < 2) {
    std::fprintf(stderr,
                 "kvscope: note: --svg plots against context length; pass several "
                 "--tokens (e.g. 512,2000,8192) for lines rather than points\n");
  }
  const std::int64_t longest = *std::max_element(request.tokens.begin(), request.tokens.end());
  for (std::int64_t w : request.windows) {
    if (w >= longest) {
      std::fprintf(stderr,
                   "kvscope: note: sliding window %lld is not below any context in --tokens, "
                   "so it adds no row (up to W tokens a window reads what full attention "
                   "reads); pass a longer context, e.g. --tokens %lld\n",
                   static_cast<long long>(w), static_cast<long long>(2 * w));
    }
  }
  const bool show_progress = isatty(STDERR_FILENO) != 0;
  if (show_progress) {
    request.progress = [](std::string_view what) {
      std::fprintf(stderr, "\r\033[Kmeasuring %.*s...", static_cast<int>(what.size()), what.data());
    };
  }
  const std::vector<ReportRow> all_rows = run_report(request);
  if (show_progress) std::fprintf(stderr, "\r\033[K");
  // The table, plots and paragraphs show batch 1 with the first weights type; batches and the
  // other weights types get a table each of their own.
  std::vector<ReportRow> rows;
  for (const ReportRow& r : all_rows) {
    if (r.batch == 1 && r.layer_over_main_weights.pairs == 0) rows.push_back(r);
  }

  write_file(f.svg, report_svg(rows), "the SVG");
  write_file(f.roofline, roofline_svg(rows), "the roofline SVG");
  if (f.json) {
    std::cout << report_json(all_rows).dump(2) << "\n";
    return;
  }
  if (f.csv) {
    std::cout << report_csv(all_rows);
    return;
  }
  const ReportRow& first = rows.front();
  std::printf(
      "kvscope report: %lld query heads × d_head %lld, %s, isa %s, %s compute, %d thread%s; FMA "
      "peak measured %.0f GFLOP/s\n",
      static_cast<long long>(first.n_heads), static_cast<long long>(first.head_dim),
      request.layers == 1 ? "1 layer" : (std::to_string(request.layers) + " layers").c_str(),
      std::string(to_string(first.isa)).c_str(), std::string(to_string(request.compute)).c_str(),
      first.threads, first.threads == 1 ? "" : "s", first.fma_peak_gflops);
  std::printf("CPU: %s; units beyond the ISA: %s\n", cpu_model_name().c_str(),
              describe(cpu_features()).c_str());
  std::map<ComputeUnit, double> peaks;
  for (const ReportRow& r : rows) peaks[r.compute_unit] = r.compute_peak_gops;
  // Every unit the CPU has is probed, also those no row ran on (marked), so that the header
  // answers which unit is fastest here.
  std::string peak_list;
  for (ComputeUnit unit : {ComputeUnit::fp32_fma, ComputeUnit::vnni_int8, ComputeUnit::avx512_bf16,
                           ComputeUnit::amx_int8, ComputeUnit::amx_bf16}) {
    const bool ran = peaks.count(unit) != 0;
    if (!ran && (!cpu_has(unit) || first.isa != Isa::avx512)) continue;
    const double gops = ran ? peaks[unit] : measure_unit_peak_gops(unit, first.isa, first.threads);
    char item[128];
    std::snprintf(item, sizeof item, "%s%s %.0f GOP/s%s", peak_list.empty() ? "" : ", ",
                  std::string(to_string(unit)).c_str(), gops, ran ? "" : " (no row ran on it)");
    peak_list += item;
  }
  std::printf("Compute peaks measured (2 ops per multiply-add): %s\n", peak_list.c_str());
  for (const ReportRow& r : rows) {
    if (r.window == 0) continue;
    std::printf(
        "sliding-window rows (SWA-W): %lld kv heads whose cache is a ring of the last W tokens "
        "per kv head, at each context above W\n",
        static_cast<long long>(r.n_kv_heads));
    break;
  }
  std::printf("last-level cache %s (%s); cache state %s\n", format_bytes(first.llc_bytes).c_str(),
              first.llc_source.c_str(), describe_cache_state(first).c_str());
  if (first.unstable)
    std::printf("warning: measurements unstable: %s\n", first.unstable_reason.c_str());
  std::printf("\n");
  std::fputs(report_table(rows).c_str(), stdout);
  std::printf(
      "\n(cache/layer and read/step in MB = 1e6 bytes; 'read GB/s' is a plain read loop "
      "over the same bytes with the same threads; 'unit' is the compute unit the decode kernel "
      "ran on; 'light' is the speed of light, max of bytes ÷ read bandwidth and FLOPs ÷ that "
      "unit's peak; 'layer t/s' is the full decoder layer's decode step and 'prefill t/s' its "
      "prefill of the row's tokens, at hidden %lld, ffn %lld, %s weights)\n\n",
      static_cast<long long>(request.hidden_size), static_cast<long long>(request.ffn_size),
      std::string(to_string(request.weights_dtype)).c_str());
  std::fputs(explain_report(rows).c_str(), stdout);
  std::fputs(explain_paging(rows).c_str(), stdout);
  std::fputs(explain_layer_step(rows).c_str(), stdout);
  if (request.batches.size() > 1 || request.batches.front() > 1) {
    std::printf(
        "\nBatched decode: B sequences, each with its own cache of the row's tokens, "
        "one token each per step (layer t/s counts all B tokens):\n");
    std::vector<ReportRow> by_batch;  // each row followed by its batches
    for (const ReportRow& r : rows) {
      for (const ReportRow& b : all_rows) {
        if (same_shape(b, r) && b.layer_over_main_weights.pairs == 0) by_batch.push_back(b);
      }
    }
    std::fputs(report_batch_table(by_batch).c_str(), stdout);
    std::fputs(explain_batches(by_batch).c_str(), stdout);
  }
  if (!request.compared_weights_dtypes.empty()) {
    std::printf(
        "\nThe full layer by weights type: a layer per type (the same values rounded to it), "
        "their steps taken in turn at batch 1; 'step ÷ main' is a step ÷ the step with %s "
        "weights beside it, the median of the pairs (middle half in brackets):\n",
        std::string(to_string(request.weights_dtype)).c_str());
    std::vector<ReportRow> by_weights;  // each row followed by its other weights types
    for (const ReportRow& r : rows) {
      for (const ReportRow& w : all_rows) {
        if (same_shape(w, r) && w.batch == 1) by_weights.push_back(w);
      }
    }
    std::fputs(report_weights_table(by_weights).c_str(), stdout);
    std::fputs(explain_weights(by_weights).c_str(), stdout);
  }
  std::uint64_t largest = 0;
  for (const ReportRow& r : rows) largest = std::max(largest, r.cache_bytes);
  std::printf("\nMemory: peak RSS %s; largest cache measured %s.\n",
              format_bytes(peak_rss_bytes()).c_str(), format_bytes(largest).c_str());
}

}  // namespace

void add_report_command(CLI::App& app, OnParsed then) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report",
      "cache size, decode step and bandwidth limit for MHA/GQA/MQA × cache types "
      "(the default)");
  flags->shape.add_to(*cmd, /*with_layers=*/true, /*with_tokens_and_kv_heads=*/false);
  flags->compute.add_to(*cmd);
  flags->cache.add_to(*cmd);
  cmd->add_option("--tokens", flags->tokens,
                  "context lengths; a comma list sweeps, e.g. 512,2000,8192")
      ->capture_default_str();
  cmd->add_option("--kv-heads", flags->kv_heads,
                  "kv head counts, comma list (default: MHA, GQA-8, MQA)");
  cmd->add_option("--window", flags->windows,
                  "sliding windows W, comma list: for each W and each context above it, a row "
                  "of the model's kv heads (else the GQA row's) whose cache holds the last W "
                  "tokens, beside the full rows (default: the model's window, else none)");
  cmd->add_option("--kv-dtypes", flags->kv_dtypes,
                  "cache types, comma list; K:V for different key and value types (int8:f16)")
      ->capture_default_str();
  cmd->add_option("--kv-layout", flags->kv_layouts,
                  "cache layouts, comma list: contiguous, or paged:N (pages of N tokens from a "
                  "shared pool, read through a page table); e.g. contiguous,paged:16 measures "
                  "paging side by side")
      ->capture_default_str();
  cmd->add_option("--batch", flags->batches,
                  "batch sizes of the full layer's decode step, comma list, e.g. 1,8,32: B "
                  "sequences, each with its own cache, one token each per step")
      ->capture_default_str();
  cmd->add_option("--steps", flags->steps,
                  "timed decode steps per row, shared among the repetitions")
      ->capture_default_str()
      ->transform(integer_in(1, kMaxSteps));
  cmd->add_option("--repetitions", flags->repetitions,
                  "passes over all rows, interleaved so that drift hits every row alike")
      ->capture_default_str()
      ->transform(integer_in(1, kMaxRepetitions));
  cmd->add_option("--data", flags->data,
                  "K/V data of the accuracy columns: realistic (K outlier channels and offsets) "
                  "or uniform")
      ->capture_default_str();
  cmd->add_flag("--no-layer", flags->no_layer, "skip the full decoder-layer measurement");
  cmd->add_flag("--no-prefill", flags->no_prefill,
                "skip the full-layer prefill of each context (long at 32,768 tokens)");
  cmd->add_option("--weights-dtype", flags->weights_dtype,
                  "the full layer's weights: bf16 (as checkpoints ship), f16 or f32; a comma "
                  "list, e.g. bf16,f32, adds a layer per further type whose steps are taken in "
                  "turn with the first's")
      ->capture_default_str();
  auto* json = cmd->add_flag("--json", flags->json, "print an array of row objects");
  cmd->add_flag("--csv", flags->csv, "print CSV")->excludes(json);
  cmd->add_option("--svg", flags->svg, "write a plot of decode tokens/s against context length");
  cmd->add_option("--roofline", flags->roofline,
                  "write a roofline plot: GFLOP/s against FLOPs per byte, one point per row");
  cmd->callback([flags, cmd, then] {
    ReportRequest request = report_request(*flags, *cmd);
    if (then == OnParsed::run) run_report_command(std::move(request), *flags);
  });
}

}  // namespace kvscope::cli
