// kvscope run --model DIR --layer I --input X.npy --output Y.npy [--prefill P]
//             [--kv-dtype T|K:V] [--k-dtype T] [--v-dtype T] [--threads T] [--isa
//             scalar|sse2|avx2|avx512]
//             [--compute exact|fast] [--kv-layout contiguous|paged:N]
// Loads layer I of the model in DIR (config.json + safetensors), feeds X [n × hidden] at
// positions 0 … n−1 (rows 0 … P−1 in one prefill, the rest one decode step each, cache
// capacity n) and writes the layer's output [n × hidden] to Y as float32. X [B × n × hidden]
// holds B independent sequences, each from position 0 with its own cache: each prefills its
// first P rows, then all B decode together, one batched step per row; Y is [B × n × hidden].
#include "tools/cmd_run.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/checked_math.hpp"
#include "engine/decoder_layer.hpp"
#include "engine/memory.hpp"
#include "engine/model/hf_config.hpp"
#include "engine/model/model_loader.hpp"
#include "engine/model/npy.hpp"
#include "engine/model/safetensors.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"
#include "tools/cli_limits.hpp"
#include "tools/cli_support.hpp"

namespace kvscope::cli {
namespace {

namespace fs = std::filesystem;

struct RunOptions {
  std::string model_dir;
  std::int64_t layer = -1;
  std::string input, output;
  std::int64_t prefill = -1;  // -1: all rows
  KvTypes kv_dtype = KvDtype::f32;
  KvLayout kv_layout;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string isa;
  std::string compute = "fast";
};

[[noreturn]] void fail(const std::string& where, const std::string& message) {
  throw std::runtime_error(where + ": " + message);
}

// The flags that need no file, checked (the files are checked as they are read).
struct RunChoices {
  Isa isa;
  ComputeMode compute;
  KvTypes kv_dtype;
};

RunChoices run_choices(const RunOptions& o) {
  if (o.threads < 1) fail("--threads", "must be at least 1, got " + std::to_string(o.threads));
  return {select_isa(o.isa), parse_compute_mode(o.compute), o.kv_dtype};
}

// Runs the layer and writes the output; every error names the file and the field.
void run(const RunOptions& o, const RunChoices& choices) {
  const auto [isa, compute, kv_dtype] = choices;

  const fs::path config_path = fs::path(o.model_dir) / "config.json";
  HfModelConfig hf = load_hf_config(config_path);
  if (o.layer < 0) fail("--layer", "must be at least 0, got " + std::to_string(o.layer));
  if (hf.num_hidden_layers >= 0 && o.layer >= hf.num_hidden_layers) {
    fail("--layer", std::to_string(o.layer) + " is out of range: " + config_path.string() +
                        " has num_hidden_layers " + std::to_string(hf.num_hidden_layers));
  }
  if (hf.first_moe_layer >= 0 && o.layer >= hf.first_moe_layer) {
    fail("--layer", std::to_string(o.layer) + " of " + config_path.string() +
                        " is a mixture-of-experts layer (first_k_dense_replace " +
                        std::to_string(hf.first_moe_layer) +
                        "): MoE is not implemented, only the dense layers before it run");
  }

  const NpyArray input = read_npy(o.input);
  const auto hidden = static_cast<std::uint64_t>(hf.shape.hidden_size);
  const std::vector<std::uint64_t>& shape = input.shape;
  const bool batched = shape.size() == 3;
  if ((shape.size() != 2 && !batched) || shape.back() != hidden || (batched && shape[0] == 0) ||
      shape[batched ? 1 : 0] == 0) {
    fail(o.input, "expected a float32 array [n, hidden_size = " + std::to_string(hidden) +
                      "] or [B, n, hidden_size] (B sequences) with B, n ≥ 1, got shape " +
                      shape_to_string(shape));
  }
  const std::size_t batch = batched ? shape[0] : 1;
  const std::size_t n = shape[batched ? 1 : 0];
  for (std::size_t i = 0; i < input.data.size(); ++i) {
    if (!std::isfinite(input.data[i])) {
      const std::size_t row = i / hidden;
      fail(o.input, (batched ? "sequence " + std::to_string(row / n) + ", " : std::string()) +
                        "row " + std::to_string(row % n) + ", column " +
                        std::to_string(i % hidden) + " is not finite (" +
                        std::to_string(input.data[i]) + ")");
    }
  }
  const std::size_t prefill = o.prefill < 0 ? n : static_cast<std::size_t>(o.prefill);
  if (prefill > n) {
    fail("--prefill", std::to_string(prefill) + " exceeds the " + std::to_string(n) + " rows of " +
                          (batched ? "each sequence of " : "") + o.input);
  }

  hf.shape.capacity = static_cast<std::int64_t>(n);
  const LayerConfig config = [&] {
    try {
      return LayerConfig(hf.shape);
    } catch (const std::exception& e) {
      fail(config_path.string(), e.what());
    }
  }();
  LayerWeights weights = load_layer_weights(o.model_dir, static_cast<std::size_t>(o.layer), config);
  const std::uint64_t weight_bytes = weights.bytes();
  const WeightDtype weights_dtype = weights.wo.dtype();  // every layer has o_proj
  const bool mapped = weights.wo.is_borrowed();
  DecoderLayer layer(config, std::move(weights),
                     {.kv_dtype = kv_dtype,
                      .isa = isa,
                      .threads = o.threads,
                      .compute = compute,
                      .kv_layout = o.kv_layout});

  require_memory(checked_mul(config.kv_cache_bytes(kv_dtype), batch, "the batch's KV caches"),
                 "the KV caches of the batch");
  if (config.is_mla() && batch > 1) {
    fail(o.input, "holds " + std::to_string(batch) +
                      " sequences, but batches of MLA layers are not implemented: give [n, "
                      "hidden_size]");
  }
  // Sequence 0 is the layer's own; the others get caches of their own.
  std::vector<LayerSequence> others;
  for (std::size_t b = 1; b < batch; ++b) others.push_back(layer.new_sequence());
  std::vector<LayerSequence*> step_batch{&layer.own_sequence()};
  for (LayerSequence& s : others) step_batch.push_back(&s);
  const float* in = input.data.data();
  std::vector<float> output(batch * n * hidden);
  const auto at = [&](std::size_t b, std::size_t row) { return (b * n + row) * hidden; };
  if (prefill > 0) {
    for (std::size_t b = 0; b < batch; ++b) {
      const std::vector<float> y = layer.prefill(*step_batch[b], in + at(b, 0), prefill);
      std::copy(y.begin(), y.end(), output.begin() + static_cast<std::ptrdiff_t>(at(b, 0)));
    }
  }
  std::vector<float> x(batch * hidden);
  for (std::size_t row = prefill; row < n; ++row) {  // one step: row `row` of every sequence
    for (std::size_t b = 0; b < batch; ++b)
      std::copy_n(in + at(b, row), hidden, x.begin() + static_cast<std::ptrdiff_t>(b * hidden));
    const std::vector<float> y = layer.decode_batch(x.data(), step_batch);
    for (std::size_t b = 0; b < batch; ++b) {
      std::copy_n(y.begin() + static_cast<std::ptrdiff_t>(b * hidden), hidden,
                  output.begin() + static_cast<std::ptrdiff_t>(at(b, row)));
    }
  }
  write_npy(o.output, input.shape, output);
  std::cout << "wrote " << o.output << " ["
            << (batched ? std::to_string(batch) + " × " : std::string()) << n << " × " << hidden
            << "]: layer " << o.layer << ", " << prefill << " rows prefilled, " << n - prefill
            << " decoded" << (batched ? " (" + std::to_string(batch) + " sequences a step)" : "")
            << ", isa " << to_string(isa) << ", kv " << to_string(kv_dtype) << ", attention "
            << (config.is_mla()
                    ? std::string("MLA (latent cache, absorbed decode)")
                    : "on " + std::string(to_string(attention_compute_unit(
                                  kv_dtype, isa, compute, config.n_heads() / config.n_kv_heads(),
                                  config.head_dim(), o.kv_layout.page_tokens))))
            << " in decode, " << o.threads << " threads\n"
            << "memory: peak RSS " << format_bytes(peak_rss_bytes()) << "; layer weights "
            << format_bytes(weight_bytes) << " (" << to_string(weights_dtype)
            << (mapped ? ", read in place from the mapped file" : ", copied") << "); KV cache "
            << (o.kv_layout.paged() ? format_bytes(layer.cache().bytes()) + " in " +
                                          to_string(o.kv_layout) + " pages held"
                                    : format_bytes(config.kv_cache_bytes(kv_dtype)))
            << (batched ? " per sequence" : "") << "\n";
}

}  // namespace

void add_run_command(CLI::App& app, OnParsed then) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run",
                                     "Run one decoder layer of a Hugging Face model (llama, "
                                     "mistral, qwen2, qwen3, deepseek_v2's dense layers) on an "
                                     ".npy input");
  cmd->add_option("--model", options->model_dir,
                  "Model directory: config.json and model.safetensors (or shards + index)")
      ->required();
  cmd->add_option("--layer", options->layer, "Layer index I (model.layers.I.*)")
      ->required()
      ->transform(integer_in(0));
  cmd->add_option("--input", options->input,
                  "Input X.npy, float32 [n, hidden_size], or [B, n, hidden_size]: B sequences")
      ->required();
  cmd->add_option("--output", options->output, "Output Y.npy, float32, X's shape")->required();
  cmd->add_option("--prefill", options->prefill,
                  "Rows through one prefill (of each sequence); the rest decode one at a time, "
                  "all sequences in one step (default: all)")
      ->transform(integer_in(0));
  add_kv_dtype_flag(*cmd, options->kv_dtype);
  add_kv_layout_flag(*cmd, options->kv_layout);
  cmd->add_option("--threads", options->threads, "Threads (at most 4 × the hardware threads)")
      ->capture_default_str()
      ->transform(thread_count());
  cmd->add_option("--isa", options->isa,
                  "scalar, sse2, avx2 or avx512 (default: $KVSCOPE_ISA, else the best)");
  cmd->add_option("--compute", options->compute,
                  "exact (widen every element to f32) | fast (int8 on AMX or VNNI, int4 "
                  "on VNNI, bf16 on AMX or AVX512-BF16, f16 on AMX as two bf16 parts, where the "
                  "CPU has them)")
      ->capture_default_str();
  cmd->callback([options, then] {
    const RunChoices choices = run_choices(*options);
    if (then == OnParsed::run) run(*options, choices);
  });
}

}  // namespace kvscope::cli
