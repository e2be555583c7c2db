#include "gateway/redis_store.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

namespace tachyon {
namespace {

constexpr char kPrefix[] = "tachyon:";
constexpr char kLog[] = "tachyon:log";
constexpr size_t kBatch = 128;
constexpr int kBlockMs = 500;

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// One command queued on the connection (its reply read later with redisGetReply).
void Append(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  redisAppendCommandArgv(c, static_cast<int>(args.size()), argv.data(), lengths.data());
}

// One command and its reply; null when the connection failed (c->err is then set).
Reply Command(redisContext* c, const std::vector<std::string>& args) {
  Append(c, args);
  void* raw = nullptr;
  if (redisGetReply(c, &raw) != REDIS_OK) return nullptr;
  return Reply(static_cast<redisReply*>(raw));
}

std::string Key(CacheTable table, const std::string& key) {
  return std::string(kPrefix) + (table == CacheTable::kSemantic ? "semantic:" : "exact:") + key;
}

std::string Number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string Text(const redisReply* r) { return r != nullptr && r->str != nullptr ? std::string(r->str, r->len) : ""; }

// A hash reply (field, value, ...) as an entry; false when it is not a whole one.
bool ParseEntry(const redisReply* r, CacheTable table, StoredEntry* e) {
  if (r == nullptr || r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements % 2 != 0) return false;
  std::map<std::string, std::string> f;
  for (size_t i = 0; i + 1 < r->elements; i += 2) f[Text(r->element[i])] = Text(r->element[i + 1]);
  for (const char* required : {"text", "finish_reason", "stored", "expires"}) {
    if (f.count(required) == 0) return false;
  }
  e->answer.endpoint = f["endpoint"] == "completions" ? Endpoint::kCompletions : Endpoint::kChatCompletions;
  e->answer.model = f["model"];
  e->answer.text = f["text"];
  e->answer.finish_reason = f["finish_reason"];
  e->answer.has_usage = f["has_usage"] == "1";
  e->answer.usage = {std::atoll(f["prompt_tokens"].c_str()), std::atoll(f["completion_tokens"].c_str())};
  e->stored_unix = std::atof(f["stored"].c_str());
  e->expires_unix = std::atof(f["expires"].c_str());
  e->route = f["route"];
  e->tenant = f["tenant"];
  if (table == CacheTable::kSemantic) {
    const std::string& v = f["vector"];
    if (v.empty() || v.size() % sizeof(float) != 0 || f.count("scope") == 0) return false;
    e->scope = f["scope"];
    e->embedder = f["embedder"];
    e->question = f["question"];
    e->vector.resize(v.size() / sizeof(float));
    std::memcpy(e->vector.data(), v.data(), v.size());
  }
  return true;
}


}  // namespace

StatusOr<RedisAddress> ParseRedisUrl(const std::string& url) {
  const std::string scheme = "redis://";
  if (url.rfind(scheme, 0) != 0) return InvalidArgumentError("not a redis:// URL: " + url);
  std::string rest = url.substr(scheme.size());
  RedisAddress a;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    const std::string db = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
    if (!db.empty()) {
      char* end = nullptr;
      const long n = std::strtol(db.c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > 1000) return InvalidArgumentError("bad database number in " + url);
      a.db = static_cast<int>(n);
    }
  }
  if (const size_t colon = rest.rfind(':'); colon != std::string::npos) {
    char* end = nullptr;
    const long port = std::strtol(rest.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535) return InvalidArgumentError("bad port in " + url);
    a.port = static_cast<int>(port);
    rest = rest.substr(0, colon);
  }
  if (!rest.empty()) a.host = rest;
  return a;
}

StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(const std::string& url, MetricsRegistry* metrics) {
  ASSIGN_OR_RETURN(RedisAddress address, ParseRedisUrl(url));
  std::unique_ptr<RedisStore> s(new RedisStore());
  s->url_ = url;
  s->address_ = address;
  std::random_device rd;
  s->origin_ = std::to_string(::getpid()) + "-" + std::to_string(rd());
  if (metrics != nullptr) {
    s->errors_ = &metrics->AddCounter("tachyon:cache_store_errors_total",
                                      "Cache store operations that failed (the store could not be reached)",
                                      {"store"})
                      .With({"redis"});
  }
  // Where the log is now: changes from here on are followed.
  if (redisContext* c = s->Connect(1.0)) {
    Reply last = Command(c, {"XREVRANGE", kLog, "+", "-", "COUNT", "1"});
    if (last && last->type == REDIS_REPLY_ARRAY && last->elements == 1 && last->element[0]->elements >= 1) {
      s->last_id_ = Text(last->element[0]->element[0]);
    }
    redisFree(c);
    s->available_ = true;
  } else {
    s->Failed("connect");
  }
  if (s->last_id_.empty()) s->last_id_ = "0-0";
  s->writes_ = std::make_unique<StoreWriteQueue>(kBatch, [raw = s.get()](auto& ops) { raw->Apply(ops); });
  s->reader_ = std::thread([raw = s.get()] { raw->ReaderLoop(); });
  return s;
}

RedisStore::~RedisStore() {
  writes_.reset();  // applies what is queued (or drops it, Redis being down)
  if (writer_conn_ != nullptr) redisFree(writer_conn_);
  stopping_ = true;
  if (reader_.joinable()) reader_.join();
}

redisContext* RedisStore::Connect(double timeout_seconds) const {
  const double whole = std::floor(timeout_seconds);
  const timeval tv{static_cast<time_t>(whole), static_cast<suseconds_t>((timeout_seconds - whole) * 1e6)};
  redisContext* c = redisConnectWithTimeout(address_.host.c_str(), address_.port, tv);
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return nullptr;
  }
  const timeval io{2, 0};  // longer than the reader's XREAD BLOCK
  redisSetTimeout(c, io);
  if (address_.db != 0) {
    Reply r = Command(c, {"SELECT", std::to_string(address_.db)});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      redisFree(c);
      return nullptr;
    }
  }
  return c;
}

void RedisStore::Failed(const std::string& what, bool down) {
  if (down) available_ = false;
  if (errors_ != nullptr) errors_->Add();
  std::lock_guard<std::mutex> lock(log_mutex_);
  if (!outage_logged_) {
    std::fprintf(stderr, "tachyon: cache store %s: %s failed; the caches miss until it is back\n", url_.c_str(),
                 what.c_str());
    outage_logged_ = true;
  }
}

StatusOr<std::vector<StoredEntry>> RedisStore::Load(CacheTable table, double now_unix, size_t limit) {
  std::vector<StoredEntry> out;
  redisContext* c = Connect(2.0);
  if (c == nullptr) {
    Failed("load");
    return out;  // empty: the server starts, the caches miss
  }
  const std::string pattern = Key(table, "*");
  std::string cursor = "0";
  bool failed = false;
  do {
    Reply r = Command(c, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      failed = true;
      break;
    }
    cursor = Text(r->element[0]);
    const redisReply* keys = r->element[1];
    // The hashes of this batch, pipelined.
    for (size_t i = 0; i < keys->elements; ++i) {
      Append(c, {"HGETALL", Text(keys->element[i])});
    }
    for (size_t i = 0; i < keys->elements; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK) {
        failed = true;
        break;
      }
      Reply h(static_cast<redisReply*>(raw));
      StoredEntry e;
      e.key = Text(keys->element[i]).substr(Key(table, "").size());
      if (ParseEntry(h.get(), table, &e) && e.expires_unix > now_unix) out.push_back(std::move(e));
    }
  } while (!failed && cursor != "0");
  redisFree(c);
  if (failed) {
    Failed("load");
    out.clear();
    return out;
  }
  std::sort(out.begin(), out.end(), [](const StoredEntry& a, const StoredEntry& b) { return a.stored_unix > b.stored_unix; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

void RedisStore::Put(CacheTable table, StoredEntry entry) { writes_->Put(table, std::move(entry)); }
void RedisStore::Delete(CacheTable table, std::string key) { writes_->Delete(table, std::move(key)); }
void RedisStore::Flush() { writes_->Flush(); }

void RedisStore::Subscribe(CacheTable table, ChangeFn fn) {
  std::lock_guard<std::mutex> lock(subscribers_mutex_);
  if (fn) {
    subscribers_[table] = std::move(fn);
  } else {
    subscribers_.erase(table);
  }
}

bool RedisStore::Write(redisContext* c, const StoreWriteQueue::Op& op) {
  const StoredEntry& e = op.entry;
  const std::string key = Key(op.table, e.key);
  std::vector<std::vector<std::string>> commands = {{"MULTI"}};
  if (op.put) {
    std::vector<std::string> hset = {"HSET",
                                     key,
                                     "endpoint",
                                     e.answer.endpoint == Endpoint::kCompletions ? "completions" : "chat",
                                     "model",
                                     e.answer.model,
                                     "text",
                                     e.answer.text,
                                     "finish_reason",
                                     e.answer.finish_reason,
                                     "has_usage",
                                     e.answer.has_usage ? "1" : "0",
                                     "prompt_tokens",
                                     std::to_string(e.answer.usage.prompt_tokens),
                                     "completion_tokens",
                                     std::to_string(e.answer.usage.completion_tokens),
                                     "stored",
                                     Number(e.stored_unix),
                                     "expires",
                                     Number(e.expires_unix),
                                     "route",
                                     e.route,
                                     "tenant",
                                     e.tenant};
    if (op.table == CacheTable::kSemantic) {
      hset.insert(hset.end(), {"scope", e.scope, "embedder", e.embedder, "question", e.question, "vector",
                               std::string(reinterpret_cast<const char*>(e.vector.data()),
                                           e.vector.size() * sizeof(float))});
    }
    commands.push_back(std::move(hset));
    commands.push_back({"PEXPIREAT", key, std::to_string(static_cast<int64_t>(e.expires_unix * 1000.0) + 1)});
  } else {
    commands.push_back({"DEL", key});
  }
  commands.push_back({"XADD", kLog, "MAXLEN", "~", "100000", "*", "origin", origin_, "table",
                      op.table == CacheTable::kSemantic ? "semantic" : "exact", "op", op.put ? "put" : "del", "key",
                      e.key});
  commands.push_back({"EXEC"});
  for (const auto& args : commands) Append(c, args);
  bool ok = true;
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(c, &raw) != REDIS_OK) return false;  // the connection is gone
    Reply r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ERROR) ok = false;
  }
  if (!ok) std::fprintf(stderr, "tachyon: cache store %s: a write was refused\n", url_.c_str());
  return true;
}

void RedisStore::Apply(std::vector<StoreWriteQueue::Op>& ops) {
  bool unreachable = false;  // tried to connect just now, and could not
  if (writer_conn_ == nullptr && std::chrono::steady_clock::now() >= next_connect_) {
    writer_conn_ = Connect(1.0);
    unreachable = writer_conn_ == nullptr;
    if (unreachable) next_connect_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  }
  for (const StoreWriteQueue::Op& op : ops) {
    if (writer_conn_ != nullptr && Write(writer_conn_, op)) continue;
    const bool broke = writer_conn_ != nullptr;
    if (broke) {  // tried again in half a second
      redisFree(writer_conn_);
      writer_conn_ = nullptr;
      next_connect_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    }
    Failed("write", /*down=*/broke || unreachable);  // dropped; one skipped while waiting to reconnect only counts
  }
}

void RedisStore::Deliver(redisContext* c, CacheTable table, bool put, const std::string& key) {
  StoredEntry e;
  e.key = key;
  if (put) {
    Reply h = Command(c, {"HGETALL", Key(table, key)});
    if (!h || !ParseEntry(h.get(), table, &e)) return;  // gone already (deleted or expired)
    if (e.expires_unix <= UnixTimeSeconds()) return;
  }
  std::lock_guard<std::mutex> lock(subscribers_mutex_);
  auto it = subscribers_.find(table);
  if (it != subscribers_.end() && it->second) it->second(table, put, std::move(e));
}

void RedisStore::ReaderLoop() {
  redisContext* c = nullptr;
  while (!stopping_) {
    if (c == nullptr) {
      c = Connect(1.0);
      if (c == nullptr) {
        if (available_) Failed("connect");
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
    }
    // Connected, and the store was marked down (by this thread or by a failed
    // write): changes may have been missed, so the caches read the store anew,
    // from the log's end.
    if (!available_) {
      Reply last = Command(c, {"XREVRANGE", kLog, "+", "-", "COUNT", "1"});
      if (!last) {
        redisFree(c);
        c = nullptr;
        continue;
      }
      last_id_ = last->type == REDIS_REPLY_ARRAY && last->elements == 1 && last->element[0]->elements >= 1
                     ? Text(last->element[0]->element[0])
                     : "0-0";
      available_ = true;
      {
        std::lock_guard<std::mutex> lock(log_mutex_);
        if (outage_logged_) std::fprintf(stderr, "tachyon: cache store %s: reachable again\n", url_.c_str());
        outage_logged_ = false;
      }
      std::lock_guard<std::mutex> lock(subscribers_mutex_);
      for (auto& [table, fn] : subscribers_) {
        if (fn) fn(table, false, StoredEntry{});
      }
    }
    Reply r = Command(c, {"XREAD", "COUNT", "256", "BLOCK", std::to_string(kBlockMs), "STREAMS", kLog, last_id_});
    if (!r) {
      redisFree(c);
      c = nullptr;
      Failed("read");
      continue;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0) continue;  // nil: nothing new within the block
    const redisReply* stream = r->element[0];
    if (stream->type != REDIS_REPLY_ARRAY || stream->elements < 2) continue;
    const redisReply* items = stream->element[1];
    for (size_t i = 0; i < items->elements; ++i) {
      const redisReply* item = items->element[i];
      if (item->type != REDIS_REPLY_ARRAY || item->elements < 2) continue;
      last_id_ = Text(item->element[0]);
      const redisReply* fields = item->element[1];
      std::map<std::string, std::string> f;
      for (size_t k = 0; k + 1 < fields->elements; k += 2) f[Text(fields->element[k])] = Text(fields->element[k + 1]);
      if (f["origin"] == origin_) continue;
      const CacheTable table = f["table"] == "semantic" ? CacheTable::kSemantic : CacheTable::kExact;
      Deliver(c, table, f["op"] == "put", f["key"]);
    }
  }
  if (c != nullptr) redisFree(c);
}

}  // namespace tachyon
