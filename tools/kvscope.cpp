// Stub main for the models branch only: the lead's tools/kvscope.cpp replaces it and adds
// the one call kvscope::cli::add_run_command(app).
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "tools/cmd_run.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvscope"};
  app.require_subcommand(1);
  kvscope::cli::add_run_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    std::cerr << "kvscope: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
