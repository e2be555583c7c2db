// The JSON file of one bench run (`tachyon bench --out run.json`): what was run,
// every request record and the summary. `bench compare` reads two of them back and
// recomputes everything from the records, so the file is the evidence.
//
// {"format": "tachyon-bench-run", "version": 1,
//  "info": {...RunInfo...}, "summary": {...BenchSummary, times in ms...},
//  "records": [{"session", "turn", "start_s", "ok", "error_kind", "error", "max_tokens",
//               "prompt_tokens", "output_tokens", "tokens_from_usage", "e2e_s",
//               "chunks_s": [arrival of each content chunk, s from send]}]}
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "bench/stats.h"

namespace tachyon {

struct RunInfo {
  std::string label;        // --label, else the file name
  std::string url, endpoint, model;
  std::string workload;     // Workload::Describe()
  std::string arrivals;     // "concurrency 4", "rate 2/s (gamma, burstiness 1)", "trace times"
  std::string started_at;   // UTC, ISO 8601
  std::string command;      // the command line
  uint64_t seed = 0;
  Slo slo;
  double duration_seconds = 0;
  bool stopped_by_duration = false;
  bool stopped_by_interrupt = false;  // Ctrl-C
  int64_t connections_opened = 0, connections_reused = 0;
  // The client's own load during the run (see ClientLoad): its CPU share of one
  // core and how late its loop ran ready work.
  double client_cpu_share = 0;
  double client_lag_p99_seconds = 0, client_lag_max_seconds = 0;
};

struct RunFile {
  RunInfo info;
  std::vector<RequestRecord> records;
  BenchSummary summary;  // recomputed from the records when read
};

std::string RunFileJson(const RunFile& run);
Status WriteRunFile(const std::string& path, const RunFile& run);
StatusOr<RunFile> ReadRunFile(const std::string& path);

}  // namespace tachyon
