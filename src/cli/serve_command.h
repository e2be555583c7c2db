// `tachyon serve`.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddServeCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
