// The document of GET /v1/stats, what /dashboard draws: per route, backend and
// local engine, figures over the last minutes computed from the metrics'
// window (rates from counters, p50/p95 from the histograms' buckets), and a
// timeline of steps for the charts. docs/observability.md lists every field.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "obs/metrics_window.h"

namespace tachyon {

// Sampled once a second, 301 samples: five minutes of history.
constexpr double kStatsIntervalSeconds = 1;
constexpr size_t kStatsSamples = 301;

// The metric families the window samples for the report.
std::vector<std::string> StatsFamilies();

struct StatsQuery {
  double window_seconds = 300;  // clamped to what the ring holds
  double step_seconds = 0;      // timeline steps; 0: window / 60, at least the sampling interval
};

// Parses "window=60&step=5" (seconds); unknown keys are refused, as bad numbers are.
bool ParseStatsQuery(const std::string& query, StatsQuery* out, std::string* error);

// health: Gateway::Health's body (routes and their state, backends with kind,
// breaker state and in-flight count): which routes and backends exist now.
nlohmann::json StatsReport(const MetricsWindow& window, const nlohmann::json& health, const StatsQuery& query,
                           double uptime_seconds);

}  // namespace tachyon
