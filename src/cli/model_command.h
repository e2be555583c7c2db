// `tachyon model gen | info`.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

// Adds the `model` command and its subcommands to `app`; each subcommand's
// callback stores its process exit code in *exit_code.
void AddModelCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
