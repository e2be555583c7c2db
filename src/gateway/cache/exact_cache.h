// The exact cache: a request seen before, with everything that changes its
// answer equal, is answered from the stored answer without calling a backend.
//
// Key: XXH3-128 of the route, the tenant and the canonical form (keys sorted,
// integral numbers written as integers) of the request body without the fields
// that do not change the answer (stream, stream_options, user, model: the route
// stands for it). So messages with the system prompt, tools, tool_choice,
// response_format, sampling parameters, stop, seed and logprobs are all in it.
//
// Stored: only complete answers (the backend's kOk) with finish reason "stop"
// or "length", one choice, no tool calls; never a partial stream, an error or a
// cancelled request. A request with temperature > 0 (OpenAI's default is 1) is
// cached only when its route allows sampled answers. Cache-Control from the
// client: no-cache skips the lookup (the fresh answer is stored), no-store
// skips both. A hit is replayed in the client's shape: a whole body, or an SSE
// stream (content in pieces, the finish chunk, usage when asked, [DONE]).
//
// The store: an in-memory LRU over max_entries and max_bytes with a TTL per
// route, written through to a CacheDb (SQLite) when there is one, and filled
// from it at start.
#pragma once

#include <chrono>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "base/clock.h"
#include "gateway/cache/cache_store.h"
#include "gateway/pipeline.h"
#include "obs/metrics.h"

namespace tachyon {

struct ExactCacheRouteOptions {
  double ttl_seconds = 3600;
  bool sampled = false;  // cache answers of requests with temperature > 0
  // The client's model name reaches an upstream (a remote backend without
  // upstream_model): it is in the key, so aliases of one route never share answers.
  bool key_model = false;
};

struct ExactCacheOptions {
  size_t max_entries = 100000;
  size_t max_bytes = 256 << 20;
  std::unordered_map<std::string, ExactCacheRouteOptions> routes;  // by route name: the routes cached
};

// The canonical form of a JSON value: object keys sorted, integral floats written
// as integers; top-level keys in `skip` left out.
nlohmann::json CanonicalJson(const nlohmann::json& v, std::initializer_list<std::string_view> skip = {});

// Whether a Cache-Control value (lower-case) carries the directive ("no-store").
bool HasCacheDirective(const std::string& cache_control, std::string_view directive);

// The request body as it bears on the answer: canonical, without stream,
// stream_options, user and (unless keep_model: the name reaches an upstream) model.
nlohmann::json AnswerBody(const CompletionRequest& request, bool keep_model = false);
// The key scheme's version: a change of what keys mean, or of what may be stored, raises it.
inline constexpr std::string_view kCacheKeyVersion = "v2";
// The text a cache key is the hash of: the version, route, tenant, endpoint and a canonical body.
std::string CacheKeyText(const nlohmann::json& body, Endpoint endpoint, const std::string& route,
                         const std::string& tenant);
// A cache key: XXH3-128 of the text, in hex.
std::string CacheKeyHash(const std::string& text);

// The canonical key text of a request for a route (exposed for tests).
std::string ExactCacheKeyText(const CompletionRequest& request, const std::string& route, const std::string& tenant,
                              bool keep_model = false);

class ExactCache {
 public:
  struct Entry {
    CapturedAnswer answer;
    std::string route, tenant;
    std::chrono::steady_clock::time_point stored;
    std::chrono::steady_clock::time_point expires;
    size_t bytes = 0;
  };

  // With a shared store, the other replicas' puts and deletes reach this cache.
  // clock: what TTLs are measured on (null: the real one).
  ExactCache(size_t max_entries, size_t max_bytes, std::shared_ptr<CacheStore> db = nullptr,
             const Clock* clock = nullptr);
  ~ExactCache();
  ExactCache(const ExactCache&) = delete;
  ExactCache& operator=(const ExactCache&) = delete;

  // Reads the store's live entries into memory (most recent first, within the limits).
  Status Load();
  CacheStore* db() const { return db_.get(); }

  // The entry, if present and not expired (an expired one is dropped); refreshes its LRU place.
  std::optional<Entry> Find(const std::string& key, std::chrono::steady_clock::time_point now);
  void Put(const std::string& key, CapturedAnswer answer, std::chrono::steady_clock::time_point now,
           double ttl_seconds, const std::string& route = "", const std::string& tenant = "");
  size_t entries() const;
  size_t bytes() const;
  // Drops every entry of the route and of the tenant (an empty one: any); returns how many.
  size_t Purge(const std::string& route, const std::string& tenant = "");
  // {"entries", "bytes", "store", "routes": {route: entries}}
  nlohmann::json Stats() const;

  // What TTLs are measured on.
  const Clock& clock() const { return clock_; }

 private:
  void EvictLocked();
  void InsertLocked(const std::string& key, Entry entry);
  void OnStoreChange(bool put, StoredEntry e);
  using Lru = std::list<std::pair<std::string, Entry>>;  // most recent first
  const size_t max_entries_, max_bytes_;
  std::shared_ptr<CacheStore> db_;  // null: memory only
  mutable std::mutex mutex_;
  Lru lru_;                                                // guarded by mutex_
  std::unordered_map<std::string, Lru::iterator> index_;  // guarded by mutex_
  size_t bytes_ = 0;                                       // guarded by mutex_
  const Clock& clock_;
};

class ExactCacheStage : public Stage {
 public:
  // `store` may be carried over from the previous configuration (a reload keeps the entries).
  ExactCacheStage(ExactCacheOptions options, std::shared_ptr<ExactCache> store, MetricsRegistry* metrics);

  std::string_view name() const override { return "exact-cache"; }
  std::optional<StageAnswer> Process(GatewayRequest& request) override;
  bool changes_body() const override { return false; }  // reads the request only
  bool wants_answers() const override { return true; }
  void OnAnswer(const GatewayRequest& request, const CapturedAnswer& answer) override;
  void SpanAttributes(const GatewayRequest& request, std::vector<Attribute>* out) const override {
    if (!request.cache_status.empty()) out->push_back({"tachyon.cache", request.cache_status});
  }

  const std::shared_ptr<ExactCache>& store() const { return store_; }

 private:
  ExactCacheOptions options_;
  std::shared_ptr<ExactCache> store_;
  CounterFamily* lookups_;  // {kind, result, route}
  Histogram* lookup_seconds_;  // {kind="exact"}: key, hash and store lookup
  Gauge* entries_;
  Gauge* bytes_;
};

// A stored answer rendered for a request (its id, created, stream or not).
StageAnswer RenderCachedAnswer(const CapturedAnswer& answer, const GatewayRequest& request);

}  // namespace tachyon
