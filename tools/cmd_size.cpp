// `kvscope size`: how many bytes a KV cache takes.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/kv_footprint.hpp"
#include "engine/memory.hpp"
#include "tools/cli_limits.hpp"
#include "tools/cli_support.hpp"
#include "tools/commands.hpp"

namespace kvscope::cli {
namespace {

struct SizeFlags {
  AttentionShapeFlags shape;
  std::int64_t batch = 1;
  KvTypes dtype = KvDtype::f32;
  bool json = false;
};

// The variant's name: MHA, GQA-n, MQA, or MLA.
std::string variant(const AttentionShapeFlags& s) {
  return s.is_mla() ? "MLA" : attention_variant(s.heads, s.kv_heads);
}

void print_size(const SizeFlags& f, const KvFootprint& fp) {
  const auto& s = f.shape;
  if (s.is_mla()) {
    std::printf(
        "KV cache: multi-head latent attention (MLA), %lld query heads of d_head %lld sharing "
        "one latent of %lld and one rope key of %lld values per token, %s tokens, %lld layer%s, "
        "batch %lld, %s\n\n",
        static_cast<long long>(s.heads), static_cast<long long>(s.d_head),
        static_cast<long long>(s.mla_latent), static_cast<long long>(s.mla_rope),
        with_commas(s.tokens).c_str(), static_cast<long long>(s.layers), s.layers == 1 ? "" : "s",
        static_cast<long long>(f.batch), std::string(to_string(f.dtype)).c_str());
  } else {
    std::printf(
        "KV cache: %lld query heads, %lld kv heads (%s), d_head %lld, %s tokens, %lld layer%s, "
        "batch %lld, %s\n\n",
        static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads),
        attention_variant(s.heads, s.kv_heads).c_str(), static_cast<long long>(s.d_head),
        with_commas(s.tokens).c_str(), static_cast<long long>(s.layers), s.layers == 1 ? "" : "s",
        static_cast<long long>(f.batch), std::string(to_string(f.dtype)).c_str());
  }
  if (s.window > 0) {
    std::printf(
        "Sliding window %s: the cache keeps at most the last %s tokens (a ring per kv "
        "head), here %s.\n\n",
        with_commas(s.window).c_str(), with_commas(s.window).c_str(),
        with_commas(s.cached_tokens(s.tokens)).c_str());
  }
  std::printf("%-8s %22s %36s %36s\n", "", "per token, one layer", "per layer", "all layers");
  const auto layers = static_cast<std::uint64_t>(s.layers);
  auto row = [&](const char* name, std::uint64_t per_token, std::uint64_t total) {
    std::printf("%-8s %16s bytes %36s %36s\n", name, with_commas(per_token).c_str(),
                format_bytes(total / layers).c_str(), format_bytes(total).c_str());
  };
  if (s.is_mla()) {
    row("latent", fp.k_bytes_per_token_layer, fp.k_bytes);
    row("rope", fp.v_bytes_per_token_layer, fp.v_bytes);
  } else {
    row("K", fp.k_bytes_per_token_layer, fp.k_bytes);
    row("V", fp.v_bytes_per_token_layer, fp.v_bytes);
    row("scales", fp.scale_bytes_per_token_layer, fp.scale_bytes);
  }
  row("total", fp.bytes_per_token_layer, fp.total_bytes);
  if (s.window > 0 && s.tokens >= s.window) {
    std::printf(
        "\nPast the window a new token replaces the oldest: the cache and the bytes a "
        "decode step reads stay at %s.\n",
        format_bytes(fp.total_bytes).c_str());
  } else {
    std::printf(
        "\nEach new token adds %s bytes over all layers; a decode step re-reads all of it.\n",
        with_commas(fp.bytes_per_token).c_str());
  }
}

nlohmann::json size_json(const SizeFlags& f, const KvFootprint& fp) {
  return {{"n_heads", f.shape.heads},
          {"n_kv_heads", f.shape.kv_heads},
          {"variant", variant(f.shape)},
          {"kv_lora_rank", f.shape.mla_latent},    // MLA only, else 0
          {"qk_rope_head_dim", f.shape.mla_rope},  // MLA only, else 0
          {"head_dim", f.shape.d_head},
          {"tokens", f.shape.tokens},
          {"window", f.shape.window},
          {"cached_tokens", f.shape.cached_tokens(f.shape.tokens)},
          {"layers", f.shape.layers},
          {"batch", f.batch},
          {"kv_dtype", to_string(f.dtype)},
          {"k_dtype", to_string(f.dtype.k)},
          {"v_dtype", to_string(f.dtype.v)},
          {"k_bytes", fp.k_bytes},
          {"v_bytes", fp.v_bytes},
          {"scale_bytes", fp.scale_bytes},
          {"total_bytes", fp.total_bytes},
          {"bytes_per_token", fp.bytes_per_token},
          {"bytes_per_token_layer", fp.bytes_per_token_layer},
          {"bytes_per_layer", fp.bytes_per_layer}};
}

}  // namespace

void add_size_command(CLI::App& app, OnParsed then) {
  auto flags = std::make_shared<SizeFlags>();
  CLI::App* cmd = app.add_subcommand("size", "KV cache memory for a model shape");
  flags->shape.add_to(*cmd, /*with_layers=*/true);
  cmd->add_option("--batch", flags->batch, "sequences in the batch")
      ->capture_default_str()
      ->transform(integer_in(1));
  add_kv_dtype_flag(*cmd, flags->dtype);
  cmd->add_flag("--json", flags->json, "print a JSON object");
  cmd->callback([flags, cmd, then] {
    flags->shape.resolve(*cmd);
    const auto& s = flags->shape;
    if (s.heads >= 1 && s.kv_heads >= 1 && s.heads % s.kv_heads != 0) {
      throw std::invalid_argument("--heads (" + std::to_string(s.heads) +
                                  ") must be a multiple of --kv-heads (" +
                                  std::to_string(s.kv_heads) + ")");
    }
    if (s.heads < 1)
      throw std::invalid_argument("--heads must be at least 1, got " + std::to_string(s.heads));
    const KvFootprint fp = kv_footprint({.n_kv_heads = s.kv_heads,
                                         .head_dim = s.d_head,
                                         .tokens = s.cached_tokens(s.tokens),
                                         .layers = s.layers,
                                         .batch = flags->batch,
                                         .dtype = flags->dtype,
                                         .mla_latent = s.mla_latent,
                                         .mla_rope = s.mla_rope});
    if (then == OnParsed::validate_only) return;
    if (flags->json) {
      std::cout << size_json(*flags, fp).dump(2) << "\n";
    } else {
      print_size(*flags, fp);
    }
  });
}

}  // namespace kvscope::cli
