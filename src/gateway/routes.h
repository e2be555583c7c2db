// Routes: the one place the gateway decides where a request goes, in two steps
// a call takes in order:
//   1. RouteTable::Resolve: the route a request's `model` names (its name, an
//      alias glob, or the only route when none is named), before the pipeline
//      (whose stages are configured per route);
//   2. Route::Plan: after the pipeline (a classify route's router stage has
//      then picked the class), the backends to try, in order: the class's
//      policy over its available backends (breakers closed or probing), then
//      its fallbacks, at most max_attempts.
// The call then starts them in that order (GatewayCall), skipping one whose
// breaker opened since the plan was made; nothing else chooses a backend.
//
// A backend's BackendSlot (breaker, in-flight count, TTFT EWMA) is shared by
// the routes that use it and kept by a reload when its configuration is unchanged.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/openai.h"
#include "backend/backend.h"
#include "gateway/gateway_config.h"
#include "gateway/route/circuit_breaker.h"
#include "gateway/route/hedge.h"
#include "gateway/route/route_policy.h"
#include "obs/metrics.h"

namespace tachyon {

// The gateway's view of one backend.
struct BackendSlot {
  std::shared_ptr<Backend> backend;
  std::string fingerprint;  // of its configuration
  std::string discovered_from;  // a discovered member: its [[backend]]'s name (gateway/discovery.h)
  // False from a local engine's start until its warm-up request has run
  // (Gateway::Warm): what /ready waits for.
  std::atomic<bool> warm{true};
  std::atomic<bool> served{false};  // a warm-up was started (once per engine, kept across rebuilds)

  std::mutex mutex;
  CircuitBreaker breaker;   // guarded by mutex
  int outstanding = 0;      // guarded by mutex
  double ttft_ewma = -1;    // guarded by mutex; seconds, < 0: no sample
  // Guarded by mutex: each attempt's seconds from its start to its first byte
  // (a streamed answer's first content chunk, a whole answer's end; an attempt
  // cancelled before it: the time it ran, a lower bound), for hedge after = "pNN".
  LatencyWindow first_bytes;

  // Metrics, labelled by backend.
  Histogram* first_byte = nullptr;
  Gauge* breaker_state = nullptr;
  Gauge* in_flight = nullptr;
  Gauge* ttft_ewma_gauge = nullptr;  // ttft_ewma, for /v1/stats and scrapes
  CounterFamily* errors = nullptr;  // {backend, kind}
};

std::shared_ptr<BackendSlot> MakeSlot(std::shared_ptr<Backend> backend, const std::string& fingerprint,
                                      CircuitBreakerOptions breaker, MetricsRegistry* m);

class Route {
 public:
  struct Series {  // {model_name, route, backend}
    Histogram* ttft;
    Histogram* itl;
    Histogram* e2e;
    Counter* success;
    Counter* cancelled;
    Counter* cached_tokens;       // {route, backend}: prompt tokens a cache held (prefix cache, provider's)
    Counter* cache_write_tokens;  // {route, backend}: prompt tokens written to a provider's cache
  };

  Route(const RouteConfig& config, std::vector<std::shared_ptr<BackendSlot>> slots, MetricsRegistry* m);


  const std::string& name() const { return config_.model; }
  const RouteConfig& config() const { return config_; }
  const std::vector<std::shared_ptr<BackendSlot>>& slots() const { return slots_; }
  const Series& series(size_t idx) const { return series_[idx]; }
  // A stage's answer (a cache hit): its TTFT (the whole answer), E2E and success,
  // under backend = the stage that answered ("exact-cache", "semantic-cache").
  void RecordStageAnswer(const std::string& answered_by, double seconds) const {
    RecordStageAnswer(answered_by, seconds, seconds);
  }
  // One whose first token came before its end (a follower of a single flight).
  void RecordStageAnswer(const std::string& answered_by, double ttft_seconds, double e2e_seconds) const;
  // Requests that followed an identical miss's upstream call (single flight).
  Counter& coalesced() const { return *coalesced_; }
  Counter& requests() const { return *requests_; }
  Counter& retries() const { return *retries_; }
  Counter& fallbacks() const { return *fallbacks_; }
  // Hedged requests (config().hedge): each hedge's outcome ("won": its answer was
  // served; "lost": another attempt's was; "cancelled": the call ended without
  // an answer), and the hedges the budget refused.
  Counter& hedges(const char* outcome) const { return hedges_->With({config_.model, outcome}); }
  Counter& hedges_refused() const { return *hedges_refused_; }
  HedgeBudget& hedge_budget() const { return *hedge_budget_; }
  Counter& error(const std::string& backend, const std::string& kind) const {
    return errors_->With({config_.model, backend, kind});
  }

  // The backends to try for this request, in order (available ones only): a
  // classify route's class (the router's choice; -1: the default class) by the
  // class's policy, then the class's fallback backends, at most max_attempts.
  std::vector<size_t> Plan(const CompletionRequest& r, int class_idx, std::chrono::steady_clock::time_point now);

  // Takes over the policies' state of the route this one replaces (same name, in
  // the previous gateway): prefixes stay on their replicas across a reload or a
  // discovered membership change.
  void Inherit(Route& previous);

  // The name of class class_idx ("": a route that does not classify, or a
  // request the router did not see, such as a cache hit).
  std::string ClassName(int class_idx) const;


 private:
  RouteConfig config_;
  std::vector<std::shared_ptr<BackendSlot>> slots_;
  std::vector<Series> series_;
  HistogramFamily* ttft_family_;  // {model_name, route, backend}, for stage answers
  HistogramFamily* e2e_family_;
  CounterFamily* success_family_;
  // One per class (a route that does not classify: one over all its backends).
  struct ClassPlan {
    std::vector<size_t> members;   // indices into slots_
    std::vector<size_t> fallback;  // tried after the members
    PolicyKind kind = PolicyKind::kFallback;
    std::unique_ptr<RoutePolicy> policy;  // over members
  };
  std::vector<ClassPlan> classes_;
  std::vector<std::string> MemberNames(const std::vector<size_t>& members) const;
  std::mutex mutex_;  // the policies' state and rng_
  std::mt19937_64 rng_;
  Counter* requests_ = nullptr;
  Counter* retries_ = nullptr;
  Counter* fallbacks_ = nullptr;
  CounterFamily* hedges_ = nullptr;
  Counter* hedges_refused_ = nullptr;
  Counter* coalesced_ = nullptr;
  std::unique_ptr<HedgeBudget> hedge_budget_;
  CounterFamily* errors_ = nullptr;
};

class RouteTable {
 public:
  void Add(std::unique_ptr<Route> route);
  // The route `model` names, or null with *error: 400 when the model is
  // missing and there are several routes, 404 when it names none; both list the
  // routes served.
  Route* Resolve(const std::string& model, ApiError* error) const;
  const std::vector<std::unique_ptr<Route>>& routes() const { return routes_; }
  bool empty() const { return routes_.empty(); }

 private:
  std::vector<std::unique_ptr<Route>> routes_;
  std::unordered_map<std::string, Route*> by_model_;
};

}  // namespace tachyon
