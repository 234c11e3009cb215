#pragma once
// Each kvscope subcommand registers itself on the CLI11 app; its callback parses and
// validates its flags into a request, then does the work, and throws std::exception with a
// message naming the problem on bad input.
#include <CLI/CLI.hpp>

namespace kvscope::cli {

// What a callback does with a valid request: run it, or stop there (the command-line
// fuzzer, fuzz/command_line_fuzz.cpp, checks parsing and validation without measuring).
enum class OnParsed { run, validate_only };

void add_size_command(CLI::App& app, OnParsed then = OnParsed::run);
void add_trace_command(CLI::App& app, OnParsed then = OnParsed::run);
void add_decode_command(CLI::App& app, OnParsed then = OnParsed::run);
void add_report_command(CLI::App& app, OnParsed then = OnParsed::run);
void add_run_command(CLI::App& app, OnParsed then = OnParsed::run);

// Every subcommand, as `kvscope` offers them.
void add_commands(CLI::App& app, OnParsed then = OnParsed::run);

}  // namespace kvscope::cli
