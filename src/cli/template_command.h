// `tachyon template render`: a chat template rendered with Tachyon's Jinja
// interpreter, as a server would render it.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddTemplateCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
