// OpenAiServer: the HTTP routes in front of the gateway.
//
//   GET  /health               routes and backend states (200, or 503 when a route has no backend left)
//   GET  /v1/models            every route
//   GET  /metrics              Prometheus text (every family with HELP and TYPE)
//   POST /v1/completions, /v1/chat/completions   through the gateway, streaming or not
//   POST /v1/messages          Anthropic's Messages API, translated to a chat request and back
//                              (api/messages_front.h); /v1/messages/count_tokens: an estimate
//   POST /v1/embeddings        an embedding model of the gateway (EmbeddingBackend)
//   GET  /v1/stats[?window=S&step=S]  figures of the last minutes per route, backend and engine
//                              (server/stats_report.h), what /dashboard draws
//   GET  /dashboard[?key=K]    a page that polls /v1/stats each second (embedded in the binary)
//   GET  /v1/keys              the clients' keys: tenants, routes, limits, usage (admin key)
//   GET  /v1/cache             the exact cache's entries and bytes, by route (admin key)
//   DELETE /v1/cache[?route=R] purge the exact cache, or one route's entries (admin key)
//
// On the I/O thread it reads the path, checks the API key and parses bodies of up
// to 16 KiB (larger ones are parsed on the worker pool); the gateway offloads to
// the pool whatever is costly (chat templates and tokenization of a local
// backend, costly stages), so a long prompt never stalls the other connections. Each request gets an id (the client's x-request-id, or a
// new one) echoed in x-request-id; answers say who gave them (x-tachyon-route,
// x-tachyon-backend). Streams are framed here: one SSE event per backend chunk,
// then [DONE]; a failure mid-stream is an error event and [DONE], whatever the
// backend. One JSON access-log line per request goes to stderr, and with a
// capture one line per request to its file (obs/capture.h). Answers carry
// server-timing (the stages' and the upstream's durations); with [telemetry]
// each sampled request is a trace (a server span over the gateway's spans),
// continuing the client's traceparent, exported over OTLP (obs/otlp_exporter.h).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "base/worker_pool.h"
#include "gateway/gateway.h"
#include "gateway/keys/keyring.h"
#include "gateway/keys/shared_limits.h"
#include "gateway/cache/response_store.h"
#include "http/http_server.h"
#include "obs/capture.h"
#include "obs/metrics.h"
#include "obs/metrics_window.h"
#include "obs/otlp_exporter.h"
#include "obs/trace.h"
#include "server/origin_policy.h"

namespace tachyon {

// The gateway now serving; a reload swaps it while calls in flight keep the old one.
class GatewayHolder {
 public:
  std::shared_ptr<Gateway> Get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return gateway_;
  }
  void Set(std::shared_ptr<Gateway> gateway) {
    std::lock_guard<std::mutex> lock(mutex_);
    gateway_ = std::move(gateway);
  }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<Gateway> gateway_;
};

struct OpenAiServerOptions {
  std::string api_key;  // Bearer token; empty: no authentication (a key named "default", tenant "")
  // [[key]]: clients' keys with tenants, routes and limits. With any key (or
  // api_key), every request needs one. The server builds `keyring` from both.
  std::vector<KeyConfig> keys;
  std::shared_ptr<const Keyring> keyring;  // set by the server; a reload keeps the limits' state
  // Where the keys' limits are held across replicas ([limits]); null: in this process.
  std::shared_ptr<SharedLimits> shared_limits;
  OriginPolicyOptions origins;  // Host and Origin checks, CORS (has_api_key is set from api_key)
  std::string admin_key;  // Bearer token of the admin routes (/v1/cache); empty: they are refused
  // A Bearer token that may read GET /metrics (and nothing else) besides the
  // clients' key: a scraper's credential (Prometheus, the HPA's adapter).
  std::string metrics_key;
  // GET /metrics without any key (a scraper that cannot send one, such as the
  // Inference Extension's endpoint picker; a NetworkPolicy decides who reaches it).
  bool public_metrics = false;
  bool access_log = true;
  // A stream whose client has this many bytes not yet taken pauses (a local engine
  // holds the sequence) until it catches up; 0: never. The HTTP server drops the
  // connection at its own, larger bound (HttpServerOptions::max_unsent_bytes).
  int64_t pause_unsent_bytes = 1 << 20;
  // The traffic capture (obs/capture.h); null: none. Kept across a reload whose
  // capture settings did not change.
  std::shared_ptr<CaptureWriter> capture;
  // Traces ([telemetry]): who is sampled, and where finished traces go; both
  // null: no traces. Kept across a reload.
  std::shared_ptr<const Tracer> tracer;
  std::shared_ptr<OtlpExporter> exporter;
};

struct ResponsesCall;  // a /v1/responses call (openai_server.cc)

class OpenAiServer {
 public:
  OpenAiServer(OpenAiServerOptions options, GatewayHolder* gateway, MetricsRegistry* metrics, WorkerPool* workers);

  // The HttpServer's handler (on an I/O thread).
  void Handle(HttpRequest request, std::shared_ptr<ResponseWriter> writer);

  // Replaces the keys, origin policy and access log at once (a SIGHUP reload): a
  // request reads one set of options from its start to its end, the old or the new.
  void SetOptions(OpenAiServerOptions options);

 private:
  using KeyRef = std::shared_ptr<const Keyring::Key>;  // the caller's key; null: the server has none
  void HandleCompletion(HttpRequest request, std::shared_ptr<ResponseWriter> writer, Endpoint endpoint,
                        std::chrono::steady_clock::time_point arrival, KeyRef key);
  void HandleMessages(HttpRequest request, std::shared_ptr<ResponseWriter> writer, bool count_tokens,
                      std::chrono::steady_clock::time_point arrival, KeyRef key);
  // POST /v1/responses: the Responses request as the chat request the gateway reads.
  void HandleResponses(HttpRequest request, std::shared_ptr<ResponseWriter> writer,
                       std::chrono::steady_clock::time_point arrival, KeyRef key);
  // GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items.
  void HandleStoredResponse(const HttpRequest& request, const std::string& path, ResponseWriter& writer, KeyRef key);
  // The gateway call of a parsed request; messages_model: set for /v1/messages
  // (Anthropic framing); responses: set for /v1/responses (its framing and store).
  void Dispatch(const HttpRequest& http, std::shared_ptr<ResponseWriter> writer,
                std::shared_ptr<CompletionRequest> request, const std::string& request_id,
                std::chrono::steady_clock::time_point arrival, const std::string& messages_model, KeyRef key,
                std::shared_ptr<ResponsesCall> responses = nullptr);
  void CaptureRejected(const HttpRequest& http, const std::string& endpoint, const std::string& request_id,
                       std::chrono::steady_clock::time_point arrival, const ApiError& error);
  void HandleStats(const std::string& query, ResponseWriter& writer);
  void HandleCacheAdmin(const HttpRequest& request, const std::string& query, ResponseWriter& writer);
  void HandleEmbeddings(HttpRequest request, std::shared_ptr<ResponseWriter> writer,
                        std::chrono::steady_clock::time_point arrival, KeyRef key);
  // The admin key checked: false when refused (403 without one configured, 401 when wrong), answered.
  bool AdminAllowed(const HttpRequest& request, const OpenAiServerOptions& options, ResponseWriter& writer);
  // GET /v1/keys (admin key).
  void HandleKeysAdmin(const HttpRequest& request, ResponseWriter& writer);
  // The options with their keyring built (the previous one's limits carried over).
  std::shared_ptr<const OpenAiServerOptions> WithKeyring(OpenAiServerOptions options,
                                                         const OpenAiServerOptions* previous);
  std::string RequestId(const HttpRequest& request);
  std::shared_ptr<const OpenAiServerOptions> Options() const;

  mutable std::mutex options_mutex_;
  std::shared_ptr<const OpenAiServerOptions> options_;  // replaced whole, never changed in place
  GatewayHolder* gateway_;
  MetricsRegistry* metrics_;
  WorkerPool* workers_;
  CounterFamily* rejected_;  // {kind}: refused before reaching a route
  const int64_t started_;
  // The metrics /v1/stats reads, sampled once a second by a thread of its own.
  std::unique_ptr<MetricsWindow> stats_window_;
  std::atomic<int64_t> next_id_{1};
};

}  // namespace tachyon
