#include "gateway/gateway.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "api/json_parse.h"
#include "base/check.h"
#include "gateway/cache/cache_db.h"
#include "gateway/cache/exact_cache.h"
#include "gateway/cache/redis_store.h"
#include "gateway/cache/semantic_cache.h"
#include "gateway/embedder_spec.h"
#include "gateway/gateway_call.h"
#include "gateway/route/router_stage.h"
#include "gateway/route/task_router.h"
#include "gateway/trim/trim_stage.h"

namespace tachyon {
Gateway::~Gateway() = default;

// The last call of a gateway may end on a backend's own thread; destroying the
// gateway there would make that backend join itself, so it is destroyed on a
// thread of its own instead.
void Gateway::Delete(Gateway* g) {
  bool on_backend_thread = false;
  for (const auto& slot : g->slots_) on_backend_thread |= slot->backend->OnOwnThread();
  for (const auto& e : g->embeddings_) on_backend_thread |= e.backend->OnOwnThread();
  if (on_backend_thread) {
    std::thread([g] { delete g; }).detach();
    return;
  }
  delete g;
}

std::shared_ptr<BackendSlot> Gateway::Slot(const std::string& name) const {
  for (const auto& slot : slots_) {
    if (slot->backend->name() == name) return slot;
  }
  return nullptr;
}

StatusOr<std::shared_ptr<Gateway>> Gateway::Build(const GatewayConfig& config, const Gateway* previous,
                                                  MetricsRegistry* metrics, Offload offload, const Clock* clock) {
  std::shared_ptr<Gateway> g(new Gateway(), &Gateway::Delete);
  g->metrics_ = metrics;
  g->offload_ = std::move(offload);
  g->clock_ = clock;
  for (const BackendConfig& b : config.backends) {
    if (b.kind == "embedding") {
      std::shared_ptr<EmbeddingBackend> reused;
      for (const EmbeddingSlot& old : previous != nullptr ? previous->embeddings_ : std::vector<EmbeddingSlot>{}) {
        if (old.backend->name() == b.name && old.fingerprint == b.fingerprint) reused = old.backend;
      }
      if (!reused) {
        StatusOr<std::unique_ptr<EmbeddingBackend>> e = EmbeddingBackend::Create(b.embedding, metrics);
        if (!e.ok()) return InvalidArgumentError(config.path + ": backend '" + b.name + "': " + e.status().message());
        reused = std::move(e).value();
      }
      for (const EmbeddingSlot& other : g->embeddings_) {
        if (other.backend->model_name() == reused->model_name()) {
          return InvalidArgumentError(config.path + ": backend '" + b.name + "': a second embedding model named '" +
                                      reused->model_name() + "' (set served_model_name)");
        }
      }
      g->embeddings_.push_back({std::move(reused), b.fingerprint});
      continue;
    }
    if (previous != nullptr) {
      if (auto old = previous->Slot(b.name); old && old->fingerprint == b.fingerprint) {
        g->slots_.push_back(old);  // unchanged: its engine or connections keep running
        continue;
      }
    }
    std::shared_ptr<Backend> backend;
    if (b.kind == "local") {
      StatusOr<std::unique_ptr<LocalBackend>> local = LocalBackend::Create(b.local, metrics);
      if (!local.ok()) return InvalidArgumentError(config.path + ": backend '" + b.name + "': " + local.status().message());
      backend = std::move(local).value();
    } else {
      StatusOr<std::unique_ptr<RemoteBackend>> remote = RemoteBackend::Create(b.remote);
      if (!remote.ok()) {
        return InvalidArgumentError(config.path + ": backend '" + b.name + "': " + remote.status().message());
      }
      backend = std::move(remote).value();
    }
    g->slots_.push_back(MakeSlot(std::move(backend), b.fingerprint, b.breaker, metrics));
    g->slots_.back()->discovered_from = b.discovered_from;
  }
  RETURN_IF_ERROR(g->BuildTrimmer(config, metrics));
  RETURN_IF_ERROR(g->BuildCaches(config, previous, metrics));
  RETURN_IF_ERROR(g->BuildResponses(config, previous, metrics));
  for (const RouteConfig& r : config.routes) {
    std::vector<std::shared_ptr<BackendSlot>> slots;
    for (const std::string& name : r.backends) slots.push_back(g->Slot(name));
    auto route = std::make_unique<Route>(r, std::move(slots), metrics);
    if (previous != nullptr) {
      for (const auto& old : previous->routes_.routes()) {
        if (old->name() == r.model) route->Inherit(*old);
      }
    }
    g->routes_.Add(std::move(route));
  }
  RETURN_IF_ERROR(g->BuildRouter(config, metrics));
  return g;
}

// The trim stage, for the routes with `trim`: their options and tokenizers
// (by default the route's first local backend's model).
Status Gateway::BuildTrimmer(const GatewayConfig& config, MetricsRegistry* metrics) {
  std::unordered_map<std::string, TrimRoute> routes;
  std::unordered_map<std::string, std::shared_ptr<const TokenCounter>> counters;
  for (const RouteConfig& r : config.routes) {
    if (!r.trim) continue;
    std::string tokenizer = r.trim->tokenizer;
    for (size_t i = 0; tokenizer.empty() && i < r.backends.size(); ++i) {
      for (const BackendConfig& b : config.backends) {
        if (b.name == r.backends[i] && b.kind == "local") tokenizer = b.local.model_path;
      }
    }
    std::shared_ptr<const TokenCounter>& counter = counters[tokenizer];
    if (!counter) {
      StatusOr<std::shared_ptr<const TokenCounter>> made = TokenCounter::ForModel(tokenizer);
      if (!made.ok()) {
        return InvalidArgumentError(config.path + ": route '" + r.model + "': trim: tokenizer: " +
                                    made.status().message());
      }
      counter = std::move(made).value();
    }
    routes[r.model] = TrimRoute{.options = r.trim->options, .counter = counter};
  }
  if (!routes.empty()) pipeline_.Add(std::make_unique<TrimStage>(std::move(routes), metrics));
  return Status::Ok();
}

StatusOr<std::unordered_map<std::string, std::shared_ptr<const TaskRouter>>> BuildTaskRouters(
    const GatewayConfig& config) {
  std::unordered_map<std::string, std::shared_ptr<const TaskRouter>> routers;
  std::unordered_map<std::string, std::shared_ptr<Embedder>> embedders;
  for (const RouteConfig& r : config.routes) {
    if (r.policy != PolicyKind::kClassify) continue;
    TaskRouterOptions o{.rules = r.rules, .default_class = r.default_class};
    for (const RouteClassConfig& k : r.classes) o.classes.push_back(k.name);
    if (r.classifier) {
      const std::string where = config.path + ": route '" + r.model + "': classifier: ";
      StatusOr<TextClassifier> loaded = TextClassifier::Load(r.classifier->model);
      if (!loaded.ok()) return InvalidArgumentError(where + loaded.status().message());
      auto classifier = std::make_shared<const TextClassifier>(std::move(loaded).value());
      const std::string spec = r.classifier->embedder.empty() ? classifier->embedder_spec() : r.classifier->embedder;
      std::shared_ptr<Embedder>& embedder = embedders[spec];
      if (!embedder) {
        StatusOr<std::unique_ptr<Embedder>> made = MakeEmbedder(spec);
        if (!made.ok()) return InvalidArgumentError(where + "embedder '" + spec + "': " + made.status().message());
        embedder = std::move(made).value();
      }
      if (embedder->dimension() != classifier->dimension()) {
        return InvalidArgumentError(where + "the embedder '" + spec + "' gives " +
                                    std::to_string(embedder->dimension()) + "-d vectors; the classifier was trained on " +
                                    std::to_string(classifier->dimension()) + "-d ones");
      }
      for (const std::string& label : classifier->labels()) {
        int mapped = -1;
        for (const auto& [from, to] : r.classifier->labels) {
          if (from == label) mapped = static_cast<int>(std::find(o.classes.begin(), o.classes.end(), to) - o.classes.begin());
        }
        if (mapped < 0) {
          auto same = std::find(o.classes.begin(), o.classes.end(), label);
          if (same != o.classes.end()) mapped = static_cast<int>(same - o.classes.begin());
        }
        o.label_class.push_back(mapped);
      }
      for (const auto& [from, to] : r.classifier->labels) {
        if (std::find(classifier->labels().begin(), classifier->labels().end(), from) == classifier->labels().end()) {
          return InvalidArgumentError(where + "labels: the classifier has no label '" + from + "'");
        }
      }
      o.classifier = std::move(classifier);
      o.embedder = embedder;
      o.min_probability = r.classifier->min_probability;
    }
    routers[r.model] = std::make_shared<const TaskRouter>(std::move(o));
  }
  return routers;
}

// The router stage, for the classify routes.
Status Gateway::BuildRouter(const GatewayConfig& config, MetricsRegistry* metrics) {
  ASSIGN_OR_RETURN(auto routers, BuildTaskRouters(config));
  if (!routers.empty()) pipeline_.Add(std::make_unique<RouterStage>(std::move(routers), metrics));
  return Status::Ok();
}

// The [cache] store (once per build: the caches and the stored responses share
// it); a reload keeps the previous gateway's when the [cache] table is unchanged.
Status Gateway::OpenCacheStore(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics) {
  const std::string store_key = config.cache.store + "\n" + std::to_string(config.cache.max_entries) + "\n" +
                                std::to_string(config.cache.max_bytes) + "\n" + config.cache.password + "\n" +
                                (config.cache.verify_tls ? "verify" : "no-verify") + "\n" + config.cache.ca_file;
  if (cache_store_key_ == store_key) return Status::Ok();  // opened already by this build
  store_kept_ = previous != nullptr && previous->cache_store_key_ == store_key;
  if (store_kept_) cache_db_ = previous->cache_db_;
  if (!store_kept_ && config.cache.store.rfind("sqlite:", 0) == 0) {
    StatusOr<std::unique_ptr<CacheDb>> opened = CacheDb::Open(config.cache.store.substr(7), config.cache.max_entries, metrics);
    if (!opened.ok()) return InvalidArgumentError(config.path + ": [cache] store: " + opened.status().message());
    cache_db_ = std::move(opened).value();
  }
  if (!store_kept_ && (config.cache.store.rfind("redis://", 0) == 0 || config.cache.store.rfind("rediss://", 0) == 0)) {
    StatusOr<std::unique_ptr<RedisStore>> opened = RedisStore::Open(
        config.cache.store, metrics,
        {.password = config.cache.password, .verify_tls = config.cache.verify_tls, .ca_file = config.cache.ca_file});
    if (!opened.ok()) return InvalidArgumentError(config.path + ": [cache] store: " + opened.status().message());
    cache_db_ = std::move(opened).value();
  }
  cache_store_key_ = store_key;
  return Status::Ok();
}

// The stored responses of /v1/responses: in memory, or also in the [cache]
// store; a reload keeps them when [responses] and the store are unchanged.
Status Gateway::BuildResponses(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics) {
  const ResponsesConfig& r = config.responses;
  if (r.store == "cache") RETURN_IF_ERROR(OpenCacheStore(config, previous, metrics));
  std::shared_ptr<CacheStore> store = r.store == "cache" ? cache_db_ : nullptr;
  if (previous != nullptr && previous->responses_ && previous->responses_config_ == r &&
      previous->responses_->store() == store) {
    responses_ = previous->responses_;
  } else {
    responses_ = std::make_shared<ResponseStore>(r.max_entries, r.max_bytes, r.ttl, std::move(store));
    if (Status loaded = responses_->Load(UnixTimeSeconds()); !loaded.ok()) {
      return InvalidArgumentError(config.path + ": [responses]: " + loaded.message());
    }
  }
  responses_config_ = r;
  return Status::Ok();
}

// The cache stages and their stores; a reload keeps the stores (and their
// entries) when the [cache] table is unchanged.
Status Gateway::BuildCaches(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics) {
  ExactCacheOptions cache{.max_entries = config.cache.max_entries, .max_bytes = config.cache.max_bytes};
  // Whether the client's model name reaches an upstream of the route (then it keys the answer).
  auto forwards_model = [&](const RouteConfig& r) {
    for (const std::string& name : r.backends) {
      for (const BackendConfig& b : config.backends) {
        if (b.name == name && (b.kind == "openai" || b.kind == "anthropic") && b.remote.upstream_model.empty()) {
          return true;
        }
      }
    }
    return false;
  };
  bool semantic = false;
  for (const RouteConfig& r : config.routes) {
    if (r.exact_cache) {
      cache.routes[r.model] = {.ttl_seconds = r.exact_cache_ttl, .sampled = r.cache_sampled, .key_model = forwards_model(r)};
    }
    semantic = semantic || r.semantic_cache.has_value();
  }
  if (!cache.routes.empty() || semantic) {
    RETURN_IF_ERROR(OpenCacheStore(config, previous, metrics));
    const bool keep = store_kept_;
    if (!cache.routes.empty()) {
      if (keep && previous->exact_cache_) {
        exact_cache_ = previous->exact_cache_;
      } else {
        exact_cache_ = std::make_shared<ExactCache>(config.cache.max_entries, config.cache.max_bytes, cache_db_, clock_);
        if (Status loaded = exact_cache_->Load(); !loaded.ok()) {
          return InvalidArgumentError(config.path + ": [cache] store: " + loaded.message());
        }
      }
      pipeline_.Add(std::make_unique<ExactCacheStage>(std::move(cache), exact_cache_, metrics));
    }
    if (semantic) {
      if (keep && previous->semantic_cache_) {
        semantic_cache_ = previous->semantic_cache_;
      } else {
        semantic_cache_ =
            std::make_shared<SemanticCache>(config.cache.max_entries, config.cache.max_bytes, cache_db_,
                                            QueueDropCounter(metrics, "semantic_insert"), clock_);
        if (Status loaded = semantic_cache_->Load(); !loaded.ok()) {
          return InvalidArgumentError(config.path + ": [cache] store: " + loaded.message());
        }
      }
      // Routes naming the same embedder share one.
      std::unordered_map<std::string, std::shared_ptr<Embedder>> embedders;
      std::unordered_map<std::string, SemanticRouteOptions> routes;
      for (const RouteConfig& r : config.routes) {
        if (!r.semantic_cache) continue;
        const SemanticCacheConfig& c = *r.semantic_cache;
        std::shared_ptr<Embedder>& embedder = embedders[c.embedder];
        if (!embedder) {
          StatusOr<std::unique_ptr<Embedder>> made = MakeEmbedder(c.embedder);
          if (!made.ok()) {
            return InvalidArgumentError(config.path + ": route '" + r.model + "': semantic_cache: embedder: " +
                                        made.status().message());
          }
          embedder = std::move(made).value();
        }
        SemanticRouteOptions o{.embedder = embedder,
                               .hit = {.threshold = c.threshold,
                                       .verifier_min = c.verifier,
                                       .band = c.guards == "off" ? 0.0 : c.band,
                                       .guards_on_hits = c.guards == "all"},
                               .ttl_seconds = c.ttl,
                               .sampled = r.cache_sampled,
                               .key_model = forwards_model(r)};
        if (c.verifier > 0) {
          if (c.verifier_weights.empty()) {
            o.verifier = std::make_shared<PairVerifier>();
          } else {
            StatusOr<VerifierWeights> w = ReadVerifierWeights(c.verifier_weights);
            if (!w.ok()) {
              return InvalidArgumentError(config.path + ": route '" + r.model +
                                          "': semantic_cache: verifier_weights: " + w.status().message());
            }
            o.verifier = std::make_shared<PairVerifier>(std::move(w).value());
          }
        }
        if (c.audit.sample > 0) {
          o.audit = std::make_shared<SemanticAudit>(r.model, c.threshold, c.audit, embedder, o.verifier, c.verifier,
                                                    metrics);
          semantic_audits_[r.model] = o.audit;
        }
        routes[r.model] = std::move(o);
      }
      pipeline_.Add(std::make_unique<SemanticCacheStage>(std::move(routes), semantic_cache_, metrics));
    }
  }
  return Status::Ok();
}

std::shared_ptr<Gateway> Gateway::Single(std::shared_ptr<Backend> backend, const std::string& route_name,
                                         MetricsRegistry* metrics, Offload offload,
                                         std::shared_ptr<EmbeddingBackend> embedding, const Clock* clock) {
  std::shared_ptr<Gateway> g(new Gateway(), &Gateway::Delete);
  if (embedding) g->embeddings_.push_back({std::move(embedding), ""});
  g->metrics_ = metrics;
  g->offload_ = std::move(offload);
  g->clock_ = clock;
  // One backend, no alternative: its breaker never opens (a refusal would only turn errors into 503s).
  g->slots_.push_back(MakeSlot(std::move(backend), "", {.failure_threshold = 1 << 30}, metrics));
  RouteConfig r{.model = route_name, .backends = {g->slots_[0]->backend->name()}};
  g->routes_.Add(std::make_unique<Route>(r, g->slots_, metrics));
  return g;
}

CancelFn Gateway::Handle(GatewayRequest request, std::shared_ptr<GatewaySink> sink) const {
  ApiError error;
  Route* route = routes_.Resolve(request.request->model, &error);
  if (route == nullptr) {
    BackendResult result{.kind = BackendResult::Kind::kRejected, .http_status = error.http_status,
                         .body = ErrorBody(error), .error = error, .error_kind = "unknown_model"};
    sink->OnDone(result, CallInfo{});
    return [] {};
  }
  route->requests().Add();
  request.route = route->name();
  return StartGatewayCall(shared_from_this(), route, std::move(request), std::move(sink));
}

void Gateway::Shutdown() {
  for (const auto& slot : slots_) slot->backend->Shutdown();
  for (const auto& e : embeddings_) e.backend->Shutdown();
}

std::string Gateway::RouteName(const std::string& model) const {
  ApiError error;
  const Route* route = routes_.Resolve(model, &error);
  return route == nullptr ? "" : route->name();
}

std::shared_ptr<EmbeddingBackend> Gateway::FindEmbedding(const std::string& model, std::string* names) const {
  if (model.empty() && embeddings_.size() == 1) return embeddings_[0].backend;
  names->clear();
  for (const EmbeddingSlot& e : embeddings_) {
    if (e.backend->model_name() == model) return e.backend;
    *names += (names->empty() ? "'" : ", '") + e.backend->model_name() + "'";
  }
  return nullptr;
}

nlohmann::json Gateway::Models(int64_t created) const {
  nlohmann::json data = nlohmann::json::array();
  const Clock::time_point now = clock().Now();
  for (const auto& route : routes_.routes()) {
    nlohmann::json backends = nlohmann::json::array();
    for (const auto& slot : route->slots()) {
      std::lock_guard<std::mutex> lock(slot->mutex);
      backends.push_back({{"name", slot->backend->name()},
                          {"kind", slot->backend->kind()},
                          {"state", CircuitStateName(slot->breaker.state(now))}});
    }
    data.push_back({{"id", route->name()},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "tachyon"},
                    {"policy", PolicyName(route->config().policy)},
                    {"backends", backends}});
    if (!route->config().aliases.empty()) data.back()["aliases"] = route->config().aliases;
    if (route->config().policy == PolicyKind::kClassify) {
      nlohmann::json classes = nlohmann::json::array();
      for (const RouteClassConfig& k : route->config().classes) {
        classes.push_back({{"name", k.name}, {"backends", k.backends}, {"policy", PolicyName(k.policy)},
                           {"fallback", k.fallback}});
      }
      data.back()["classes"] = classes;
      data.back()["default_class"] = route->config().classes[route->config().default_class].name;
    }
  }
  for (const EmbeddingSlot& e : embeddings_) {
    data.push_back({{"id", e.backend->model_name()},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "tachyon"},
                    {"type", "embedding"},
                    {"dimension", e.backend->embedder().dimension()},
                    {"max_input_tokens", e.backend->embedder().context_length()},
                    {"backends", {{{"name", e.backend->name()}, {"kind", "embedding"}, {"state", "closed"}}}}});
  }
  return {{"object", "list"}, {"data", data}};
}

void Gateway::Warm() {
  class WarmSink : public BackendSink {
   public:
    explicit WarmSink(std::shared_ptr<BackendSlot> slot) : slot_(std::move(slot)) {}
    void OnChunk(BackendChunk) override {}
    void OnDone(BackendResult result) override {
      if (result.kind != BackendResult::Kind::kOk) {
        std::fprintf(stderr, "tachyon serve: backend %s: the warm-up request failed: %s\n",
                     slot_->backend->name().c_str(), result.error.message.c_str());
      }
      slot_->warm = true;  // ready either way: a failed warm-up says nothing the first request would not
    }

   private:
    std::shared_ptr<BackendSlot> slot_;
  };
  for (const auto& slot : slots_) {
    if (std::string(slot->backend->kind()) != "local" || slot->served.load()) continue;
    auto parsed = ParseCompletionRequest(R"({"prompt":"Hello","max_tokens":1,"temperature":0})", Endpoint::kCompletions);
    if (!std::holds_alternative<CompletionRequest>(parsed)) continue;
    slot->served = true;
    slot->warm = false;
    BackendRequest request{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                           .id = "cmpl-warmup",
                           .created = 0,
                           .model_name = slot->backend->model_name(),
                           .arrival = std::chrono::steady_clock::now()};
    auto start = [slot, request = std::move(request)]() mutable {
      slot->backend->Start(std::move(request), std::make_shared<WarmSink>(slot));
    };
    if (offload_) {
      offload_(std::move(start));
    } else {
      start();
    }
  }
}

int Gateway::Ready(nlohmann::json* body) const {
  nlohmann::json warming = nlohmann::json::array();
  for (const auto& slot : slots_) {
    if (!slot->warm.load()) warming.push_back(slot->backend->name());
  }
  if (warming.empty()) {
    *body = {{"status", "ready"}};
    return 200;
  }
  *body = {{"status", "warming"}, {"backends", warming}};
  return 503;
}

int Gateway::Health(nlohmann::json* body) const {
  const Clock::time_point now = clock().Now();
  nlohmann::json backends = nlohmann::json::object(), routes = nlohmann::json::object();
  for (const auto& slot : slots_) {
    std::lock_guard<std::mutex> lock(slot->mutex);
    backends[slot->backend->name()] = {{"kind", slot->backend->kind()},
                                       {"state", CircuitStateName(slot->breaker.state(now))},
                                       {"in_flight", slot->outstanding}};
  }
  for (const EmbeddingSlot& e : embeddings_) {
    backends[e.backend->name()] = {{"kind", "embedding"}, {"state", "closed"}, {"model", e.backend->model_name()}};
  }
  bool all = true, any = routes_.empty();
  for (const auto& route : routes_.routes()) {
    int available = 0;
    for (const auto& slot : route->slots()) {
      std::lock_guard<std::mutex> lock(slot->mutex);
      available += slot->breaker.WouldAllow(now) || slot->breaker.state(now) == CircuitBreaker::State::kHalfOpen;
    }
    routes[route->name()] = available > 0 ? "ok" : "unavailable";
    all &= available > 0;
    any |= available > 0;
  }
  *body = {{"status", all ? "ok" : any ? "degraded" : "unavailable"}, {"routes", routes}, {"backends", backends}};
  return all ? 200 : 503;
}

}  // namespace tachyon
