// Gateway: the routes and backends one configuration describes, and the call
// that takes a request through the pipeline to a backend and back.
//
// Where a request goes is decided in one place, gateway/routes.h: the route its
// model names (RouteTable::Resolve, in Handle), then, after the pipeline's
// stages (a cache may answer; a classify route's router picks the class), the
// backends to try in order (Route::Plan). The call (gateway/gateway_call.h)
// tries them in that order: a kFailed result (connect error, 5xx, first-byte
// timeout: nothing has reached the client) moves to the next; anything else,
// or any failure after the first chunk went out, is the answer. Every backend
// has a circuit breaker, an in-flight count and a TTFT EWMA (BackendSlot),
// shared by the routes that use it and carried over a reload when its
// configuration is unchanged. A Gateway is immutable once built; a reload
// builds a new one, and calls in flight keep the old one alive until they end.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "base/clock.h"
#include "backend/embedding_backend.h"
#include "gateway/cache/response_store.h"
#include "gateway/cache/single_flight.h"
#include "gateway/gateway_config.h"
#include "gateway/pipeline.h"
#include "gateway/routes.h"
#include "obs/metrics.h"

namespace tachyon {

// Who answered a call, for headers and the access log.
struct CallInfo {
  std::string route;
  std::string backend;  // "" when no backend answered
  std::string backend_kind;  // its kind ("local", "openai", "anthropic"), or "cache" for a cache's answer
  int attempts = 0;     // backends tried
  double ttft_seconds = -1, e2e_seconds = -1;
  std::string cache;    // "hit", "miss", "bypass", or "" (the route is not cached)
  double cache_age_seconds = -1;
  double cache_similarity = -1;  // a semantic hit's cosine
  std::string route_class;       // a classify route's class ("" otherwise) ...
  std::string route_reason;      // ... and why: "rule=extraction", "classifier=coding; score=0.912", "default"
  std::vector<std::pair<std::string, int64_t>> trimmed_tokens;  // by trimmer step
  std::string response_model;    // the answering backend's model name
  // Seconds each pipeline stage took (GatewayRequest::stage_seconds), and the
  // answering attempt's: from its start to its first chunk (streamed) or to
  // its end (whole); -1 when no backend answered.
  std::vector<std::pair<std::string, double>> stage_seconds;
  double upstream_seconds = -1;
  // Hedged requests (the route's `hedge`): extra attempts started beside a late
  // one, and whether one of them gave the answer.
  int hedges = 0;
  bool hedge_won = false;
};

// Where a call's answer goes (the server frames it for HTTP). Called on backend
// threads, one at a time per call: OnChunk for each streamed event, then OnDone once.
class GatewaySink {
 public:
  virtual ~GatewaySink() = default;
  virtual void OnChunk(const BackendChunk& chunk, const CallInfo& info) = 0;
  virtual void OnDone(const BackendResult& result, const CallInfo& info) = 0;
};

// The task routers of a config's classify routes, by route name: their rules,
// and their classifiers loaded from their files (routes naming the same
// embedder share one). The gateway's router stage, and `tachyon audit`.
StatusOr<std::unordered_map<std::string, std::shared_ptr<const TaskRouter>>> BuildTaskRouters(
    const GatewayConfig& config);

class CacheStore;
class ExactCache;
class SemanticAudit;
class SemanticCache;

class Gateway : public std::enable_shared_from_this<Gateway> {
 public:
  // Runs a task on a worker thread (the server's pool); what an I/O thread must
  // not do (a costly stage, a local backend's Start) goes through it.
  using Offload = std::function<void(std::function<void()>)>;

  // Makes every backend the config names (reusing the previous gateway's where
  // the configuration is unchanged) and the routes over them.
  // clock: what breakers, TTFT EWMAs, latencies and the caches' TTLs are
  // measured on (null: the real one; tests pass a ManualClock).
  static StatusOr<std::shared_ptr<Gateway>> Build(const GatewayConfig& config, const Gateway* previous,
                                                  MetricsRegistry* metrics, Offload offload = nullptr,
                                                  const Clock* clock = nullptr);
  // One route over ready-made backends (the one-model flags of `tachyon serve`),
  // and an embedding model beside it when `embedding` is not null.
  static std::shared_ptr<Gateway> Single(std::shared_ptr<Backend> backend, const std::string& route_name,
                                         MetricsRegistry* metrics, Offload offload = nullptr,
                                         std::shared_ptr<EmbeddingBackend> embedding = nullptr,
                                         const Clock* clock = nullptr);
  ~Gateway();

  Pipeline& pipeline() { return pipeline_; }
  const Pipeline& pipeline() const { return pipeline_; }
  // Ends every backend's work (engines stop, upstream connections close); calls
  // in flight get no more callbacks. For the server's exit.
  void Shutdown();

  // Runs the pipeline and the route; the answer goes to sink. Cheap on the
  // calling thread (an I/O thread may call it): costly work is offloaded. The
  // returned function cancels the call (a client that went away).
  CancelFn Handle(GatewayRequest request, std::shared_ptr<GatewaySink> sink) const;

  // The route a request's model names ("" : none; Handle answers it with a 404).
  std::string RouteName(const std::string& model) const;

  // The embedding model a /v1/embeddings request names (its only one when the
  // name is empty and there is one), or null; *names lists them for an error.
  std::shared_ptr<EmbeddingBackend> FindEmbedding(const std::string& model, std::string* names) const;

  // GET /v1/models: every route, with its backends' states, and every embedding model.
  nlohmann::json Models(int64_t created) const;
  // GET /health: 200 when every route has an available backend, else 503.
  int Health(nlohmann::json* body) const;
  // GET /ready: 200 when this process can take traffic now (every local engine
  // has loaded its model and run its warm-up request), else 503 with what it
  // waits for. Remote backends do not count: their state is /health's.
  int Ready(nlohmann::json* body) const;
  // Sends each local engine that has not served yet one short request (a
  // one-token completion), so the first client does not pay for the weights
  // being paged in; until it ends, Ready says "warming". Returns at once.
  void Warm();

  const std::vector<std::shared_ptr<BackendSlot>>& backends() const { return slots_; }
  // The exact cache's store, or null when no route is cached.
  ExactCache* exact_cache() const { return exact_cache_.get(); }
  // The semantic cache's store, or null when no route has one.
  SemanticCache* semantic_cache() const { return semantic_cache_.get(); }
  // The stored responses of /v1/responses (in memory unless [responses] keeps them in the [cache] store).
  const std::shared_ptr<ResponseStore>& responses() const { return responses_; }
  const Offload& offload() const { return offload_; }
  // The live audits of the routes whose semantic cache has one, by route.
  const std::unordered_map<std::string, std::shared_ptr<SemanticAudit>>& semantic_audits() const {
    return semantic_audits_;
  }
  // The upstream calls that identical cache misses share (single flight), by cache key.
  SingleFlight& flights() const { return flights_; }

  // Told the discovered backend (gateway/discovery.h) whose member a call could
  // not connect to, so its name is resolved again. Set before the gateway serves.
  void set_on_connect_failure(std::function<void(const std::string& backend)> fn) {
    on_connect_failure_ = std::move(fn);
  }
  void OnConnectFailure(const std::string& backend) const {
    if (on_connect_failure_) on_connect_failure_(backend);
  }
  const Clock& clock() const { return Clock::Or(clock_); }

 private:
  Gateway() = default;
  static void Delete(Gateway* g);
  std::shared_ptr<BackendSlot> Slot(const std::string& name) const;
  Status OpenCacheStore(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics);
  Status BuildCaches(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics);
  Status BuildResponses(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics);
  Status BuildTrimmer(const GatewayConfig& config, MetricsRegistry* metrics);
  Status BuildRouter(const GatewayConfig& config, MetricsRegistry* metrics);

  MetricsRegistry* metrics_ = nullptr;
  Offload offload_;
  const Clock* clock_ = nullptr;
  std::function<void(const std::string&)> on_connect_failure_;
  std::vector<std::shared_ptr<BackendSlot>> slots_;
  struct EmbeddingSlot {
    std::shared_ptr<EmbeddingBackend> backend;
    std::string fingerprint;
  };
  std::vector<EmbeddingSlot> embeddings_;
  RouteTable routes_;
  Pipeline pipeline_;
  // The caches' stores, kept by a reload when the [cache] table they were made from is unchanged.
  std::shared_ptr<CacheStore> cache_db_;
  std::shared_ptr<ExactCache> exact_cache_;
  std::shared_ptr<SemanticCache> semantic_cache_;
  std::string cache_store_key_;
  bool store_kept_ = false;  // cache_db_ is the previous gateway's
  // The stored responses of /v1/responses; never null once built.
  std::shared_ptr<ResponseStore> responses_ = std::make_shared<ResponseStore>(
      ResponsesConfig{}.max_entries, ResponsesConfig{}.max_bytes, ResponsesConfig{}.ttl);
  ResponsesConfig responses_config_;
  mutable SingleFlight flights_;
  std::unordered_map<std::string, std::shared_ptr<SemanticAudit>> semantic_audits_;
};

}  // namespace tachyon
