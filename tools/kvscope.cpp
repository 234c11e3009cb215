// kvscope: what the attention of a transformer decoder costs on this CPU.
#include <cstdio>
#include <exception>
#include <string>

#include "engine/decode_timing.hpp"
#include "engine/kv_footprint.hpp"
#include "engine/memory.hpp"
#include "tools/cli_support.hpp"
#include "tools/commands.hpp"

namespace {

// With no subcommand: the cache size of MHA, GQA-8 and MQA at 32 heads × 128 × 2,000 tokens,
// and a short decode measurement of each.
void print_default_summary() {
  using namespace kvscope;
  const int threads = cli::ComputeFlags{}.resolved_threads();
  const Isa isa = select_isa();
  std::printf("kvscope: one decode step of attention, 32 query heads × d_head 128 × 2,000 tokens, "
              "f32 cache, isa %s, %d thread%s\n\n",
              std::string(to_string(isa)).c_str(), threads, threads == 1 ? "" : "s");
  std::printf("%-8s %9s %30s %14s %14s %10s\n", "variant", "kv heads", "KV cache per layer",
              "step median", "tokens/s", "GB/s");
  for (std::int64_t kv_heads : {32, 8, 1}) {
    const DecodeTimingRequest request{.n_heads = 32, .n_kv_heads = kv_heads, .head_dim = 128,
                                      .tokens = 2000, .isa = isa, .threads = threads, .steps = 10};
    const DecodeTiming t = time_attention_decode(request);
    std::printf("%-8s %9lld %30s %14s %14.1f %10.2f\n", attention_variant(32, kv_heads).c_str(),
                static_cast<long long>(kv_heads), format_bytes(t.bytes_read_per_step).c_str(),
                cli::format_seconds(t.median_s).c_str(), t.tokens_per_s, t.gbps);
  }
  std::printf("\nEvery decode step re-reads the whole cache, so fewer kv heads mean fewer bytes and "
              "faster steps.\nMore: kvscope size --help, kvscope decode --help, kvscope trace.\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvscope: KV cache size, decode-step cost and attention, step by step"};
  app.require_subcommand(0, 1);
  kvscope::cli::add_size_command(app);
  kvscope::cli::add_trace_command(app);
  kvscope::cli::add_decode_command(app);
  try {
    app.parse(argc, argv);
    if (app.get_subcommands().empty()) print_default_summary();
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kvscope: %s (see --help)\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvscope: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
