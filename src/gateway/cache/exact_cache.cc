#include "gateway/cache/exact_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <xxhash.h>

namespace tachyon {
namespace {


// Integral floats become integers (1.0 and 1 are the same request); object
// keys are already sorted (nlohmann::json keeps them in a std::map). Top-level
// keys in `skip` are left out, so the body is copied once.
}  // namespace

nlohmann::json CanonicalJson(const nlohmann::json& v, std::initializer_list<std::string_view> skip) {
  if (v.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (std::find(skip.begin(), skip.end(), it.key()) == skip.end()) out[it.key()] = CanonicalJson(it.value());
    }
    return out;
  }
  if (v.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const nlohmann::json& x : v) out.push_back(CanonicalJson(x));
    return out;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9007199254740992.0) {
      return static_cast<int64_t>(d);
    }
  }
  return v;
}

namespace {

// What an entry is counted as against max_bytes.
size_t EntryBytes(const std::string& key, const CapturedAnswer& a) {
  return key.size() + a.text.size() + a.model.size() + a.finish_reason.size() + 128;
}

}  // namespace

bool HasCacheDirective(const std::string& cache_control, std::string_view directive) {
  size_t pos = 0;
  while ((pos = cache_control.find(directive, pos)) != std::string::npos) {
    const bool start = pos == 0 || cache_control[pos - 1] == ' ' || cache_control[pos - 1] == ',';
    const size_t end = pos + directive.size();
    const bool stop = end == cache_control.size() || cache_control[end] == ',' || cache_control[end] == ' ' ||
                      cache_control[end] == '=';
    if (start && stop) return true;
    pos = end;
  }
  return false;
}

namespace {

// The text in pieces of about `size` bytes, cut at UTF-8 character boundaries.
std::vector<std::string> Pieces(const std::string& text, size_t size) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.size(), start + size);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}


}  // namespace

nlohmann::json AnswerBody(const CompletionRequest& request, bool keep_model) {
  if (!request.body.is_object()) return nlohmann::json::object();
  nlohmann::json body = keep_model ? CanonicalJson(request.body, {"stream", "stream_options", "user"})
                                   : CanonicalJson(request.body, {"stream", "stream_options", "user", "model"});
  if (keep_model) body["model"] = request.model;  // as parsed (a stage may have renamed it)
  return body;
}

std::string CacheKeyText(const nlohmann::json& body, Endpoint endpoint, const std::string& route,
                         const std::string& tenant) {
  // The scheme's version first: entries a store kept from before issue 31 (which could
  // hold a tool call stored as "" or a model's reasoning) are never found again; they
  // expire and are pruned.
  return std::string(kCacheKeyVersion) + "\n" + route + "\n" + tenant + "\n" +
         (endpoint == Endpoint::kChatCompletions ? "chat" : "completions") + "\n" +
         body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string CacheKeyHash(const std::string& text) {
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return hex;
}

std::string ExactCacheKeyText(const CompletionRequest& request, const std::string& route, const std::string& tenant,
                              bool keep_model) {
  return CacheKeyText(AnswerBody(request, keep_model), request.endpoint, route, tenant);
}

ExactCache::ExactCache(size_t max_entries, size_t max_bytes, std::shared_ptr<CacheStore> db, const Clock* clock)
    : max_entries_(max_entries), max_bytes_(max_bytes), db_(std::move(db)), clock_(Clock::Or(clock)) {
  if (db_) {
    db_->Subscribe(CacheTable::kExact,
                   [this](CacheTable, bool put, StoredEntry e) { OnStoreChange(put, std::move(e)); });
  }
}

ExactCache::~ExactCache() {
  if (db_) db_->Subscribe(CacheTable::kExact, nullptr);  // waits out a change being delivered
}

void ExactCache::OnStoreChange(bool put, StoredEntry e) {
  if (!put && e.key.empty()) {  // back after an outage: what others changed meanwhile is read anew
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lru_.clear();
      index_.clear();
      bytes_ = 0;
    }
    if (Status s = Load(); !s.ok()) std::fprintf(stderr, "tachyon: exact cache: reload: %s\n", s.message().c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!put) {
    if (auto it = index_.find(e.key); it != index_.end()) {
      bytes_ -= it->second->second.bytes;
      lru_.erase(it->second);
      index_.erase(it);
    }
    return;
  }
  const double unix_now = clock_.UnixSeconds();
  const Clock::time_point now = clock_.Now();
  auto at = [&](double unix_time) { return SteadyTime(unix_time, unix_now, now); };
  InsertLocked(e.key, Entry{.answer = std::move(e.answer),
                            .route = std::move(e.route),
                            .tenant = std::move(e.tenant),
                            .stored = at(e.stored_unix),
                            .expires = at(e.expires_unix)});
  EvictLocked();
}

std::optional<ExactCache::Entry> ExactCache::Find(const std::string& key, Clock::time_point now) {
  if (db_ && !db_->available()) return std::nullopt;  // a shared store is down: what others purged is unknown
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  if (it->second->second.expires <= now) {
    bytes_ -= it->second->second.bytes;
    lru_.erase(it->second);
    index_.erase(it);
    if (db_) db_->Delete(CacheTable::kExact, key);
    return std::nullopt;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ExactCache::InsertLocked(const std::string& key, Entry e) {
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= it->second->second.bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  e.bytes = EntryBytes(key, e.answer);
  bytes_ += e.bytes;
  lru_.emplace_front(key, std::move(e));
  index_[key] = lru_.begin();
}

void ExactCache::Put(const std::string& key, CapturedAnswer answer, Clock::time_point now, double ttl_seconds,
                     const std::string& route, const std::string& tenant) {
  if (EntryBytes(key, answer) > max_bytes_) return;  // larger than the whole cache
  std::lock_guard<std::mutex> lock(mutex_);
  if (db_) {
    const double unix_now = clock_.UnixSeconds();
    db_->Put(CacheTable::kExact, {.key = key,
                                      .route = route,
                                      .tenant = tenant,
                                      .answer = answer,
                                      .stored_unix = unix_now,
                                      .expires_unix = unix_now + ttl_seconds});
  }
  InsertLocked(key, Entry{.answer = std::move(answer),
                          .route = route,
                          .tenant = tenant,
                          .stored = now,
                          .expires = now + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(ttl_seconds))});
  EvictLocked();
}

Status ExactCache::Load() {
  if (!db_) return Status::Ok();
  const double unix_now = clock_.UnixSeconds();
  ASSIGN_OR_RETURN(std::vector<StoredEntry> stored, db_->Load(CacheTable::kExact, unix_now, max_entries_));
  const Clock::time_point now = clock_.Now();
  auto at = [&](double unix_time) { return SteadyTime(unix_time, unix_now, now); };
  std::lock_guard<std::mutex> lock(mutex_);
  // Oldest first, so that the most recent ends at the front of the LRU.
  for (auto it = stored.rbegin(); it != stored.rend(); ++it) {
    InsertLocked(it->key, Entry{.answer = std::move(it->answer),
                                .route = std::move(it->route),
                                .tenant = std::move(it->tenant),
                                .stored = at(it->stored_unix),
                                .expires = at(it->expires_unix)});
  }
  EvictLocked();
  return Status::Ok();
}

void ExactCache::EvictLocked() {
  while (!lru_.empty() && (lru_.size() > max_entries_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().second.bytes;
    if (db_) db_->Delete(CacheTable::kExact, lru_.back().first);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t ExactCache::entries() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lru_.size();
}

size_t ExactCache::Purge(const std::string& route, const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (auto it = lru_.begin(); it != lru_.end();) {
    const Entry& e = it->second;
    const std::string& entry_route = e.route.empty() ? e.answer.model : e.route;
    if ((!route.empty() && entry_route != route) || (!tenant.empty() && e.tenant != tenant)) {
      ++it;
      continue;
    }
    bytes_ -= it->second.bytes;
    if (db_) db_->Delete(CacheTable::kExact, it->first);
    index_.erase(it->first);
    it = lru_.erase(it);
    ++n;
  }
  return n;
}

nlohmann::json ExactCache::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json routes = nlohmann::json::object();
  for (const auto& [key, entry] : lru_) {
    nlohmann::json& n = routes[entry.route.empty() ? entry.answer.model : entry.route];
    n = n.is_null() ? 1 : n.get<int64_t>() + 1;
  }
  return {{"entries", lru_.size()},
          {"bytes", bytes_},
          {"store", db_ ? db_->describe() : std::string("memory")},
          {"routes", routes}};
}

size_t ExactCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

ExactCacheStage::ExactCacheStage(ExactCacheOptions options, std::shared_ptr<ExactCache> store,
                                 MetricsRegistry* metrics)
    : options_(std::move(options)),
      store_(store ? std::move(store) : std::make_shared<ExactCache>(options_.max_entries, options_.max_bytes)),
      lookups_(&metrics->AddCounter("tachyon:cache_lookups_total",
                                    "Cache lookups by cache kind, result and route", {"kind", "result", "route"})) {
  lookup_seconds_ = &metrics->AddHistogram("tachyon:cache_lookup_seconds",
                                           "Time of a cache lookup (key, hash and store), hit or miss", {"kind"},
                                           {1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3,
                                            2.5e-3, 5e-3, 1e-2})
                        .With({"exact"});
  // The gauges follow the store at every write.
  entries_ = &metrics->AddGauge("tachyon:cache_entries", "Entries held by a cache", {"kind"}).With({"exact"});
  bytes_ = &metrics->AddGauge("tachyon:cache_bytes", "Bytes held by a cache", {"kind"}).With({"exact"});
  entries_->Set(static_cast<double>(store_->entries()));
  bytes_->Set(static_cast<double>(store_->bytes()));
}

std::optional<StageAnswer> ExactCacheStage::Process(GatewayRequest& request) {
  const CompletionRequest& r = *request.request;
  const std::string& route_name = request.route.empty() ? r.model : request.route;
  auto route = options_.routes.find(route_name);
  if (route == options_.routes.end()) return std::nullopt;  // this route is not cached
  auto result = [&](const char* status) {
    request.cache_status = status;
    lookups_->With({"exact", status, route_name}).Add();
  };
  const bool sampled = r.sampling.temperature > 0;
  // Logprobs are not stored: a hit would answer them with null.
  if (HasCacheDirective(request.cache_control, "no-store") || (sampled && !route->second.sampled) || r.n != 1 ||
      r.num_logprobs >= 0) {
    result("bypass");
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  request.cache_key = CacheKeyHash(ExactCacheKeyText(r, route_name, request.tenant, route->second.key_model));
  if (HasCacheDirective(request.cache_control, "no-cache")) {
    result("miss");  // asked for a fresh answer; it is stored
    return std::nullopt;
  }
  const Clock::time_point now = store_->clock().Now();
  std::optional<ExactCache::Entry> entry = store_->Find(request.cache_key, now);
  lookup_seconds_->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (!entry) {
    result("miss");
    return std::nullopt;
  }
  result("hit");
  request.cache_age_seconds = std::chrono::duration<double>(now - entry->stored).count();
  return RenderCachedAnswer(entry->answer, request);
}

void ExactCacheStage::OnAnswer(const GatewayRequest& request, const CapturedAnswer& answer) {
  if (request.cache_key.empty() || request.cache_status == "hit") return;
  if (answer.finish_reason != "stop" && answer.finish_reason != "length") return;
  auto route = options_.routes.find(request.route.empty() ? request.request->model : request.route);
  if (route == options_.routes.end()) return;
  store_->Put(request.cache_key, answer, store_->clock().Now(), route->second.ttl_seconds, route->first, request.tenant);
  entries_->Set(static_cast<double>(store_->entries()));
  bytes_->Set(static_cast<double>(store_->bytes()));
}

StageAnswer RenderCachedAnswer(const CapturedAnswer& answer, const GatewayRequest& request) {
  const CompletionRequest& r = *request.request;
  StageAnswer out;
  out.answered_by = "exact-cache";
  BackendResult& result = out.result;
  result.kind = BackendResult::Kind::kOk;
  result.finish_reason = answer.finish_reason;
  result.has_usage = answer.has_usage;
  result.usage = answer.usage;
  if (!r.stream) {
    result.body = CompletionBody(r.endpoint, request.id, request.created, answer.model, answer.text,
                                 answer.finish_reason, answer.usage);
    return out;
  }
  bool first = true;
  for (const std::string& piece : Pieces(answer.text, 64)) {
    out.chunks.push_back({ChunkBody(r.endpoint, request.id, request.created, answer.model, piece, "", first), piece, ""});
    first = false;
  }
  out.chunks.push_back({ChunkBody(r.endpoint, request.id, request.created, answer.model, "", answer.finish_reason, first),
                        "", answer.finish_reason});
  if (r.include_usage && answer.has_usage) {
    out.chunks.push_back({UsageChunkBody(r.endpoint, request.id, request.created, answer.model, answer.usage), "", ""});
  }
  return out;
}

}  // namespace tachyon
