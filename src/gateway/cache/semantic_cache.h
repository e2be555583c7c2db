// The semantic cache: a question asked before in other words, in the same
// context, answered from the stored answer.
//
// Scope: a candidate must have the same compatibility fingerprint as the
// request: XXH3-128 of the route, the tenant, the endpoint and the canonical
// request body with the last user message's content blanked (so the system
// prompt, earlier turns, tools, response format and sampling parameters are all
// in it) and the embedder's id. Only the last user message is embedded and
// compared. An answer never crosses tenants, system prompts or embedders.
//
// Decision (embed/pair_verifier.h): the nearest entries of the scope by cosine;
// a hit needs cosine >= the route's threshold and the verifier's consent (when
// the route sets `verifier`); cosines in the band just under the threshold hit
// only when the guards pass (numbers, negation, named entities), and with
// guards = "all" every hit passes them too.
//
// Stored: as the exact cache (complete answers with finish reason stop or
// length, temperature 0 unless the route allows sampled answers), with the
// question and its vector; bounded by max_entries and max_bytes (LRU), TTL per
// route, written behind to the SQLite store and read back at start (the
// vector index is rebuilt from it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "embed/embedder.h"
#include "embed/pair_verifier.h"
#include "gateway/cache/cache_store.h"
#include "gateway/cache/semantic_audit.h"
#include "gateway/pipeline.h"
#include "gateway/cache/vector_index.h"
#include "obs/metrics.h"

namespace tachyon {

// The text compared (the last user message, or a completion's prompt) and the
// scope text of a request; false when the request has nothing to compare (the
// last message is not the user's, or holds other than text).
// keep_model: the client's model name is part of the scope (it reaches an upstream).
bool SemanticKey(const CompletionRequest& request, const std::string& route, const std::string& tenant,
                 std::string* question, std::string* scope_text, bool keep_model = false);

struct SemanticEntry {
  std::string key;  // the store's key: XXH3-128 of the scope and the question
  std::string route, tenant, scope, embedder, question;
  std::vector<float> vector;
  CapturedAnswer answer;
  std::chrono::steady_clock::time_point stored, expires;
  size_t bytes = 0;
  uint64_t id = 0;  // the index's label
};

class SemanticCache {
 public:
  // With a shared store, the other replicas' puts and deletes reach this cache.
  // `dropped` (may be null) counts answers PutLater turned away at kMaxQueuedPuts.
  // clock: what TTLs are measured on (null: the real one).
  SemanticCache(size_t max_entries, size_t max_bytes, std::shared_ptr<CacheStore> db = nullptr,
                Counter* dropped = nullptr, const Clock* clock = nullptr);
  // Answers waiting for the inserter at most; past it PutLater drops them (counted).
  static constexpr size_t kMaxQueuedPuts = 4096;
  ~SemanticCache();
  SemanticCache(const SemanticCache&) = delete;
  SemanticCache& operator=(const SemanticCache&) = delete;

  // Reads the store's live entries and indexes them.
  Status Load();

  struct Candidate {
    std::shared_ptr<const SemanticEntry> entry;
    float similarity = 0;
  };
  // The k nearest live entries of the scope under the embedder, most similar
  // first (expired ones are dropped on the way). A query of another dimension than
  // the embedder's entries (a remote model changed under the same id) finds
  // nothing, and those entries are dropped: they can never match again.
  std::vector<Candidate> Search(const std::string& embedder, const std::string& scope, std::span<const float> query,
                                size_t k, std::chrono::steady_clock::time_point now);
  // Marks the entry used (its LRU place).
  void Touch(const std::string& key);
  void Put(SemanticEntry entry, double ttl_seconds);
  // Put on the cache's own inserter thread: an HNSW insertion costs a
  // millisecond or so, which the backend's thread (an I/O thread, for an
  // upstream) must not spend.
  void PutLater(SemanticEntry entry, double ttl_seconds);
  // Waits until every PutLater so far is in (tests).
  void FlushPuts();
  size_t Purge(const std::string& route, const std::string& tenant = "");
  size_t entries() const;
  size_t bytes() const;
  nlohmann::json Stats() const;

  // What TTLs are measured on.
  const Clock& clock() const { return clock_; }

 private:
  using Lru = std::list<std::shared_ptr<SemanticEntry>>;  // most recent first
  // Invariant: every entry of an embedder id has its index's dimension; an entry
  // of another dimension drops the id's entries and index (the newest wins).
  void InsertLocked(std::shared_ptr<SemanticEntry> e);
  void DropEmbedderLocked(const std::string& embedder);
  void EraseLocked(Lru::iterator it, bool from_store);
  void EvictLocked();
  std::shared_ptr<SemanticEntry> FromStored(StoredEntry& stored, double unix_now,
                                            std::chrono::steady_clock::time_point now) const;
  void OnStoreChange(bool put, StoredEntry e);

  const size_t max_entries_, max_bytes_;
  std::shared_ptr<CacheStore> db_;
  mutable std::mutex mutex_;
  Lru lru_;                                                    // guarded by mutex_
  std::unordered_map<std::string, Lru::iterator> by_key_;      // guarded by mutex_
  std::unordered_map<uint64_t, Lru::iterator> by_id_;          // guarded by mutex_
  std::unordered_map<std::string, std::unique_ptr<VectorIndex>> indexes_;  // by embedder id; guarded by mutex_
  size_t bytes_ = 0;                                           // guarded by mutex_
  uint64_t next_id_ = 1;                                       // guarded by mutex_

  std::mutex puts_mutex_;
  std::condition_variable puts_wake_, puts_idle_;
  std::deque<std::pair<SemanticEntry, double>> puts_;  // guarded by puts_mutex_; at most kMaxQueuedPuts
  Counter* dropped_ = nullptr;
  bool putting_ = false, puts_stopping_ = false;       // guarded by puts_mutex_
  std::thread inserter_;                               // started by the first PutLater
  const Clock& clock_;
};

struct SemanticRouteOptions {
  std::shared_ptr<Embedder> embedder;
  std::shared_ptr<const PairVerifier> verifier;  // null: no verifier
  HitOptions hit;
  double ttl_seconds = 3600;
  bool sampled = false;
  bool key_model = false;  // as ExactCacheRouteOptions::key_model
  // The live audit of the route's hits (gateway/cache/semantic_audit.h); null: none.
  // Its threshold is the one hits need (raised by auto_threshold).
  std::shared_ptr<SemanticAudit> audit;
};

class SemanticCacheStage : public Stage {
 public:
  SemanticCacheStage(std::unordered_map<std::string, SemanticRouteOptions> routes,
                     std::shared_ptr<SemanticCache> store, MetricsRegistry* metrics);
  ~SemanticCacheStage() override;

  std::string_view name() const override { return "semantic-cache"; }
  std::optional<StageAnswer> Process(GatewayRequest& request) override;
  bool changes_body() const override { return false; }  // reads the request only
  bool costly(const std::string& route) const override { return routes_.count(route) != 0; }  // embeds the question
  bool wants_answers() const override { return true; }
  void OnAnswer(const GatewayRequest& request, const CapturedAnswer& answer) override;
  void SpanAttributes(const GatewayRequest& request, std::vector<Attribute>* out) const override {
    if (!request.cache_status.empty()) out->push_back({"tachyon.cache", request.cache_status});
    if (request.cache_similarity >= 0) out->push_back({"tachyon.cache_similarity", request.cache_similarity});
  }

 private:
  std::unordered_map<std::string, SemanticRouteOptions> routes_;
  std::shared_ptr<SemanticCache> store_;
  MetricsRegistry* metrics_;
  int collector_ = -1;
  CounterFamily* lookups_;        // {kind, result, route}
  CounterFamily* rejections_;     // {reason}
  HistogramFamily* similarity_;   // {result}: hit, near_miss
  Histogram* lookup_seconds_;     // {kind="semantic"}: embedding and search
  Gauge* entries_;
  Gauge* bytes_;
};

}  // namespace tachyon
