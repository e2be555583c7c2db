// `tachyon config check FILE`: reads a gateway config as `tachyon serve --config`
// would (every key, the variables its *_env keys name, the files it points at, a
// classify route's classifier) and prints what it describes, without serving.
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddConfigCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
