// BenchRunner: sends a Workload to an OpenAI-compatible server and records, for
// every request, when each streamed content chunk arrived (steady clock).
//
// One HttpClient event loop on the calling thread drives every stream; nothing
// else runs on it, so what the client adds is one socket read plus one JSON parse
// per chunk (see benchmarks/bench_client_overhead.cc for the figure).
//
// Arrivals: sessions become ready at the trace's times, at Poisson / gamma times
// for a request rate, or all at once; at most `concurrency` requests are in flight
// (0: no cap), so concurrency alone is a closed loop. A conversation's next turn is
// ready when its previous turn ends, and carries the history with the real reply.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.h"
#include "bench/workload.h"
#include "http/http_client.h"

namespace tachyon {

struct BenchTarget {
  HttpUrl url;                   // base: "http://127.0.0.1:8000" (+ "/v1" added) or ".../v1"
  std::string endpoint = "completions";  // or "chat"
  std::string model;
  std::string api_key;
  std::vector<std::pair<std::string, std::string>> headers;
  bool ignore_eos = false;
  double temperature = 0;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body
  double timeout_seconds = 600;  // per request, connect to last byte
  // false: "stream": false, one JSON answer per request, whose TTFT is its E2E
  // (for measuring whole-answer traffic: classification, extraction, gateways).
  bool stream = true;
};

struct BenchProgress {
  int64_t num_done = 0, num_failed = 0, num_in_flight = 0, num_planned = 0;
  double elapsed_seconds = 0;
};

struct BenchRunOptions {
  BenchTarget target;
  int concurrency = 0;  // 0: no cap
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1;
  bool use_trace_times = true;  // when the workload has them and no rate is set
  double duration_seconds = 0;  // > 0: no new request after this long
  uint64_t seed = 0;
  std::function<void(const BenchProgress&)> on_progress;  // every progress_interval and at the end
  double progress_interval_seconds = 0.25;
  // Ctrl-C ends the run early: no new request, the ones in flight are recorded as
  // failed with kind "interrupted", and the results so far are kept.
  bool stop_on_interrupt = false;
};

// How busy the client itself was: a saturated loop delays every timestamp, so each
// run measures its own load. The lag is how late a timer set every 10 ms fired.
struct ClientLoad {
  double cpu_seconds = 0;      // the loop thread's user + system CPU during the run
  double cpu_share = 0;        // cpu_seconds / the run's wall time: 1 = one core saturated
  double lag_p50_seconds = 0, lag_p99_seconds = 0, lag_max_seconds = 0;
};

struct BenchRun {
  std::vector<RequestRecord> records;  // in the order they were sent
  double duration_seconds = 0;          // first send -> last response
  bool stopped_by_duration = false;
  bool interrupted = false;
  HttpClientStats client;  // the client's totals so far (a shared client counts every run)
  ClientLoad load;
};

// A path of the API under the URL: ApiPath(t, "/models") = "/v1/models" (the URL
// may end in /v1 or not).
std::string ApiPath(const BenchTarget& target, const std::string& suffix);
// The endpoint's path under the URL: "/v1/completions" or "/v1/chat/completions".
std::string EndpointPath(const BenchTarget& target);
// The JSON body of one request; history holds (user, assistant) pairs of earlier turns.
std::string RequestBody(const BenchTarget& target, const BenchTurn& turn,
                        const std::vector<std::pair<std::string, std::string>>& history);

BenchRun RunBench(const Workload& workload, const BenchRunOptions& options);
// The same on a given client, whose idle connections the next run reuses (warm-up
// then measurement: the measured requests do not pay for connecting).
BenchRun RunBench(const Workload& workload, const BenchRunOptions& options, HttpClient& client);

}  // namespace tachyon
