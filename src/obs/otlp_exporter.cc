#include "obs/otlp_exporter.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <optional>

#include "base/percent_decode.h"
#include "http/http_client.h"

namespace tachyon {
namespace {

std::string Trim(std::string s) {
  const size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

bool HeaderSafe(const std::string& s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseOtlpHeaders(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = Trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (!item.empty()) {
      const size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        return InvalidArgumentError("OTLP headers: '" + item + "' is not key=value");
      }
      std::string key = Trim(item.substr(0, eq)), value;
      if (!PercentDecode(Trim(item.substr(eq + 1)), &value)) {
        return InvalidArgumentError("OTLP headers: the value of '" + key + "' has a broken percent escape");
      }
      if (key.empty() || !HeaderSafe(key) || !HeaderSafe(value) || key.find_first_of(" \t:") != std::string::npos) {
        return InvalidArgumentError("OTLP headers: '" + key + "' is not a usable header");
      }
      out.emplace_back(std::move(key), std::move(value));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, MetricsRegistry* metrics)
    : options_(std::move(options)),
      exported_(&metrics->AddCounter("tachyon:otel_spans_exported_total",
                                     "Spans the OTLP collector accepted", {}).With({})),
      dropped_(&metrics->AddCounter("tachyon:otel_spans_dropped_total",
                                    "Spans dropped: the export queue was full, or the collector refused or "
                                    "could not be reached after retries", {}).With({})),
      failed_requests_(&metrics->AddCounter("tachyon:otel_export_failures_total",
                                            "OTLP export requests that failed (each retry counts)", {}).With({})) {}

StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Start(OtlpExporterOptions options, MetricsRegistry* metrics) {
  if (options.endpoint.empty()) return InvalidArgumentError("otlp_endpoint is empty");
  ASSIGN_OR_RETURN(HttpUrl url, ParseHttpUrl(options.endpoint));
  if (options.max_batch_spans < 1 || options.max_queue_spans < options.max_batch_spans) {
    return InvalidArgumentError("the OTLP queue must hold at least one batch");
  }
  std::unique_ptr<OtlpExporter> e(new OtlpExporter(std::move(options), metrics));
  e->host_ = url.host;
  e->port_ = url.port;
  e->tls_ = url.tls;
  e->target_ = url.path + "/v1/traces";
  e->thread_ = std::thread([raw = e.get()] { raw->Run(); });
  return e;
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OtlpExporter::Add(std::vector<ExportedSpan> spans) {
  size_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (ExportedSpan& s : spans) {
      if (queue_.size() >= options_.max_queue_spans) {
        ++dropped;
        continue;
      }
      queue_.push_back(std::move(s));
    }
  }
  if (dropped > 0) dropped_->Add(static_cast<double>(dropped));
  // A full batch goes at once; a partial one waits for the flush interval.
  wake_.notify_one();
}

OtlpExporter::Outcome OtlpExporter::Send(HttpClient& client, const std::string& body, double timeout_seconds) {
  HttpClientRequest request{.method = "POST",
                            .host = host_,
                            .port = port_,
                            .target = target_,
                            .headers = {{"Content-Type", "application/json"}},
                            .body = body,
                            .timeout_seconds = timeout_seconds,
                            .tls = tls_};
  for (const auto& h : options_.headers) request.headers.push_back(h);
  struct Exchange {
    int status = 0;
    std::promise<Status> finished;
  };
  auto exchange = std::make_shared<Exchange>();
  std::future<Status> result = exchange->finished.get_future();
  client.Send(std::move(request), {.on_head = [exchange](const HttpResponseHead& h) { exchange->status = h.status; },
                                   .on_data = [](std::string_view) {},
                                   .on_done = [exchange](const Status& s) { exchange->finished.set_value(s); }});
  const Status status = result.get();  // blocks this thread only: requests never wait on it
  const int code = exchange->status;
  if (status.ok() && code >= 200 && code < 300) return Outcome::kSent;
  failed_requests_->Add();
  if (!status.ok() || code == 429 || code == 502 || code == 503 || code == 504) return Outcome::kTransient;
  return Outcome::kRefused;  // 400 and the like: a body it will never take
}

void OtlpExporter::Run() {
  HttpClient client(HttpClientOptions{.user_agent = "tachyon-otlp"});
  std::thread loop([&client] { client.RunUntilStopped(); });
  const auto interval = std::chrono::duration<double>(options_.flush_interval_seconds);
  // On stop, what is queued gets one attempt per batch, within this long in all.
  std::optional<std::chrono::steady_clock::time_point> stop_deadline;
  for (;;) {
    std::vector<ExportedSpan> batch;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait_for(lock, interval, [&] { return stopping_ || queue_.size() >= options_.max_batch_spans; });
      stopping = stopping_;
      const size_t n = std::min(queue_.size(), options_.max_batch_spans);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (stopping && !stop_deadline) stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    if (batch.empty()) {
      if (stopping) break;
      continue;
    }
    const std::string body = EncodeOtlpJson(batch, options_.service_name, options_.version);
    Outcome outcome = Outcome::kTransient;
    double backoff = options_.initial_backoff_seconds;
    for (int attempt = 0; attempt <= options_.max_retries; ++attempt) {
      if (stopping && std::chrono::steady_clock::now() >= *stop_deadline) break;
      outcome = Send(client, body, stopping ? 1.0 : options_.timeout_seconds);
      if (outcome != Outcome::kTransient || stopping) break;
      std::unique_lock<std::mutex> lock(mutex_);  // the backoff, cut short by a stop
      if (wake_.wait_for(lock, std::chrono::duration<double>(backoff), [&] { return stopping_; })) stopping = true;
      if (stopping && !stop_deadline) stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      backoff *= 2;
    }
    (outcome == Outcome::kSent ? exported_ : dropped_)->Add(static_cast<double>(batch.size()));
  }
  client.Stop();
  loop.join();
}

}  // namespace tachyon
