// What a bench run shows people: a terminal summary and a self-contained HTML
// page (inline SVG plots, no script, nothing fetched) with the summary table, the
// CDFs of TTFT and E2E, TTFT over the run, and throughput over the run.
#pragma once

#include <string>

#include "bench/run_file.h"

namespace tachyon {

std::string RenderTerminalSummary(const RunFile& run);
std::string RenderHtmlReport(const RunFile& run);

}  // namespace tachyon
