#include "server/stats_report.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "base/query_string.h"

namespace tachyon {
namespace {

using Filter = MetricsWindow::Filter;
using nlohmann::json;

// A quantile in milliseconds, or null when the window holds no observation.
json Millis(const MetricsWindow::View& v, const std::string& name, double q, const Filter& filter) {
  const double seconds = v.Quantile(name, q, filter);
  return seconds < 0 ? json(nullptr) : json(seconds * 1e3);
}

json PerSecond(const MetricsWindow::View& v, double n) { return v.empty() ? json(nullptr) : json(n / v.seconds()); }

json Ratio(double num, double den) { return den > 0 ? json(num / den) : json(nullptr); }

json Quantiles(const MetricsWindow::View& v, const std::string& name, const Filter& f) {
  return {{"p50", Millis(v, name, 0.5, f)}, {"p95", Millis(v, name, 0.95, f)}, {"p99", Millis(v, name, 0.99, f)}};
}

json RouteStats(const MetricsWindow::View& v, const std::vector<MetricsWindow::View>& steps, const std::string& route,
                const std::string& status) {
  const Filter f = {{"route", route}};
  json r = {{"route", route}, {"status", status}};
  const double requests = v.Increase("tachyon:route_requests_total", f);
  r["requests"] = requests;
  r["requests_per_second"] = PerSecond(v, requests);
  r["status_per_second"] = {{"ok", PerSecond(v, v.Increase("tachyon:request_success_total", f))},
                            {"error", PerSecond(v, v.Increase("tachyon:request_error_total", f))},
                            {"cancelled", PerSecond(v, v.Increase("tachyon:request_cancelled_total", f))}};
  json errors = json::object();
  for (const std::string& kind : v.LabelValues("tachyon:request_error_total", "kind", f)) {
    const double n = v.Increase("tachyon:request_error_total", {{"route", route}, {"kind", kind}});
    if (n > 0) errors[kind] = n;
  }
  r["errors"] = errors;
  r["ttft_ms"] = Quantiles(v, "tachyon:time_to_first_token_seconds", f);
  r["e2e_ms"] = Quantiles(v, "tachyon:e2e_request_latency_seconds", f);
  r["itl_ms"] = Quantiles(v, "tachyon:inter_token_latency_seconds", f);
  json cache = json::object();
  for (const std::string& kind : v.LabelValues("tachyon:cache_lookups_total", "kind", f)) {
    json c = json::object();
    for (const char* result : {"hit", "miss", "bypass"}) {
      c[result] = v.Increase("tachyon:cache_lookups_total", {{"route", route}, {"kind", kind}, {"result", result}});
    }
    c["hit_rate"] = Ratio(c["hit"].get<double>(), c["hit"].get<double>() + c["miss"].get<double>());
    cache[kind] = c;
  }
  r["cache"] = cache;
  r["cached_tokens"] = v.Increase("tachyon:prompt_cached_tokens_total", f);
  r["trimmed_tokens"] = v.Increase("tachyon:trimmed_tokens_total", f);
  json router = json::object();
  for (const std::string& klass : v.LabelValues("tachyon:router_decisions_total", "class", f)) {
    router[klass] = v.Increase("tachyon:router_decisions_total", {{"route", route}, {"class", klass}});
  }
  r["router"] = router;
  json t = json::array(), rps = json::array(), ttft = json::array(), e2e = json::array();
  for (const MetricsWindow::View& s : steps) {
    t.push_back(s.end());
    rps.push_back(PerSecond(s, s.Increase("tachyon:route_requests_total", f)));
    ttft.push_back(Millis(s, "tachyon:time_to_first_token_seconds", 0.95, f));
    e2e.push_back(Millis(s, "tachyon:e2e_request_latency_seconds", 0.95, f));
  }
  r["timeline"] = {{"t", t}, {"requests_per_second", rps}, {"ttft_p95_ms", ttft}, {"e2e_p95_ms", e2e}};
  return r;
}

json EngineStats(const MetricsWindow::View& v, const std::vector<MetricsWindow::View>& steps,
                 const std::string& backend) {
  const Filter f = {{"backend", backend}};
  json e = {{"backend", backend}};
  const std::vector<std::string> models = v.LabelValues("tachyon:kv_cache_usage_perc", "model_name", f);
  e["model"] = models.empty() ? "" : models.front();
  e["kv_usage"] = v.Last("tachyon:kv_cache_usage_perc", f);
  e["running"] = v.Last("tachyon:num_requests_running", f);
  e["waiting"] = v.Last("tachyon:num_requests_waiting", f);
  auto batch = [&](const MetricsWindow::View& s) {
    return Ratio(s.Increase("tachyon:engine_decode_sequences_total", f),
                 s.Increase("tachyon:engine_decode_steps_total", f));
  };
  e["batch_size"] = batch(v);
  e["prefix_hit_rate"] = Ratio(v.Increase("tachyon:prefix_cache_hits_total", f),
                               v.Increase("tachyon:prefix_cache_queries_total", f));
  e["spec_acceptance"] = Ratio(v.Increase("tachyon:spec_decode_num_accepted_tokens_total", f),
                               v.Increase("tachyon:spec_decode_num_draft_tokens_total", f));
  e["generation_tokens_per_second"] = PerSecond(v, v.Increase("tachyon:generation_tokens_total", f));
  json t = json::array(), kv = json::array(), sizes = json::array();
  for (const MetricsWindow::View& s : steps) {
    t.push_back(s.end());
    kv.push_back(s.Last("tachyon:kv_cache_usage_perc", f));
    sizes.push_back(batch(s));
  }
  e["timeline"] = {{"t", t}, {"kv_usage", kv}, {"batch_size", sizes}};
  return e;
}

}  // namespace

std::vector<std::string> StatsFamilies() {
  return {"tachyon:route_requests_total",
          "tachyon:request_success_total",
          "tachyon:request_error_total",
          "tachyon:request_cancelled_total",
          "tachyon:request_rejected_total",
          "tachyon:time_to_first_token_seconds",
          "tachyon:e2e_request_latency_seconds",
          "tachyon:inter_token_latency_seconds",
          "tachyon:cache_lookups_total",
          "tachyon:prompt_cached_tokens_total",
          "tachyon:trimmed_tokens_total",
          "tachyon:router_decisions_total",
          "tachyon:backend_ttft_ewma_seconds",
          "tachyon:upstream_first_byte_seconds",
          "tachyon:backend_errors_total",
          "tachyon:kv_cache_usage_perc",
          "tachyon:num_requests_running",
          "tachyon:num_requests_waiting",
          "tachyon:engine_decode_steps_total",
          "tachyon:engine_decode_sequences_total",
          "tachyon:prefix_cache_queries_total",
          "tachyon:prefix_cache_hits_total",
          "tachyon:spec_decode_num_draft_tokens_total",
          "tachyon:spec_decode_num_accepted_tokens_total",
          "tachyon:generation_tokens_total"};
}

bool ParseStatsQuery(const std::string& query, StatsQuery* out, std::string* error) {
  for (const auto& [key, value] : ParseQuery(query)) {
    double* target = key == "window" ? &out->window_seconds : key == "step" ? &out->step_seconds : nullptr;
    if (target == nullptr) {
      *error = "unknown parameter '" + key + "' (window and step, in seconds)";
      return false;
    }
    char* rest = nullptr;
    const double n = std::strtod(value.c_str(), &rest);
    if (value.empty() || *rest != '\0' || !std::isfinite(n) || n <= 0 || n > 86400) {
      *error = "'" + key + "' must be a number of seconds above 0";
      return false;
    }
    *target = n;
  }
  return true;
}

json StatsReport(const MetricsWindow& window, const json& health, const StatsQuery& query, double uptime_seconds) {
  const double longest = window.interval_seconds() * static_cast<double>(window.max_samples() - 1);
  const double seconds = std::min(query.window_seconds, longest);
  double step = query.step_seconds > 0 ? query.step_seconds : seconds / 60;
  step = std::max(window.interval_seconds(), std::round(step / window.interval_seconds()) * window.interval_seconds());
  const MetricsWindow::View v = window.Window(seconds);
  const std::vector<MetricsWindow::View> steps = window.Steps(seconds, step);

  json report = {{"object", "tachyon.stats"},
                 {"time", v.end()},
                 {"window_seconds", v.seconds()},
                 {"step_seconds", step},
                 {"uptime_seconds", uptime_seconds},
                 {"status", health.value("status", "")}};
  report["rejected_per_second"] = PerSecond(v, v.Increase("tachyon:request_rejected_total"));
  json routes = json::array();
  if (health.contains("routes")) {
    for (const auto& [name, status] : health["routes"].items()) {
      routes.push_back(RouteStats(v, steps, name, status.is_string() ? status.get<std::string>() : ""));
    }
  }
  report["routes"] = routes;
  json backends = json::array(), engines = json::array();
  if (health.contains("backends")) {
    for (const auto& [name, b] : health["backends"].items()) {
      const Filter f = {{"backend", name}};
      const bool has_ewma = !v.LabelValues("tachyon:backend_ttft_ewma_seconds", "backend", f).empty();
      const double ewma = v.Last("tachyon:backend_ttft_ewma_seconds", f);
      backends.push_back({{"name", name},
                          {"kind", b.value("kind", "")},
                          {"state", b.value("state", "")},
                          {"in_flight", b.value("in_flight", 0)},
                          {"ttft_ewma_ms", has_ewma && ewma > 0 ? json(ewma * 1e3) : json(nullptr)},
                          {"first_byte_p95_ms", Millis(v, "tachyon:upstream_first_byte_seconds", 0.95, f)},
                          {"errors", v.Increase("tachyon:backend_errors_total", f)}});
      if (!v.LabelValues("tachyon:kv_cache_usage_perc", "backend", f).empty()) {
        engines.push_back(EngineStats(v, steps, name));
      }
    }
  }
  report["backends"] = backends;
  report["engines"] = engines;
  return report;
}

}  // namespace tachyon
