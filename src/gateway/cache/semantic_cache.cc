#include "gateway/cache/semantic_cache.h"

#include <algorithm>
#include <cstdio>

#include "gateway/cache/exact_cache.h"

namespace tachyon {
namespace {


constexpr size_t kCandidates = 4;  // nearest entries checked per lookup


size_t EntryBytes(const SemanticEntry& e) {
  return e.key.size() + e.route.size() + e.tenant.size() + e.scope.size() + e.embedder.size() + e.question.size() +
         e.vector.size() * sizeof(float) + e.answer.text.size() + e.answer.model.size() + 192;
}

// A message's text: a string, or text parts only.
bool MessageText(const nlohmann::json& content, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) return false;
  out->clear();
  for (const nlohmann::json& part : content) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return false;
    }
    if (!out->empty()) out->push_back('\n');
    *out += part["text"].get<std::string>();
  }
  return true;
}

}  // namespace

bool SemanticKey(const CompletionRequest& request, const std::string& route, const std::string& tenant,
                 std::string* question, std::string* scope_text, bool keep_model) {
  if (!request.body.is_object()) return false;
  nlohmann::json body = AnswerBody(request, keep_model);
  if (request.endpoint == Endpoint::kChatCompletions) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) return false;
    nlohmann::json& last = body["messages"].back();
    if (!last.is_object() || last.value("role", "") != "user" || !last.contains("content")) return false;
    if (!MessageText(last["content"], question)) return false;
    last["content"] = "";
  } else {
    if (!body.contains("prompt") || !body["prompt"].is_string()) return false;
    *question = body["prompt"].get<std::string>();
    body.erase("prompt");
  }
  if (question->find_first_not_of(" \t\r\n") == std::string::npos) return false;
  *scope_text = CacheKeyText(body, request.endpoint, route, tenant);
  return true;
}

SemanticCache::SemanticCache(size_t max_entries, size_t max_bytes, std::shared_ptr<CacheStore> db, Counter* dropped,
                             const Clock* clock)
    : max_entries_(max_entries), max_bytes_(max_bytes), db_(std::move(db)), dropped_(dropped), clock_(Clock::Or(clock)) {
  if (db_) {
    db_->Subscribe(CacheTable::kSemantic,
                   [this](CacheTable, bool put, StoredEntry e) { OnStoreChange(put, std::move(e)); });
  }
}

SemanticCache::~SemanticCache() {
  {
    std::lock_guard<std::mutex> lock(puts_mutex_);
    puts_stopping_ = true;
  }
  puts_wake_.notify_all();
  if (inserter_.joinable()) inserter_.join();  // what is queued goes in first
  if (db_) db_->Subscribe(CacheTable::kSemantic, nullptr);  // waits out a change being delivered
}

void SemanticCache::PutLater(SemanticEntry entry, double ttl_seconds) {
  {
    std::lock_guard<std::mutex> lock(puts_mutex_);
    if (puts_.size() >= kMaxQueuedPuts) {
      if (dropped_ != nullptr) dropped_->Add();
      return;
    }
    puts_.emplace_back(std::move(entry), ttl_seconds);
    if (!inserter_.joinable()) {
      inserter_ = std::thread([this] {
        std::unique_lock<std::mutex> lock(puts_mutex_);
        while (true) {
          putting_ = false;
          puts_idle_.notify_all();
          puts_wake_.wait(lock, [&] { return puts_stopping_ || !puts_.empty(); });
          if (puts_.empty()) return;
          putting_ = true;
          std::pair<SemanticEntry, double> next = std::move(puts_.front());
          puts_.pop_front();
          lock.unlock();
          Put(std::move(next.first), next.second);
          lock.lock();
        }
      });
    }
  }
  puts_wake_.notify_one();
}

void SemanticCache::FlushPuts() {
  std::unique_lock<std::mutex> lock(puts_mutex_);
  puts_idle_.wait(lock, [&] { return puts_.empty() && !putting_; });
}

std::shared_ptr<SemanticEntry> SemanticCache::FromStored(StoredEntry& stored, double unix_now,
                                                         Clock::time_point now) const {
  auto at = [&](double unix_time) { return SteadyTime(unix_time, unix_now, now); };
  auto e = std::make_shared<SemanticEntry>();
  e->key = std::move(stored.key);
  e->route = std::move(stored.route);
  e->tenant = std::move(stored.tenant);
  e->scope = std::move(stored.scope);
  e->embedder = std::move(stored.embedder);
  e->question = std::move(stored.question);
  e->vector = std::move(stored.vector);
  e->answer = std::move(stored.answer);
  e->stored = at(stored.stored_unix);
  e->expires = at(stored.expires_unix);
  return e;
}

void SemanticCache::OnStoreChange(bool put, StoredEntry e) {
  if (!put && e.key.empty()) {  // back after an outage: what others changed meanwhile is read anew
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lru_.clear();
      by_key_.clear();
      by_id_.clear();
      indexes_.clear();
      bytes_ = 0;
    }
    if (Status s = Load(); !s.ok()) std::fprintf(stderr, "tachyon: semantic cache: reload: %s\n", s.message().c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!put) {
    if (auto it = by_key_.find(e.key); it != by_key_.end()) EraseLocked(it->second, false);
    return;
  }
  InsertLocked(FromStored(e, clock_.UnixSeconds(), clock_.Now()));
  EvictLocked();
}

Status SemanticCache::Load() {
  if (!db_) return Status::Ok();
  const double unix_now = clock_.UnixSeconds();
  ASSIGN_OR_RETURN(std::vector<StoredEntry> stored, db_->Load(CacheTable::kSemantic, unix_now, max_entries_));
  const Clock::time_point now = clock_.Now();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = stored.rbegin(); it != stored.rend(); ++it) {  // oldest first: the newest ends in front
    InsertLocked(FromStored(*it, unix_now, now));
  }
  EvictLocked();
  return Status::Ok();
}

void SemanticCache::DropEmbedderLocked(const std::string& embedder) {
  size_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    auto next = std::next(it);
    if ((*it)->embedder == embedder) {
      EraseLocked(it, true);
      ++n;
    }
    it = next;
  }
  indexes_.erase(embedder);
  std::fprintf(stderr, "tachyon: semantic cache: the embedder '%s' changed its dimension; %zu entries dropped\n",
               embedder.c_str(), n);
}

void SemanticCache::InsertLocked(std::shared_ptr<SemanticEntry> e) {
  if (e->vector.empty()) return;
  if (auto it = indexes_.find(e->embedder);
      it != indexes_.end() && it->second->dimension() != static_cast<int>(e->vector.size())) {
    DropEmbedderLocked(e->embedder);  // the newer vector's dimension is the embedder's now
  }
  std::unique_ptr<VectorIndex>& index = indexes_[e->embedder];
  if (!index) index = std::make_unique<VectorIndex>(static_cast<int>(e->vector.size()));
  if (auto old = by_key_.find(e->key); old != by_key_.end()) EraseLocked(old->second, false);
  e->id = next_id_++;
  e->bytes = EntryBytes(*e);
  bytes_ += e->bytes;
  index->Add(e->scope, e->id, e->vector.data());
  lru_.push_front(e);
  by_key_[e->key] = lru_.begin();
  by_id_[e->id] = lru_.begin();
}

void SemanticCache::EraseLocked(Lru::iterator it, bool from_store) {
  const std::shared_ptr<SemanticEntry> e = *it;
  if (auto index = indexes_.find(e->embedder); index != indexes_.end()) index->second->Remove(e->scope, e->id);
  bytes_ -= e->bytes;
  by_key_.erase(e->key);
  by_id_.erase(e->id);
  lru_.erase(it);
  if (from_store && db_) db_->Delete(CacheTable::kSemantic, e->key);
}

void SemanticCache::EvictLocked() {
  while (!lru_.empty() && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) EraseLocked(std::prev(lru_.end()), true);
}

std::vector<SemanticCache::Candidate> SemanticCache::Search(const std::string& embedder, const std::string& scope,
                                                            std::span<const float> query, size_t k,
                                                            Clock::time_point now) {
  std::vector<Candidate> out;
  if (db_ && !db_->available()) return out;  // a shared store is down: what others purged is unknown
  std::lock_guard<std::mutex> lock(mutex_);
  auto index = indexes_.find(embedder);
  if (index == indexes_.end()) return out;
  const int dim = index->second->dimension();
  if (static_cast<size_t>(dim) != query.size()) {
    DropEmbedderLocked(embedder);
    return out;
  }
  // The index's cosines are approximate (int8 graph nodes): recomputed from the
  // entries' vectors, and the order with them, over twice the candidates asked.
  for (const auto& [id, approximate] : index->second->Search(scope, query.data(), 2 * k)) {
    auto it = by_id_.find(id);
    if (it == by_id_.end()) continue;
    if ((*it->second)->expires <= now) {
      EraseLocked(it->second, true);
      continue;
    }
    out.push_back({*it->second, Dot(query.data(), (*it->second)->vector.data(), dim)});
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) { return a.similarity > b.similarity; });
  if (out.size() > k) out.resize(k);
  return out;
}

void SemanticCache::Touch(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = by_key_.find(key); it != by_key_.end()) lru_.splice(lru_.begin(), lru_, it->second);
}

void SemanticCache::Put(SemanticEntry entry, double ttl_seconds) {
  auto e = std::make_shared<SemanticEntry>(std::move(entry));
  if (EntryBytes(*e) > max_bytes_) return;  // larger than the whole cache
  const Clock::time_point now = clock_.Now();
  e->stored = now;
  e->expires = now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ttl_seconds));
  std::lock_guard<std::mutex> lock(mutex_);
  if (db_) {
    const double unix_now = clock_.UnixSeconds();
    db_->Put(CacheTable::kSemantic, {.key = e->key,
                                         .route = e->route,
                                         .tenant = e->tenant,
                                         .answer = e->answer,
                                         .scope = e->scope,
                                         .embedder = e->embedder,
                                         .question = e->question,
                                         .vector = e->vector,
                                         .stored_unix = unix_now,
                                         .expires_unix = unix_now + ttl_seconds});
  }
  InsertLocked(std::move(e));
  EvictLocked();
}

size_t SemanticCache::Purge(const std::string& route, const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const SemanticEntry& e = **it;
    auto next = std::next(it);
    if ((route.empty() || e.route == route) && (tenant.empty() || e.tenant == tenant)) {
      EraseLocked(it, true);
      ++n;
    }
    it = next;
  }
  return n;
}

size_t SemanticCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

size_t SemanticCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

nlohmann::json SemanticCache::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json routes = nlohmann::json::object();
  for (const auto& e : lru_) {
    nlohmann::json& n = routes[e->route];
    n = n.is_null() ? 1 : n.get<int64_t>() + 1;
  }
  nlohmann::json indexes = nlohmann::json::object();
  for (const auto& [id, index] : indexes_) {
    indexes[id] = {{"entries", index->size()}, {"scopes", index->scopes()}, {"in_graphs", index->graph_entries()}};
  }
  return {{"entries", lru_.size()}, {"bytes", bytes_}, {"routes", routes}, {"indexes", indexes}};
}

SemanticCacheStage::SemanticCacheStage(std::unordered_map<std::string, SemanticRouteOptions> routes,
                                       std::shared_ptr<SemanticCache> store, MetricsRegistry* metrics)
    : routes_(std::move(routes)),
      store_(std::move(store)),
      metrics_(metrics),
      lookups_(&metrics->AddCounter("tachyon:cache_lookups_total",
                                    "Cache lookups by cache kind, result and route", {"kind", "result", "route"})),
      rejections_(&metrics->AddCounter("tachyon:cache_semantic_rejections_total",
                                       "Semantic candidates at or near the threshold turned away, by what turned "
                                       "them away (verifier, numbers, negation, entities)",
                                       {"reason"})),
      similarity_(&metrics->AddHistogram(
          "tachyon:cache_similarity", "Cosine of the best semantic candidate: hits, and near misses (within 0.1 "
                                      "under the threshold, or turned away by the verifier or a guard)",
          {"result"}, {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.88, 0.9, 0.92, 0.94, 0.96, 0.98, 0.99, 1.0})) {
  lookup_seconds_ = &metrics->AddHistogram("tachyon:cache_lookup_seconds",
                                           "Time of a cache lookup (key, hash and store), hit or miss", {"kind"},
                                           {1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
                                            2.5e-3, 5e-3, 1e-2})
                        .With({"semantic"});
  entries_ = &metrics->AddGauge("tachyon:cache_entries", "Entries held by a cache", {"kind"}).With({"semantic"});
  bytes_ = &metrics->AddGauge("tachyon:cache_bytes", "Bytes held by a cache", {"kind"}).With({"semantic"});
  // Read at scrape time: entries arrive on the inserter thread and from other replicas.
  collector_ = metrics->AddCollector([this] {
    entries_->Set(static_cast<double>(store_->entries()));
    bytes_->Set(static_cast<double>(store_->bytes()));
  });
}

SemanticCacheStage::~SemanticCacheStage() { metrics_->RemoveCollector(collector_); }

std::optional<StageAnswer> SemanticCacheStage::Process(GatewayRequest& request) {
  const CompletionRequest& r = *request.request;
  const std::string& route_name = request.route.empty() ? r.model : request.route;
  auto route = routes_.find(route_name);
  if (route == routes_.end()) return std::nullopt;
  const SemanticRouteOptions& options = route->second;
  auto result = [&](const char* status) {
    if (request.cache_status.empty() || std::string_view(status) != "bypass") request.cache_status = status;
    lookups_->With({"semantic", status, route_name}).Add();
  };
  const bool sampled = r.sampling.temperature > 0;
  std::string question, scope_text;
  if (HasCacheDirective(request.cache_control, "no-store") || (sampled && !options.sampled) || r.n != 1 ||
      r.num_logprobs >= 0 ||
      !SemanticKey(r, route_name, request.tenant, &question, &scope_text, options.key_model)) {
    result("bypass");
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<float>> vector = options.embedder->Embed(std::span<const std::string>(&question, 1));
  const auto embedded = std::chrono::steady_clock::now();
  request.AddStepSpan("embed", start, embedded, {{"tachyon.embedder", options.embedder->id()}});
  if (!vector.ok()) {
    std::fprintf(stderr, "tachyon: semantic cache: embedding failed (%s); not cached\n",
                 vector.status().message().c_str());
    result("bypass");
    return std::nullopt;
  }
  request.semantic_embedder = options.embedder->id();
  request.semantic_scope = CacheKeyHash(scope_text + "\n" + request.semantic_embedder);
  request.semantic_question = std::move(question);
  request.semantic_vector = std::move(vector).value();
  if (HasCacheDirective(request.cache_control, "no-cache")) {
    result("miss");  // a fresh answer asked for; it is stored
    return std::nullopt;
  }
  const Clock::time_point now = store_->clock().Now();
  const std::vector<SemanticCache::Candidate> candidates =
      store_->Search(request.semantic_embedder, request.semantic_scope, request.semantic_vector, kCandidates, now);
  request.AddStepSpan("search", embedded, std::chrono::steady_clock::now(),
                      {{"tachyon.candidates", static_cast<int64_t>(candidates.size())}});
  HitOptions hit = options.hit;
  if (options.audit) hit.threshold = options.audit->threshold();
  std::optional<SemanticCache::Candidate> chosen;
  for (const SemanticCache::Candidate& c : candidates) {
    const HitDecision d = DecideHit(c.similarity, c.entry->question, request.semantic_question,
                                    options.verifier.get(), hit);
    if (d.hit) {
      chosen = c;
      break;
    }
    if (d.rejected_by != "similarity") rejections_->With({std::string(d.rejected_by)}).Add();
  }
  lookup_seconds_->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!chosen) {
    if (!candidates.empty() && candidates[0].similarity >= hit.threshold - std::max(0.1, hit.band)) {
      similarity_->With({"near_miss"}).Observe(candidates[0].similarity);
    }
    result("miss");
    return std::nullopt;
  }
  similarity_->With({"hit"}).Observe(chosen->similarity);
  store_->Touch(chosen->entry->key);
  result("hit");
  request.cache_age_seconds = std::chrono::duration<double>(now - chosen->entry->stored).count();
  request.cache_similarity = chosen->similarity;
  StageAnswer answer = RenderCachedAnswer(chosen->entry->answer, request);
  answer.answered_by = "semantic-cache";
  if (options.audit && options.audit->Begin()) {
    answer.audit = [audit = options.audit, similarity = chosen->similarity, cached = chosen->entry->answer.text](
                       std::optional<std::string> fresh, bool deterministic, const std::string& why_not) {
      audit->End(similarity, cached, fresh, deterministic, why_not);
    };
  }
  return answer;
}

void SemanticCacheStage::OnAnswer(const GatewayRequest& request, const CapturedAnswer& answer) {
  if (request.semantic_scope.empty() || request.cache_status == "hit") return;
  if (answer.finish_reason != "stop" && answer.finish_reason != "length") return;
  const std::string& route_name = request.route.empty() ? request.request->model : request.route;
  auto route = routes_.find(route_name);
  if (route == routes_.end()) return;
  SemanticEntry e;
  e.key = CacheKeyHash(request.semantic_scope + "\n" + request.semantic_question);
  e.route = route_name;
  e.tenant = request.tenant;
  e.scope = request.semantic_scope;
  e.embedder = request.semantic_embedder;
  e.question = request.semantic_question;
  e.vector = request.semantic_vector;
  e.answer = answer;
  store_->PutLater(std::move(e), route->second.ttl_seconds);
}

}  // namespace tachyon
