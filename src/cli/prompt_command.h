// `tachyon prompt audit`: what a system prompt spends its tokens on, and what
// the trimmer would remove.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddPromptCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
