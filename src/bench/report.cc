#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace tachyon {
namespace {

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string Ms(double seconds) {
  const double ms = seconds * 1e3;
  return Format(ms >= 100 ? "%.0f" : ms >= 10 ? "%.1f" : "%.2f", ms);
}

std::string Count(int64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0 && s[i - 1] != '-') out.push_back(',');
    out.push_back(s[i]);
  }
  return out;
}

// "12% of one core, loop lag p99 0.05 ms (max 0.30 ms)".
std::string ClientLoadText(const RunInfo& i) {
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%.0f%% of one core, loop lag p99 %.2f ms (max %.2f ms)", i.client_cpu_share * 100,
                i.client_lag_p99_seconds * 1e3, i.client_lag_max_seconds * 1e3);
  return buf;
}

// A loop this busy adds its own delay to what it measures: above 80% of its core,
// ready work waits for the loop (and a p99 lag of 5 ms is in every percentile).
bool ClientSaturated(const RunInfo& i) { return i.client_cpu_share > 0.8 || i.client_lag_p99_seconds > 0.005; }

const char* kSaturatedWarning =
    "the client was busy: its own delay is in these latencies (fewer streams per client, or a client per core)";

std::string SloText(const Slo& slo) {
  std::string out;
  auto add = [&](const char* name, const std::optional<double>& v) {
    if (!v) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + " <= " + Ms(*v) + " ms";
  };
  add("TTFT", slo.ttft_seconds);
  add("TPOT", slo.tpot_seconds);
  add("E2E", slo.e2e_seconds);
  return out;
}

// The first error message of each kind, for the error table.
std::map<std::string, std::string> FirstErrors(const RunFile& run) {
  std::map<std::string, std::string> out;
  for (const RequestRecord& r : run.records) {
    if (!r.ok && !out.count(r.error_kind)) out[r.error_kind] = r.error_message;
  }
  return out;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// ---- SVG plots ----

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;
  bool dots = false;  // scatter instead of a line
};

// 1, 2, 5 x 10^k steps giving about `target` ticks over [lo, hi].
double NiceStep(double span, int target) {
  if (span <= 0) return 1;
  const double raw = span / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) return m * mag;
  }
  return 10 * mag;
}

std::string TickLabel(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e6) return Format("%.3gM", v / 1e6);
  if (a >= 1e4) return Format("%.3gk", v / 1e3);
  return Format("%g", std::round(v * 1000) / 1000);
}

std::string Plot(const std::string& title, const std::string& x_label, const std::string& y_label,
                 const std::vector<Series>& series) {
  const double w = 560, h = 320, left = 64, right = 16, top = 30, bottom = 46;
  double x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  bool any = false;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      if (!any) {
        x0 = x1 = x;
        y1 = y;
        any = true;
      }
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y1 = std::max(y1, y);
    }
  }
  x0 = std::min(x0, 0.0);
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= y0) y1 = y0 + 1;
  const double xs = NiceStep(x1 - x0, 6), ys = NiceStep(y1 - y0, 5);
  x1 = std::ceil(x1 / xs) * xs;
  y1 = std::ceil(y1 / ys) * ys;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (w - left - right); };
  auto py = [&](double y) { return h - bottom - (y - y0) / (y1 - y0) * (h - top - bottom); };
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + Format("%.0f", w) + " " +
                    Format("%.0f", h) + "\" width=\"" + Format("%.0f", w) + "\" height=\"" + Format("%.0f", h) +
                    "\" role=\"img\" aria-label=\"" + HtmlEscape(title) + "\">\n";
  svg += "<text x=\"" + Format("%.0f", left) + "\" y=\"18\" class=\"title\">" + HtmlEscape(title) + "</text>\n";
  for (double x = x0; x <= x1 + xs * 1e-9; x += xs) {
    svg += "<line x1=\"" + Format("%.1f", px(x)) + "\" y1=\"" + Format("%.1f", py(y0)) + "\" x2=\"" +
           Format("%.1f", px(x)) + "\" y2=\"" + Format("%.1f", py(y1)) + "\" class=\"grid\"/>";
    svg += "<text x=\"" + Format("%.1f", px(x)) + "\" y=\"" + Format("%.1f", py(y0) + 16) +
           "\" text-anchor=\"middle\">" + TickLabel(x) + "</text>\n";
  }
  for (double y = y0; y <= y1 + ys * 1e-9; y += ys) {
    svg += "<line x1=\"" + Format("%.1f", px(x0)) + "\" y1=\"" + Format("%.1f", py(y)) + "\" x2=\"" +
           Format("%.1f", px(x1)) + "\" y2=\"" + Format("%.1f", py(y)) + "\" class=\"grid\"/>";
    svg += "<text x=\"" + Format("%.1f", left - 6) + "\" y=\"" + Format("%.1f", py(y) + 4) +
           "\" text-anchor=\"end\">" + TickLabel(y) + "</text>\n";
  }
  svg += "<text x=\"" + Format("%.1f", (left + w - right) / 2) + "\" y=\"" + Format("%.0f", h - 8) +
         "\" text-anchor=\"middle\">" + HtmlEscape(x_label) + "</text>\n";
  svg += "<text transform=\"translate(14 " + Format("%.1f", (top + h - bottom) / 2) +
         ") rotate(-90)\" text-anchor=\"middle\">" + HtmlEscape(y_label) + "</text>\n";
  double legend_x = w - right - 8;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    const Series& s = *it;
    if (s.dots) {
      for (const auto& [x, y] : s.points) {
        svg += "<circle cx=\"" + Format("%.1f", px(x)) + "\" cy=\"" + Format("%.1f", py(y)) +
               "\" r=\"2.2\" fill=\"" + s.color + "\" fill-opacity=\"0.6\"/>";
      }
    } else if (!s.points.empty()) {
      svg += "<polyline fill=\"none\" stroke-width=\"1.8\" stroke=\"" + s.color + "\" points=\"";
      for (const auto& [x, y] : s.points) svg += Format("%.1f", px(x)) + "," + Format("%.1f", py(y)) + " ";
      svg += "\"/>";
    }
    if (series.size() > 1) {
      svg += "<text x=\"" + Format("%.1f", legend_x) + "\" y=\"" + Format("%.0f", top + 4) +
             "\" text-anchor=\"end\" style=\"fill:" + s.color + "\">" + HtmlEscape(s.name) + "</text>";
      legend_x -= 10 + 7.0 * static_cast<double>(s.name.size());
    }
    svg += "\n";
  }
  if (!any) {
    svg += "<text x=\"" + Format("%.1f", w / 2) + "\" y=\"" + Format("%.1f", h / 2) +
           "\" text-anchor=\"middle\">no data</text>\n";
  }
  svg += "</svg>\n";
  return svg;
}

// The empirical CDF, thinned to at most ~400 points, in ms.
std::vector<std::pair<double, double>> Cdf(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  std::vector<std::pair<double, double>> out;
  const size_t n = seconds.size();
  const size_t step = std::max<size_t>(1, n / 400);
  for (size_t i = 0; i < n; i += step) out.emplace_back(seconds[i] * 1e3, 100.0 * static_cast<double>(i + 1) / n);
  if (n > 0) out.emplace_back(seconds.back() * 1e3, 100.0);
  return out;
}

}  // namespace

std::string RenderTerminalSummary(const RunFile& run) {
  const RunInfo& i = run.info;
  const BenchSummary& s = run.summary;
  std::string out;
  char line[512];
  out += "\n" + i.workload + "\n";
  std::snprintf(line, sizeof(line), "target    %s (%s)  model %s\n", i.url.c_str(), i.endpoint.c_str(),
                i.model.empty() ? "(server default)" : i.model.c_str());
  out += line;
  std::snprintf(line, sizeof(line), "arrivals  %s  duration %.2f s%s%s\n", i.arrivals.c_str(), s.duration_seconds,
                i.stopped_by_duration ? " (stopped by --duration)" : "",
                i.stopped_by_interrupt ? " (stopped by Ctrl-C)" : "");
  out += line;
  std::snprintf(line, sizeof(line), "client    %s\n", ClientLoadText(i).c_str());
  out += line;
  if (ClientSaturated(i)) out += std::string("warning   ") + kSaturatedWarning + "\n";
  std::snprintf(line, sizeof(line), "requests  %s ok, %s failed\n", Count(s.num_ok).c_str(),
                Count(s.num_requests - s.num_ok).c_str());
  out += line;
  std::snprintf(line, sizeof(line), "tokens    prompt %s, output %s%s\n", Count(s.total_prompt_tokens).c_str(),
                Count(s.total_output_tokens).c_str(),
                s.all_tokens_from_usage ? " (from the server's usage)"
                                        : " (some counted from the stream: the server sent no usage)");
  out += line;
  std::snprintf(line, sizeof(line), "throughput %.2f req/s, %.1f output tok/s", s.request_throughput,
                s.output_token_throughput);
  out += line;
  const std::string slo = SloText(i.slo);
  if (!slo.empty()) {
    std::snprintf(line, sizeof(line), ", goodput %.2f req/s (%s)", s.goodput, slo.c_str());
    out += line;
  }
  out += "\n\n";
  std::snprintf(line, sizeof(line), "%-6s %10s %10s %10s %10s %10s %8s\n", "ms", "mean", "p50", "p90", "p95", "p99",
                "count");
  out += line;
  auto row = [&](const char* name, const Distribution& d) {
    std::snprintf(line, sizeof(line), "%-6s %10s %10s %10s %10s %10s %8s\n", name, Ms(d.mean).c_str(),
                  Ms(d.p50).c_str(), Ms(d.p90).c_str(), Ms(d.p95).c_str(), Ms(d.p99).c_str(),
                  Count(d.count).c_str());
    out += line;
  };
  row("TTFT", s.ttft);
  row("TPOT", s.tpot);
  row("ITL", s.itl);
  row("E2E", s.e2e);
  if (!s.errors_by_kind.empty()) {
    out += "\nerrors\n";
    const auto first = FirstErrors(run);
    for (const auto& [kind, n] : s.errors_by_kind) {
      std::string message = first.count(kind) ? first.at(kind) : "";
      if (message.size() > 160) message = message.substr(0, 157) + "...";
      std::snprintf(line, sizeof(line), "  %-20s %6s  %s\n", kind.c_str(), Count(n).c_str(), message.c_str());
      out += line;
    }
  }
  return out;
}

namespace {

// The run's description, the latency table and the errors, as HTML tables.
std::string HtmlTables(const RunFile& run) {
  const RunInfo& i = run.info;
  const BenchSummary& s = run.summary;
  std::string h;
  h += "<table class=\"meta\">";
  auto meta = [&](const std::string& k, const std::string& v) {
    h += "<tr><th class=\"l\">" + HtmlEscape(k) + "</th><td>" + HtmlEscape(v) + "</td></tr>";
  };
  meta("workload", i.workload);
  meta("target", i.url + " (" + i.endpoint + "), model " + (i.model.empty() ? "(server default)" : i.model));
  meta("arrivals", i.arrivals);
  meta("started", i.started_at);
  meta("duration", Format("%.2f s", s.duration_seconds) + (i.stopped_by_duration ? " (stopped by --duration)" : "") +
                       (i.stopped_by_interrupt ? " (stopped by Ctrl-C)" : ""));
  meta("requests", Count(s.num_ok) + " ok, " + Count(s.num_requests - s.num_ok) + " failed");
  meta("tokens", "prompt " + Count(s.total_prompt_tokens) + ", output " + Count(s.total_output_tokens) +
                     (s.all_tokens_from_usage ? " (server's usage)" : " (partly counted from the stream)"));
  std::string tput = Format("%.2f req/s, ", s.request_throughput) + Format("%.1f output tok/s", s.output_token_throughput);
  if (!SloText(i.slo).empty()) tput += Format(", goodput %.2f req/s", s.goodput) + " (" + SloText(i.slo) + ")";
  meta("throughput", tput);
  meta("client", ClientLoadText(i) + (ClientSaturated(i) ? std::string(": ") + kSaturatedWarning : ""));
  meta("command", i.command);
  h += "</table>\n<table><tr><th class=\"l\">ms</th><th>mean</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th>"
       "<th>count</th></tr>\n";
  auto row = [&](const char* name, const Distribution& d) {
    h += std::string("<tr><td class=\"l\">") + name + "</td><td>" + Ms(d.mean) + "</td><td>" + Ms(d.p50) +
         "</td><td>" + Ms(d.p90) + "</td><td>" + Ms(d.p95) + "</td><td>" + Ms(d.p99) + "</td><td>" +
         Count(d.count) + "</td></tr>\n";
  };
  row("TTFT", s.ttft);
  row("TPOT", s.tpot);
  row("ITL", s.itl);
  row("E2E", s.e2e);
  h += "</table>\n";
  if (!s.errors_by_kind.empty()) {
    h += "<table><tr><th class=\"l\">error</th><th>requests</th><th class=\"l\">first message</th></tr>\n";
    const auto first = FirstErrors(run);
    for (const auto& [kind, n] : s.errors_by_kind) {
      h += "<tr><td class=\"l\">" + HtmlEscape(kind) + "</td><td>" + Count(n) + "</td><td class=\"l\">" +
           HtmlEscape(first.count(kind) ? first.at(kind) : "") + "</td></tr>\n";
    }
    h += "</table>\n";
  }
  return h;
}

// The plots: CDFs of TTFT and E2E, TTFT over the run, throughput over the run.
std::string HtmlPlots(const RunFile& run) {
  std::string h;
  std::vector<double> ttft, e2e;
  Series ttft_time{"TTFT", "#1f77b4", {}, true};
  double end = 0;
  for (const RequestRecord& r : run.records) {
    end = std::max(end, r.start_seconds + r.e2e_seconds);
    if (!r.ok) continue;
    e2e.push_back(r.e2e_seconds);
    if (auto t = Ttft(r)) {
      ttft.push_back(*t);
      ttft_time.points.emplace_back(r.start_seconds, *t * 1e3);
    }
  }
  // Throughput over the run in one-second bins (finer for short runs): content chunks
  // carry the tokens (shared out evenly when the server packs several in one), finished
  // requests count at their last byte.
  const double bin = end > 60 ? 1.0 : end > 10 ? 0.5 : 0.25;
  const size_t num_bins = static_cast<size_t>(std::ceil(std::max(end, bin) / bin));
  std::vector<double> tokens(num_bins, 0), done(num_bins, 0);
  for (const RequestRecord& r : run.records) {
    if (!r.ok) continue;
    const double per_chunk = r.chunk_seconds.empty()
                                 ? 0
                                 : static_cast<double>(r.output_tokens) / static_cast<double>(r.chunk_seconds.size());
    for (double c : r.chunk_seconds) tokens[std::min(num_bins - 1, static_cast<size_t>((r.start_seconds + c) / bin))] += per_chunk;
    done[std::min(num_bins - 1, static_cast<size_t>((r.start_seconds + r.e2e_seconds) / bin))] += 1;
  }
  Series tok{"output tok/s", "#d62728", {}, false}, req{"requests/s", "#2ca02c", {}, false};
  for (size_t b = 0; b < num_bins; ++b) {
    tok.points.emplace_back((static_cast<double>(b) + 0.5) * bin, tokens[b] / bin);
    req.points.emplace_back((static_cast<double>(b) + 0.5) * bin, done[b] / bin);
  }
  h += "<div class=\"plots\">\n";
  h += Plot("CDF of TTFT", "TTFT (ms)", "% of requests", {{"TTFT", "#1f77b4", Cdf(ttft), false}});
  h += Plot("CDF of E2E latency", "E2E (ms)", "% of requests", {{"E2E", "#ff7f0e", Cdf(e2e), false}});
  h += Plot("TTFT over the run", "send time (s)", "TTFT (ms)", {ttft_time});
  h += Plot("Output throughput over the run", "time (s)", "output tokens / s", {tok});
  h += Plot("Completed requests over the run", "time (s)", "requests / s", {req});
  h += "</div>\n";
  return h;
}

}  // namespace

std::string RenderHtmlReport(const RunFile& run) {
  const RunInfo& i = run.info;
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>tachyon bench: " +
       HtmlEscape(i.label) + "</title>\n";
  h += "<style>body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1200px}"
       "h1{font-size:20px}table{border-collapse:collapse;margin:8px 0 16px}"
       "td,th{border:1px solid #ccc;padding:3px 10px;text-align:right}th{background:#f2f2f2}"
       "td.l,th.l{text-align:left}.plots{display:flex;flex-wrap:wrap;gap:12px}"
       "svg{border:1px solid #ddd;background:#fff}svg text{font:11px sans-serif;fill:#333}"
       "svg text.title{font-size:13px;font-weight:bold}svg line.grid{stroke:#e6e6e6}"
       ".meta td{text-align:left}</style></head><body>\n";
  h += "<h1>tachyon bench: " + HtmlEscape(i.label) + "</h1>\n";
  h += HtmlTables(run);
  h += HtmlPlots(run);
  h += "<p>Definitions as in vllm bench serve: TTFT from send to the first content chunk, TPOT = (E2E - "
       "TTFT) / (output tokens - 1), ITL every gap between content chunks, E2E from send to the last byte.</p>\n";
  h += "</body></html>\n";
  return h;
}

}  // namespace tachyon
