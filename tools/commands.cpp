#include "tools/commands.hpp"

namespace kvscope::cli {

void add_commands(CLI::App& app, OnParsed then) {
  app.require_subcommand(0, 1);
  add_report_command(app, then);
  add_size_command(app, then);
  add_trace_command(app, then);
  add_decode_command(app, then);
  add_run_command(app, then);
}

}  // namespace kvscope::cli
