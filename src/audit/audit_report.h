// The audit's report (TrafficAudit::Finish's JSON) for people: a terminal text
// and a self-contained HTML page (inline CSS and SVG charts, no network): TTFT
// and E2E distributions, arrivals over time, the duplicate, prefix and other
// shares, and the levers ranked by expected TTFT p95 gain.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tachyon {

std::string AuditText(const nlohmann::json& report, const std::string& source);
std::string AuditHtml(const nlohmann::json& report, const std::string& source);

}  // namespace tachyon
