// kvscope: what the attention of a transformer decoder costs on this CPU.
#include <cstdio>
#include <exception>
#include <vector>

#include "tools/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"kvscope: KV cache size, decode-step cost and attention, step by step"};
  kvscope::cli::add_commands(app);
  // No arguments: the default report.
  std::vector<char*> args(argv, argv + argc);
  char report[] = "report";
  if (argc == 1) args.push_back(report);
  try {
    app.parse(static_cast<int>(args.size()), args.data());
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
