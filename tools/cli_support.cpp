#include "tools/cli_support.hpp"

#include <omp.h>

#include <cstdio>
#include <stdexcept>

#include "engine/model/hf_config.hpp"
#include "engine/model/model_presets.hpp"
#include "tools/cli_limits.hpp"

namespace kvscope::cli {

void AttentionShapeFlags::add_to(CLI::App& app, bool with_layers, bool with_tokens_and_kv_heads) {
  app.add_option("--heads", heads, "query heads")->capture_default_str()->transform(integer_in(1));
  if (with_tokens_and_kv_heads) {
    kv_heads_option = app.add_option("--kv-heads", kv_heads, "kv heads (default: --heads; 1 = MQA)")
                          ->transform(integer_in(1));
  }
  app.add_option("--d-head", d_head, "head size d_head")
      ->capture_default_str()
      ->transform(integer_in(1));
  if (with_tokens_and_kv_heads) {
    app.add_option("--tokens", tokens, "tokens in the cache")
        ->capture_default_str()
        ->transform(integer_in(1));
  }
  if (with_layers) {
    app.add_option("--layers", layers, "decoder layers")
        ->capture_default_str()
        ->transform(integer_in(1));
  }
  std::string names;
  for (const ModelPreset& p : model_presets())
    names += (names.empty() ? "" : " | ") + std::string(p.name);
  app.add_option("--model", model, "model preset: " + names);
  app.add_option("--config", config, "a Hugging Face config.json to take the shape from")
      ->excludes("--model");
  if (with_tokens_and_kv_heads) {
    window_option = app.add_option("--window", window,
                                   "sliding window W: the cache keeps only the last W tokens "
                                   "(default: the model's, else none)");
  }
}

void AttentionShapeFlags::resolve(const CLI::App& app) {
  ModelPreset from{};
  if (!model.empty()) {
    from = find_model_preset(model);
  } else if (!config.empty()) {
    const HfModelConfig hf = load_hf_config(config);
    const MlaShape& m = hf.shape.mla;
    from = {.n_heads = hf.shape.n_heads,
            .n_kv_heads = hf.shape.n_kv_heads,
            .head_dim =
                m.kv_lora_rank > 0 ? m.qk_nope_head_dim + m.qk_rope_head_dim : hf.shape.head_dim,
            .n_layers = hf.num_hidden_layers,
            .hidden_size = hf.shape.hidden_size,
            .ffn_size = hf.shape.ffn_size,
            .window = hf.shape.sliding_window,
            .kv_lora_rank = m.kv_lora_rank,
            .qk_rope_head_dim = m.qk_rope_head_dim,
            .v_head_dim = m.v_head_dim,
            .q_lora_rank = m.q_lora_rank};
  }
  mla_latent = from.kv_lora_rank;
  mla_rope = from.qk_rope_head_dim;
  mla_v_head_dim = from.v_head_dim;
  mla_q_lora_rank = from.q_lora_rank;
  if (is_mla()) {
    for (const char* flag : {"--kv-heads", "--d-head", "--window"}) {
      if (app.get_option_no_throw(flag) != nullptr && app.count(flag) > 0) {
        throw std::invalid_argument(std::string(flag) + " does not apply to " +
                                    (model.empty() ? config : model) +
                                    ": multi-head latent attention (MLA) caches one latent of " +
                                    std::to_string(mla_latent) + " and one rope key of " +
                                    std::to_string(mla_rope) + " values per token for all heads");
      }
    }
  }
  const bool explicit_window = window_option != nullptr && window_option->count() > 0;
  if (!explicit_window) window = from.window;
  if (explicit_window && window < 1) {
    throw std::invalid_argument("--window must be at least 1, got " + std::to_string(window));
  }
  const bool explicit_kv_heads = kv_heads_option != nullptr && kv_heads_option->count() > 0;
  if (from.n_heads > 0) {
    if (app.count("--heads") == 0) heads = from.n_heads;
    if (!explicit_kv_heads) kv_heads = from.n_kv_heads;
    if (app.count("--d-head") == 0) d_head = from.head_dim;
    if (from.n_layers > 0 && app.get_option_no_throw("--layers") != nullptr &&
        app.count("--layers") == 0) {
      layers = from.n_layers;
    }
    hidden_size = from.hidden_size;
    ffn_size = from.ffn_size;
  } else if (!explicit_kv_heads) {
    kv_heads = heads;
  }
}

void AttentionShapeFlags::refuse_mla(std::string_view command) const {
  if (!is_mla()) return;
  throw std::invalid_argument(std::string(model.empty() ? config : model) +
                              " uses multi-head latent attention (MLA): " + std::string(command) +
                              " measures K/V caches per kv head, not a latent cache");
}

void ComputeFlags::add_to(CLI::App& app) {
  threads_option =
      app.add_option("--threads", threads,
                     "OpenMP threads (default: all cores; at most 4 × the hardware threads)")
          ->transform(thread_count());
  app.add_option("--isa", isa, "scalar | sse2 | avx2 | avx512 (default: $KVSCOPE_ISA or the best)");
  app.add_option("--compute", compute,
                 "exact (widen every element to f32) | fast (int8 on AMX or VNNI, int4 on "
                 "VNNI, bf16 on AMX or AVX512-BF16, f16 on AMX as two bf16 parts, where the CPU "
                 "has them)")
      ->capture_default_str();
}

int ComputeFlags::resolved_threads() const {
  if (threads_option == nullptr || threads_option->count() == 0) return omp_get_max_threads();
  if (threads < 1) {
    throw std::invalid_argument("--threads must be at least 1, got " + std::to_string(threads));
  }
  return threads;
}

void add_kv_dtype_flag(CLI::App& app, KvTypes& types) {
  // CLI11 runs the callbacks in the order the options are added: --k-dtype and --v-dtype
  // override what --kv-dtype set.
  app.add_option_function<std::string>(
      "--kv-dtype", [&types](const std::string& name) { types = parse_kv_types(name); },
      "KV cache element type of keys and values: f32 | f16 | bf16 | int8 | int4, or K:V "
      "(default f32)");
  app.add_option_function<std::string>(
      "--k-dtype", [&types](const std::string& name) { types.k = parse_kv_dtype(name); },
      "element type of the keys (overrides --kv-dtype)");
  app.add_option_function<std::string>(
      "--v-dtype", [&types](const std::string& name) { types.v = parse_kv_dtype(name); },
      "element type of the values (overrides --kv-dtype)");
}

void add_kv_layout_flag(CLI::App& app, KvLayout& layout) {
  app.add_option_function<std::string>(
      "--kv-layout", [&layout](const std::string& name) { layout = parse_kv_layout(name); },
      "KV cache layout: contiguous (default) | paged:N (pages of N tokens from a shared pool, "
      "read through a page table)");
}

void CacheStateFlags::add_to(CLI::App& app) {
  app.add_option_function<std::string>(
      "--cache-state", [this](const std::string& name) { state = parse_cache_state(name); },
      "cold (default): every step reads K/V bytes that are in no cache level, as in a model "
      "whose other layers evict them; warm: the same caches re-read step after step");
  app.add_option_function<std::string>(
      "--cold-method", [this](const std::string& name) { method = parse_cold_method(name); },
      "how cold is reached: copies (cycle caches until 4 x every last-level cache the threads "
      "reach, on AMD each thread's own, lies between two reads of one), flush (clflushopt after "
      "each step), auto (default: copies when they fit in half the memory, else flush)");
}

std::string format_seconds(double s) {
  char text[32];
  if (s >= 1.0)
    std::snprintf(text, sizeof text, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(text, sizeof text, "%.3f ms", s * 1e3);
  else
    std::snprintf(text, sizeof text, "%.2f µs", s * 1e6);
  return text;
}

}  // namespace kvscope::cli
