// `tachyon run`.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddRunCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
