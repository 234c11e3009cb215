#pragma once
// Each kvscope subcommand registers itself on the CLI11 app; its callback does the work
// and throws std::exception with a message naming the problem on bad input.
#include <CLI/CLI.hpp>

namespace kvscope::cli {

void add_size_command(CLI::App& app);
void add_trace_command(CLI::App& app);
void add_decode_command(CLI::App& app);
void add_report_command(CLI::App& app);

}  // namespace kvscope::cli
