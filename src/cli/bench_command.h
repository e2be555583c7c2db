// `tachyon bench`: load generator against any OpenAI-compatible server, and
// `tachyon bench compare A.json B.json`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tachyon::cli {

// command_line: the whole command, kept in the run file.
void AddBenchCommand(CLI::App& app, int* exit_code, const std::string& command_line);

}  // namespace tachyon::cli
