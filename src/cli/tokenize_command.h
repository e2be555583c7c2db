// `tachyon tokenize`.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddTokenizeCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
