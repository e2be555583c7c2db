// `tachyon audit FILE...`: a traffic capture (`tachyon serve --capture`) read
// lever by lever in the latency playbook's order (audit/traffic_audit.h).
#pragma once

#include <CLI/CLI.hpp>

namespace tachyon::cli {

void AddAuditCommand(CLI::App& app, int* exit_code);

}  // namespace tachyon::cli
