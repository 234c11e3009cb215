#pragma once
// Flags and formatting shared by the kvscope subcommands.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/kv_layout.hpp"
#include "engine/layer_config.hpp"
#include "engine/measure/cold_caches.hpp"
#include "kernels/isa.hpp"
#include "kernels/kv_dtype.hpp"
#include "kernels/units/compute_unit.hpp"

namespace kvscope::cli {

// --heads, --kv-heads (default: --heads), --d-head, --tokens, --window, and --model PRESET
// or --config config.json, which fill the shape (explicit flags win). Values are checked later by
// the engine, so a bad one gets the engine's message naming it.
struct AttentionShapeFlags {
  std::int64_t heads = 32;
  std::int64_t kv_heads = 0;
  std::int64_t d_head = 128;
  std::int64_t tokens = 2000;
  std::int64_t layers = 1;
  std::string model;
  std::string config;            // a Hugging Face config.json
  std::int64_t hidden_size = 0;  // from --model or --config; 0 when neither gave it
  std::int64_t ffn_size = 0;
  std::int64_t window = 0;  // --window, else the preset's or config's sliding window; 0: none
  // MLA (a deepseek-v2 preset or config): latent and rope values cached per token; 0: not MLA.
  // d_head is then a query/key head's nope + rope.
  std::int64_t mla_latent = 0, mla_rope = 0;
  std::int64_t mla_v_head_dim = 0, mla_q_lora_rank = 0;  // for the report's full layer
  bool is_mla() const { return mla_latent > 0; }

  // Tokens a cache of `tokens` positions holds: all of them, or the last `window`.
  std::int64_t cached_tokens(std::int64_t tokens) const {
    return window > 0 && window < tokens ? window : tokens;
  }

  CLI::Option* kv_heads_option = nullptr;  // this struct's own, where add_to added them
  CLI::Option* window_option = nullptr;

  // --tokens, --kv-heads and --window are left out where a command takes them as lists;
  // `window` is then the model's.
  void add_to(CLI::App& app, bool with_layers, bool with_tokens_and_kv_heads = true);
  // Applies --model / --config and the --kv-heads default; call from the subcommand's callback.
  // An MLA model with --kv-heads, --d-head or --window is refused (they do not shape its cache).
  void resolve(const CLI::App& app);
  // Throws std::invalid_argument naming `command` for an MLA model (what it measures is a
  // K/V cache per kv head).
  void refuse_mla(std::string_view command) const;
};

// --threads (default: OpenMP's maximum), --isa (default: $KVSCOPE_ISA or the best),
// --compute exact|fast (default fast: the CPU's dot-product units where they pay).
struct ComputeFlags {
  int threads = 0;
  std::string isa;
  std::string compute = "fast";
  CLI::Option* threads_option = nullptr;

  void add_to(CLI::App& app);
  int resolved_threads() const;  // throws for < 1
  Isa resolved_isa() const { return select_isa(isa); }
  ComputeMode resolved_compute() const { return parse_compute_mode(compute); }
};

// Adds --kv-dtype T|K:V (both), --k-dtype and --v-dtype (one each) bound to `types`.
void add_kv_dtype_flag(CLI::App& app, KvTypes& types);
// --kv-layout contiguous|paged:N.
void add_kv_layout_flag(CLI::App& app, KvLayout& layout);

// --cache-state cold|warm (default cold) and --cold-method auto|copies|flush.
struct CacheStateFlags {
  CacheState state = CacheState::cold;
  ColdMethod method = ColdMethod::automatic;
  void add_to(CLI::App& app);
};

// "1.234 ms" style: picks s, ms or µs.
std::string format_seconds(double seconds);

}  // namespace kvscope::cli
