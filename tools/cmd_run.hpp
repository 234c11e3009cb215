#pragma once
// `kvscope run`: one decoder layer of a Hugging Face model on an .npy input
// (add_run_command is declared with the others in tools/commands.hpp).
#include "tools/commands.hpp"
