// Benchmark statistics with the definitions of `vllm bench serve` (DESIGN.md),
// so that figures compare:
//   TTFT  send -> first streamed content chunk, per request
//   TPOT  (E2E - TTFT) / (output tokens - 1), per request with 2+ output tokens
//   ITL   every gap between consecutive streamed chunks, pooled over requests
//   E2E   send -> last byte
//   goodput: completed requests per second meeting every given SLO.
// Percentiles interpolate linearly between order statistics (numpy's default).
// Pure: records in, numbers out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tachyon {

struct RequestRecord {
  int64_t session = 0;                  // index of the workload's session, and turn in it
  int turn = 0;
  double start_seconds = 0;             // send time, from the start of the run
  bool ok = false;
  std::string error_kind;               // "http_429", "timeout", "connect", ... when !ok
  std::string error_message;            // what the server or the network said
  int64_t max_tokens = 0;               // what was asked for
  std::vector<double> chunk_seconds;    // arrival of each content chunk, from the request's send
  double e2e_seconds = 0;               // send -> last byte
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool tokens_from_usage = true;        // false: counted from the stream
};

struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
  int64_t count = 0;
};

struct Slo {
  std::optional<double> ttft_seconds, tpot_seconds, e2e_seconds;
};

struct BenchSummary {
  int64_t num_requests = 0, num_ok = 0;
  std::map<std::string, int64_t> errors_by_kind;
  Distribution ttft, tpot, itl, e2e;  // seconds
  double duration_seconds = 0;
  double request_throughput = 0;       // completed requests / s
  double output_token_throughput = 0;  // output tokens / s
  double goodput = 0;                  // requests / s meeting every SLO (0 without SLOs)
  int64_t total_prompt_tokens = 0, total_output_tokens = 0;
  bool all_tokens_from_usage = true;
};

// The p-quantile (0..1) of values, linear between order statistics; 0 when empty.
double Percentile(std::vector<double> values, double p);
Distribution Distribute(const std::vector<double>& values);

// TTFT of a record, or nullopt when it streamed nothing.
std::optional<double> Ttft(const RequestRecord& r);
// TPOT of a record, or nullopt below 2 output tokens.
std::optional<double> Tpot(const RequestRecord& r);

// Whether a successful request meets every SLO that is set (a TPOT SLO does not
// apply to a request with one output token).
bool MeetsSlo(const RequestRecord& r, const Slo& slo);

BenchSummary Summarize(const std::vector<RequestRecord>& records, double duration_seconds, const Slo& slo);
// The same over a selection of records (a bootstrap resample holds some twice).
BenchSummary Summarize(const std::vector<const RequestRecord*>& records, double duration_seconds, const Slo& slo);

}  // namespace tachyon
