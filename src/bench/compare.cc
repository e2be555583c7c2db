#include "bench/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>

namespace tachyon {
namespace {

struct MetricDef {
  std::string name, unit;
  bool lower_is_better;
  std::function<double(const BenchSummary&)> get;
  bool binned = false;  // a rate: its interval comes from resampling time bins, not requests
};

// Time bins of a run for the rate metrics: resampling requests cannot move a rate
// when every request succeeded, so the run is cut into kNumBins slices of its
// duration and the slices are resampled. Slice i holds the requests that finished
// in it and the output tokens that arrived in it.
constexpr int kNumBins = 20;
struct Bins {
  std::vector<double> requests, tokens, good;
};

Bins MakeBins(const RunFile& run, const Slo& slo) {
  Bins b{std::vector<double>(kNumBins, 0), std::vector<double>(kNumBins, 0), std::vector<double>(kNumBins, 0)};
  const double d = run.info.duration_seconds;
  if (d <= 0) return b;
  const bool has_slo = slo.ttft_seconds || slo.tpot_seconds || slo.e2e_seconds;
  double first = 1e300;
  for (const RequestRecord& r : run.records) first = std::min(first, r.start_seconds);
  for (const RequestRecord& r : run.records) {
    if (!r.ok) continue;
    auto slice = [&](double t) { return std::clamp(static_cast<int>((t - first) / d * kNumBins), 0, kNumBins - 1); };
    const int i = slice(r.start_seconds + r.e2e_seconds);
    b.requests[i] += 1;
    // Output tokens stream: each content chunk's share goes to the slice it arrived in.
    if (r.chunk_seconds.empty()) {
      b.tokens[i] += static_cast<double>(r.output_tokens);
    } else {
      const double per_chunk = static_cast<double>(r.output_tokens) / static_cast<double>(r.chunk_seconds.size());
      for (double c : r.chunk_seconds) b.tokens[slice(r.start_seconds + c)] += per_chunk;
    }
    if (has_slo && MeetsSlo(r, slo)) b.good[i] += 1;
  }
  return b;
}

double Resampled(const std::vector<double>& bins, double duration, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, bins.size() - 1);
  double sum = 0;
  for (size_t i = 0; i < bins.size(); ++i) sum += bins[pick(rng)];
  return duration > 0 ? sum / duration : 0;
}

std::vector<MetricDef> Metrics(bool with_goodput) {
  std::vector<MetricDef> defs;
  auto add_dist = [&](const std::string& name, Distribution BenchSummary::*field) {
    defs.push_back({name + " mean", "ms", true, [field](const BenchSummary& s) { return (s.*field).mean * 1e3; }});
    defs.push_back({name + " p50", "ms", true, [field](const BenchSummary& s) { return (s.*field).p50 * 1e3; }});
    defs.push_back({name + " p90", "ms", true, [field](const BenchSummary& s) { return (s.*field).p90 * 1e3; }});
    defs.push_back({name + " p95", "ms", true, [field](const BenchSummary& s) { return (s.*field).p95 * 1e3; }});
    defs.push_back({name + " p99", "ms", true, [field](const BenchSummary& s) { return (s.*field).p99 * 1e3; }});
  };
  add_dist("TTFT", &BenchSummary::ttft);
  add_dist("TPOT", &BenchSummary::tpot);
  add_dist("ITL", &BenchSummary::itl);
  add_dist("E2E", &BenchSummary::e2e);
  defs.push_back(
      {"request throughput", "req/s", false, [](const BenchSummary& s) { return s.request_throughput; }, true});
  defs.push_back(
      {"output throughput", "tok/s", false, [](const BenchSummary& s) { return s.output_token_throughput; }, true});
  if (with_goodput) {
    defs.push_back({"goodput", "req/s", false, [](const BenchSummary& s) { return s.goodput; }, true});
  }
  defs.push_back({"failed requests", "%", true, [](const BenchSummary& s) {
                    return s.num_requests ? 100.0 * static_cast<double>(s.num_requests - s.num_ok) /
                                                static_cast<double>(s.num_requests)
                                          : 0.0;
                  }});
  return defs;
}

std::vector<BenchSummary> Resamples(const RunFile& run, int n, const Slo& slo, std::mt19937_64& rng) {
  std::vector<BenchSummary> out;
  if (run.records.empty()) return out;
  std::uniform_int_distribution<size_t> pick(0, run.records.size() - 1);
  std::vector<const RequestRecord*> sample(run.records.size());
  for (int i = 0; i < n; ++i) {
    for (auto& p : sample) p = &run.records[pick(rng)];
    out.push_back(Summarize(sample, run.info.duration_seconds, slo));
  }
  return out;
}

std::string Number(double v) {
  char buf[32];
  if (std::fabs(v) >= 100) {
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  } else if (std::fabs(v) >= 10) {
    std::snprintf(buf, sizeof(buf), "%.1f", v);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f", v);
  }
  return buf;
}

}  // namespace

Comparison CompareRuns(const RunFile& a, const RunFile& b, int num_resamples, uint64_t seed, double min_effect) {
  // Both sides are judged against A's SLOs, so goodput means the same thing.
  const Slo slo = a.info.slo;
  const bool with_goodput = slo.ttft_seconds || slo.tpot_seconds || slo.e2e_seconds;
  const BenchSummary sa = Summarize(a.records, a.info.duration_seconds, slo);
  const BenchSummary sb = Summarize(b.records, b.info.duration_seconds, slo);
  std::mt19937_64 rng(seed);
  const std::vector<BenchSummary> ra = Resamples(a, num_resamples, slo, rng);
  const std::vector<BenchSummary> rb = Resamples(b, num_resamples, slo, rng);
  const Bins ba = MakeBins(a, slo), bb = MakeBins(b, slo);
  Comparison c;
  c.num_resamples = num_resamples;
  c.min_effect = min_effect;
  for (const MetricDef& def : Metrics(with_goodput)) {
    MetricComparison m{def.name, def.unit, def.lower_is_better, def.get(sa), def.get(sb)};
    m.ratio = m.a != 0 ? m.b / m.a : 0;
    std::vector<double> ratios;
    if (def.binned) {
      const std::vector<double> Bins::*field = def.unit == "tok/s"        ? &Bins::tokens
                                               : def.name == "goodput" ? &Bins::good
                                                                       : &Bins::requests;
      for (int i = 0; i < num_resamples; ++i) {
        const double x = Resampled(ba.*field, a.info.duration_seconds, rng);
        const double y = Resampled(bb.*field, b.info.duration_seconds, rng);
        if (x > 0) ratios.push_back(y / x);
      }
    }
    for (size_t i = 0; !def.binned && i < ra.size() && i < rb.size(); ++i) {
      const double x = def.get(ra[i]), y = def.get(rb[i]);
      if (x > 0) ratios.push_back(y / x);
    }
    // An interval only when almost every resample has a defined ratio.
    if (!ratios.empty() && ratios.size() * 10 >= ra.size() * 9) {
      m.has_ci = true;
      m.ci_low = Percentile(ratios, 0.025);
      m.ci_high = Percentile(ratios, 0.975);
      m.significant = m.ci_low > 1 || m.ci_high < 1;
      m.negligible = m.significant && std::fabs(m.ratio - 1) < min_effect;
    }
    c.metrics.push_back(m);
  }
  return c;
}

std::string RenderComparison(const Comparison& c, const std::string& label_a, const std::string& label_b,
                             bool markdown) {
  std::string out = markdown ? "A: " + label_a + "  \nB: " + label_b + "\n\n" : "A: " + label_a + "\nB: " + label_b + "\n\n";
  char line[512];
  const char* format = markdown ? "| %s | %s | %s | %s | %s | %s | %s |\n" : "%-28s %10s %10s %7s %8s  %-15s %s\n";
  std::snprintf(line, sizeof(line), format, "metric", "A", "B", "B/A", "change", "95% CI of B/A", "verdict");
  out += line;
  if (markdown) out += "|---|---|---|---|---|---|---|\n";
  for (const MetricComparison& m : c.metrics) {
    std::string ci = "-", verdict = "no interval";
    std::string change = "-";
    if (m.a != 0) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%+.0f%%", (m.ratio - 1) * 100);
      change = buf;
    }
    if (m.has_ci) {
      ci = "[" + Number(m.ci_low) + ", " + Number(m.ci_high) + "]";
      if (!m.significant) {
        verdict = "within noise";
      } else if (m.negligible) {
        verdict = "negligible";
      } else {
        const bool better = m.lower_is_better ? m.ratio < 1 : m.ratio > 1;
        verdict = better ? "B better" : "B worse";
      }
    }
    const std::string name = m.name + " (" + m.unit + ")";
    std::snprintf(line, sizeof(line), format, name.c_str(), Number(m.a).c_str(), Number(m.b).c_str(),
                  m.a != 0 ? Number(m.ratio).c_str() : "-", change.c_str(), ci.c_str(), verdict.c_str());
    out += line;
  }
  std::snprintf(line, sizeof(line),
                "\nB better / B worse: the bootstrap 95%% interval of B/A (%d resamples of each run's requests; of "
                "%d time slices for rates) excludes 1 and the change is at least %.0f%%; negligible: it excludes 1 "
                "but the change is smaller.\n",
                c.num_resamples, kNumBins, c.min_effect * 100);
  out += line;
  return out;
}

}  // namespace tachyon
