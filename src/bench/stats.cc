#include "bench/stats.h"

#include <algorithm>
#include <numeric>

namespace tachyon {


namespace {

double SortedPercentile(const std::vector<double>& sorted, double p) {
  const double rank = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

// Sorts once for all percentiles (the bootstrap of `bench compare` calls this a lot).
Distribution DistributeInPlace(std::vector<double>& values) {
  Distribution d;
  d.count = static_cast<int64_t>(values.size());
  if (values.empty()) return d;
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  std::sort(values.begin(), values.end());
  d.p50 = SortedPercentile(values, 0.50);
  d.p90 = SortedPercentile(values, 0.90);
  d.p95 = SortedPercentile(values, 0.95);
  d.p99 = SortedPercentile(values, 0.99);
  return d;
}

}  // namespace

Distribution Distribute(const std::vector<double>& values) {
  std::vector<double> copy = values;
  return DistributeInPlace(copy);
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return SortedPercentile(values, p);
}

std::optional<double> Ttft(const RequestRecord& r) {
  if (r.chunk_seconds.empty()) return std::nullopt;
  return r.chunk_seconds.front();
}

std::optional<double> Tpot(const RequestRecord& r) {
  std::optional<double> ttft = Ttft(r);
  if (!ttft || r.output_tokens < 2) return std::nullopt;
  return (r.e2e_seconds - *ttft) / static_cast<double>(r.output_tokens - 1);
}

bool MeetsSlo(const RequestRecord& r, const Slo& slo) {
  const std::optional<double> t = Ttft(r), p = Tpot(r);
  return r.ok && (!slo.ttft_seconds || (t && *t <= *slo.ttft_seconds)) &&
         (!slo.tpot_seconds || !p || *p <= *slo.tpot_seconds) &&
         (!slo.e2e_seconds || r.e2e_seconds <= *slo.e2e_seconds);
}

BenchSummary Summarize(const std::vector<RequestRecord>& records, double duration_seconds, const Slo& slo) {
  std::vector<const RequestRecord*> pointers;
  pointers.reserve(records.size());
  for (const RequestRecord& r : records) pointers.push_back(&r);
  return Summarize(pointers, duration_seconds, slo);
}

BenchSummary Summarize(const std::vector<const RequestRecord*>& records, double duration_seconds, const Slo& slo) {
  BenchSummary s;
  s.num_requests = static_cast<int64_t>(records.size());
  s.duration_seconds = duration_seconds;
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t good = 0;
  const bool has_slo = slo.ttft_seconds || slo.tpot_seconds || slo.e2e_seconds;
  for (const RequestRecord* record : records) {
    const RequestRecord& r = *record;
    if (!r.ok) {
      s.errors_by_kind[r.error_kind.empty() ? "unknown" : r.error_kind]++;
      continue;
    }
    ++s.num_ok;
    s.total_prompt_tokens += r.prompt_tokens;
    s.total_output_tokens += r.output_tokens;
    s.all_tokens_from_usage = s.all_tokens_from_usage && r.tokens_from_usage;
    e2e.push_back(r.e2e_seconds);
    std::optional<double> t = Ttft(r), p = Tpot(r);
    if (t) ttft.push_back(*t);
    if (p) tpot.push_back(*p);
    for (size_t i = 1; i < r.chunk_seconds.size(); ++i) itl.push_back(r.chunk_seconds[i] - r.chunk_seconds[i - 1]);
    if (has_slo && MeetsSlo(r, slo)) ++good;
  }
  s.ttft = DistributeInPlace(ttft);
  s.tpot = DistributeInPlace(tpot);
  s.itl = DistributeInPlace(itl);
  s.e2e = DistributeInPlace(e2e);
  if (duration_seconds > 0) {
    s.request_throughput = static_cast<double>(s.num_ok) / duration_seconds;
    s.output_token_throughput = static_cast<double>(s.total_output_tokens) / duration_seconds;
    s.goodput = static_cast<double>(good) / duration_seconds;
  }
  return s;
}

}  // namespace tachyon
