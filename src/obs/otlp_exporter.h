// OtlpExporter: sends finished spans to an OpenTelemetry collector over
// OTLP/HTTP with the JSON encoding (POST {endpoint}/v1/traces), off the request
// path. Add() only appends to a bounded queue (a full queue drops the spans
// and counts them in tachyon:otel_spans_dropped_total); a thread of its own
// sends them in batches, each with a timeout, retrying what the collector
// refuses as transient (429, 502, 503, 504, or no answer) with a doubling
// backoff a few times before dropping it. A dead collector costs a request
// one lock and a vector append, nothing more.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "obs/metrics.h"
#include "obs/trace.h"

namespace tachyon {

class HttpClient;

struct OtlpExporterOptions {
  std::string endpoint;  // "http://otel-collector:4318": spans go to {endpoint}/v1/traces
  std::string service_name = "tachyon";
  std::string version;
  std::vector<std::pair<std::string, std::string>> headers;  // sent with every export (auth)
  size_t max_queue_spans = 4096;  // spans waiting to be sent; more are dropped
  size_t max_batch_spans = 512;   // spans per export request
  double flush_interval_seconds = 1;  // a partial batch waits at most this long
  double timeout_seconds = 10;        // one export request
  int max_retries = 3;                // of a batch the collector refused as transient
  double initial_backoff_seconds = 0.5;
};

// "k=v,k2=v2" as OTEL_EXPORTER_OTLP_HEADERS has it (values percent-decoded, blanks trimmed).
StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOtlpHeaders(const std::string& text);

class OtlpExporter {
 public:
  // Checks the endpoint (an http(s) URL) and starts the sending thread.
  static StatusOr<std::unique_ptr<OtlpExporter>> Start(OtlpExporterOptions options, MetricsRegistry* metrics);
  // Sends what is queued (for at most a few seconds), then stops the thread.
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Queues a finished request's spans; never blocks on the network.
  void Add(std::vector<ExportedSpan> spans);

  const OtlpExporterOptions& options() const { return options_; }

 private:
  OtlpExporter(OtlpExporterOptions options, MetricsRegistry* metrics);
  enum class Outcome { kSent, kRefused, kTransient };
  void Run();
  // One export request, waited for on the exporter's thread.
  Outcome Send(HttpClient& client, const std::string& body, double timeout_seconds);

  const OtlpExporterOptions options_;
  std::string host_, target_;
  int port_ = 0;
  bool tls_ = false;
  Counter* exported_;
  Counter* dropped_;
  Counter* failed_requests_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<ExportedSpan> queue_;  // guarded by mutex_
  bool stopping_ = false;           // guarded by mutex_
  std::thread thread_;
};

}  // namespace tachyon
