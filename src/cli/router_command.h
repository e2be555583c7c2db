// `tachyon router` (train, eval): the task classifier of a `classify` route.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddRouterCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
