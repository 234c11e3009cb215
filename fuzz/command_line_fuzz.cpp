// libFuzzer target: the kvscope command line. The input is argv, one argument per line
// (at most 24 of them); every subcommand parses and validates it into its request and stops
// there (OnParsed::validate_only), so nothing is measured, allocated for a cache or written.
// Bad input must end in a CLI11 error or a std::exception with a message, never a crash, a
// signal, a sanitizer report or another exception type.
//
// Arguments holding '/' are dropped, so a --config file can only be one in the working
// folder, never a device or a pipe (reading /dev/zero would never end); in validate_only no
// other flag's file is opened and nothing is written.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "tools/commands.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args{"kvscope"};
  std::string arg;
  for (std::size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      if (arg.find('/') == std::string::npos) args.push_back(arg);
      arg.clear();
      if (args.size() > 24) break;
    } else {
      arg += static_cast<char>(data[i]);
    }
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  CLI::App app{"kvscope"};
  kvscope::cli::add_commands(app, kvscope::cli::OnParsed::validate_only);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  } catch (const std::exception& e) {
    if (std::string(e.what()).empty()) __builtin_trap();  // every error says what was wrong
  }
  return 0;
}
