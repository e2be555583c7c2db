#include "audit/audit_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

namespace tachyon {
namespace {

// Keys printed by their own lines, not among a lever's figures.
const std::set<std::string> kProse = {"step", "lever", "recommendation", "config", "basis", "predicted_ttft_p95_ms",
                                      "expected_ttft_p95_gain_ms", "examples", "local_models", "method",
                                      "false_hit_basis", "note", "route_embedders", "small_classes"};

std::string Num(double v) {
  char out[32];
  if (std::fabs(v) >= 100 || v == std::floor(v)) {
    std::snprintf(out, sizeof(out), "%.0f", v);
  } else {
    std::snprintf(out, sizeof(out), "%.4g", v);
  }
  return out;
}

std::string Value(const nlohmann::json& v) {
  if (v.is_number()) return Num(v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

std::string Ms(const nlohmann::json& v) { return v.is_number() ? Num(v.get<double>()) + " ms" : "-"; }

std::string Escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// A bar chart as SVG: one bar per value, labels under every `label_every`th.
std::string Bars(const std::string& id, const std::string& title, const std::vector<double>& values,
                 const std::vector<std::string>& labels, const std::string& color, size_t label_every = 1) {
  const double width = 640, height = 200, left = 40, bottom = 40;
  const double top = *std::max_element(values.begin(), values.end(), [](double a, double b) { return a < b; });
  std::string svg = "<figure><figcaption>" + Escape(title) + "</figcaption><svg id=\"" + id +
                    "\" class=\"chart\" viewBox=\"0 0 " + Num(width) + " " + Num(height) +
                    "\" role=\"img\" aria-label=\"" + Escape(title) + "\">";
  svg += "<line x1=\"" + Num(left) + "\" y1=\"" + Num(height - bottom) + "\" x2=\"" + Num(width) + "\" y2=\"" +
         Num(height - bottom) + "\" stroke=\"#888\"/>";
  svg += "<text x=\"2\" y=\"14\" class=\"axis\">" + Num(top) + "</text>";
  const double step = (width - left) / static_cast<double>(std::max<size_t>(values.size(), 1));
  for (size_t i = 0; i < values.size(); ++i) {
    const double h = top > 0 ? (height - bottom - 10) * values[i] / top : 0;
    const double x = left + step * static_cast<double>(i);
    svg += "<rect x=\"" + Num(x + 1) + "\" y=\"" + Num(height - bottom - h) + "\" width=\"" +
           Num(std::max(1.0, step - 2)) + "\" height=\"" + Num(std::max(h, 0.5)) + "\" fill=\"" + color +
           "\"><title>" + Escape(i < labels.size() ? labels[i] : "") + ": " + Num(values[i]) + "</title></rect>";
    if (i < labels.size() && i % label_every == 0) {
      svg += "<text x=\"" + Num(x + step / 2) + "\" y=\"" + Num(height - bottom + 14) +
             "\" class=\"axis\" text-anchor=\"middle\">" + Escape(labels[i]) + "</text>";
    }
  }
  return svg + "</svg></figure>\n";
}

std::string Histogram(const std::string& id, const std::string& title, const nlohmann::json& h,
                      const std::string& color) {
  std::vector<double> counts;
  std::vector<std::string> labels;
  if (!h.contains("counts") || h["counts"].empty()) return "<p>" + Escape(title) + ": no data</p>\n";
  for (size_t i = 0; i < h["counts"].size(); ++i) {
    counts.push_back(h["counts"][i].get<double>());
    labels.push_back(Num(h["edges_ms"][i].get<double>()));
  }
  return Bars(id, title + " (requests per bin, log-spaced ms)", counts, labels, color, 8);
}

}  // namespace

std::string AuditText(const nlohmann::json& r, const std::string& source) {
  std::string out = "tachyon audit " + source + ": " + Value(r["requests"]) + " requests over " +
                    Value(r["duration_s"]) + " s (" + Value(r["lines"]) + " lines, " + Value(r["malformed_lines"]) +
                    " malformed, " + Value(r["other_endpoints"]) + " other endpoints, " + Value(r["refused"]) + " refused (4xx), " +
                    Value(r["requests_without_body"]) + " without a body)\n";
  out += "  TTFT p50 " + Ms(r["ttft_p50_ms"]) + ", p95 " + Ms(r["ttft_p95_ms"]) + "    E2E p50 " + Ms(r["e2e_p50_ms"]) +
         ", p95 " + Ms(r["e2e_p95_ms"]) + "    (TTFT of a whole answer = its E2E; prompt text in " +
         Value(r["prompt_units"]) + ")\n";
  for (const auto& [name, route] : r["routes"].items()) {
    out += "  route " + name + ": " + Value(route["requests"]) + " requests, TTFT p95 " + Ms(route["ttft_p95_ms"]) +
           ", E2E p95 " + Ms(route["e2e_p95_ms"]);
    if (route.contains("ttft_model")) {
      out += "; TTFT ~ " + Num(route["ttft_model"]["intercept_ms"].get<double>()) + " ms + " +
             Value(route["ttft_model"]["ms_per_prompt_token"]) + " ms per uncached prompt token";
    }
    out += "\n";
  }
  for (const auto& lever : r["levers"]) {
    out += "\n" + Value(lever["step"]) + ". " + Value(lever["lever"]);
    if (lever["expected_ttft_p95_gain_ms"].is_number()) {
      out += "  (TTFT p95 " + Ms(r["ttft_p95_ms"]) + " -> " + Ms(lever["predicted_ttft_p95_ms"]) + ", gain " +
             Ms(lever["expected_ttft_p95_gain_ms"]) + ")";
    }
    out += "\n   ";
    for (const auto& [key, v] : lever.items()) {
      if (kProse.count(key) || v.is_structured()) continue;
      out += " " + key + "=" + Value(v);
    }
    out += "\n   -> " + Value(lever["recommendation"]) + "\n";
    if (lever.contains("config") && !lever["config"].get<std::string>().empty()) {
      out += "      config: " + lever["config"].get<std::string>() + "\n";
    }
    if (lever.contains("method")) out += "      method: " + Value(lever["method"]) + "\n";
    if (lever.contains("basis")) out += "      basis: " + Value(lever["basis"]) + "\n";
  }
  out += "\nRanked by expected TTFT p95 gain:";
  for (const auto& name : r["ranking"]) {
    for (const auto& lever : r["levers"]) {
      if (lever["lever"] != name) continue;
      out += " " + name.get<std::string>() +
             (lever["expected_ttft_p95_gain_ms"].is_number() ? " (" + Ms(lever["expected_ttft_p95_gain_ms"]) + ")"
                                                             : std::string(" (-)"));
    }
  }
  return out + "\n";
}

std::string AuditHtml(const nlohmann::json& r, const std::string& source) {
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Tachyon traffic audit: " +
      Escape(source) +
      "</title>\n<style>body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:960px;color:#222}"
      "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;"
      "vertical-align:top}th{background:#f3f3f3}figure{margin:1em 0}figcaption{font-weight:600}"
      ".chart{width:100%;height:auto;background:#fafafa}.axis{font-size:10px;fill:#555}code{background:#f3f3f3;"
      "padding:1px 4px}.gain{font-weight:600}</style></head><body>\n";
  html += "<h1>Traffic audit</h1>\n<p>" + Escape(source) + ": <b>" + Value(r["requests"]) + "</b> requests over " +
          Value(r["duration_s"]) + " s. TTFT p50 " + Ms(r["ttft_p50_ms"]) + ", <b>p95 " + Ms(r["ttft_p95_ms"]) +
          "</b>; E2E p50 " + Ms(r["e2e_p50_ms"]) + ", <b>p95 " + Ms(r["e2e_p95_ms"]) +
          "</b>. A whole (non-streamed) answer's TTFT is its E2E.</p>\n";
  html += "<table id=\"routes\"><tr><th>route</th><th>requests</th><th>TTFT p50</th><th>TTFT p95</th><th>E2E p50</th>"
          "<th>E2E p95</th><th>TTFT model</th></tr>\n";
  for (const auto& [name, route] : r["routes"].items()) {
    std::string model = "-";
    if (route.contains("ttft_model")) {
      model = Num(route["ttft_model"]["intercept_ms"].get<double>()) + " ms + " +
              Value(route["ttft_model"]["ms_per_prompt_token"]) + " ms/token";
    }
    html += "<tr><td>" + Escape(name) + "</td><td>" + Value(route["requests"]) + "</td><td>" +
            Ms(route["ttft_p50_ms"]) + "</td><td>" + Ms(route["ttft_p95_ms"]) + "</td><td>" + Ms(route["e2e_p50_ms"]) +
            "</td><td>" + Ms(route["e2e_p95_ms"]) + "</td><td>" + Escape(model) + "</td></tr>\n";
  }
  html += "</table>\n<h2>Latency and load</h2>\n";
  const nlohmann::json& d = r["distributions"];
  html += Histogram("ttft-chart", "TTFT", d["ttft_ms"], "#3b7dd8");
  html += Histogram("e2e-chart", "E2E", d["e2e_ms"], "#d8873b");
  if (!d["arrivals"]["counts"].empty()) {
    std::vector<double> counts;
    std::vector<std::string> labels;
    const double bucket = d["arrivals"]["bucket_s"].get<double>();
    for (size_t i = 0; i < d["arrivals"]["counts"].size(); ++i) {
      counts.push_back(d["arrivals"]["counts"][i].get<double>());
      labels.push_back(Num(bucket * static_cast<double>(i)) + "s");
    }
    html += Bars("arrivals-chart", "Arrivals per " + Num(bucket) + " s", counts, labels, "#5a9e5a",
                 std::max<size_t>(1, counts.size() / 8));
  }
  // The shares each lever rests on.
  std::vector<double> shares;
  std::vector<std::string> names;
  auto share = [&](const nlohmann::json& lever, const char* key, const char* label) {
    if (lever.contains(key) && lever[key].is_number()) {
      shares.push_back(lever[key].get<double>() * 100);
      names.push_back(label);
    }
  };
  for (const auto& lever : r["levers"]) {
    share(lever, "non_streaming_share", "not streamed");
    share(lever, "exact_duplicate_share", "exact dup");
    share(lever, "semantic_duplicate_share", "semantic dup");
    share(lever, "small_task_share", "small task");
    share(lever, "removable_token_share", "removable tok");
    share(lever, "shared_prefix_token_share", "shared prefix");
    share(lever, "cached_token_share", "cached tok");
    share(lever, "long_output_share", "long output");
  }
  html += "<h2>What the traffic says</h2>\n";
  if (!shares.empty()) html += Bars("shares-chart", "Shares (%)", shares, names, "#8a5ad8");
  std::vector<double> gains;
  std::vector<std::string> ranked;
  for (const auto& name : r["ranking"]) {
    for (const auto& lever : r["levers"]) {
      if (lever["lever"] == name && lever["expected_ttft_p95_gain_ms"].is_number()) {
        gains.push_back(lever["expected_ttft_p95_gain_ms"].get<double>());
        ranked.push_back(name.get<std::string>());
      }
    }
  }
  if (!gains.empty() && *std::max_element(gains.begin(), gains.end()) > 0) {
    html += Bars("gains-chart", "Levers ranked by expected TTFT p95 gain (ms)", gains, ranked, "#d84b3b");
  } else {
    html += "<p id=\"gains-chart\">No lever predicts a TTFT p95 gain on this traffic.</p>\n";
  }
  html += "<h2>The levers, in the playbook's order</h2>\n<table id=\"levers\"><tr><th>#</th><th>lever</th>"
          "<th>figures</th><th>TTFT p95 after</th><th>recommendation</th></tr>\n";
  for (const auto& lever : r["levers"]) {
    std::string figures;
    for (const auto& [key, v] : lever.items()) {
      if (kProse.count(key) || v.is_structured()) continue;
      figures += Escape(key) + " = " + Escape(Value(v)) + "<br>";
    }
    std::string rec = Escape(Value(lever["recommendation"]));
    if (lever.contains("config") && !lever["config"].get<std::string>().empty()) {
      rec += "<br><code>" + Escape(lever["config"].get<std::string>()) + "</code>";
    }
    if (lever.contains("basis")) rec += "<br><small>" + Escape(Value(lever["basis"])) + "</small>";
    std::string after = Ms(lever["predicted_ttft_p95_ms"]);
    if (lever["expected_ttft_p95_gain_ms"].is_number()) {
      after += "<br><span class=\"gain\">-" + Ms(lever["expected_ttft_p95_gain_ms"]) + "</span>";
    }
    html += "<tr><td>" + Value(lever["step"]) + "</td><td>" + Escape(Value(lever["lever"])) + "</td><td>" + figures +
            "</td><td>" + after + "</td><td>" + rec + "</td></tr>\n";
  }
  html += "</table>\n";
  // The page checks itself once laid out (the e2e test reads this attribute from a headless browser).
  html += "<script>window.addEventListener('load',function(){var n=0;document.querySelectorAll('svg.chart rect')"
          ".forEach(function(r){if(r.getBBox().width>0)n++;});document.body.setAttribute('data-bars',n);});"
          "</script>\n</body></html>\n";
  return html;
}

}  // namespace tachyon
