// `tachyon embed`.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddEmbedCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
