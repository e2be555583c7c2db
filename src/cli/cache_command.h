// `tachyon cache` (calibrate, eval).
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddCacheCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
