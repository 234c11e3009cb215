#pragma once
// `kvscope run`: one decoder layer of a Hugging Face model on an .npy input.
#include <CLI/CLI.hpp>

namespace kvscope::cli {

void add_run_command(CLI::App& app);

}  // namespace kvscope::cli
