#include "gateway/cache/redis_store.h"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>

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

using Reply = RedisReplyPtr;

// Seconds every read and write may wait (longer than the reader's XREAD BLOCK).
constexpr double kIoTimeoutSeconds = 2.0;

std::string Key(CacheTable table, const std::string& key) {
  return std::string(kPrefix) + CacheTableName(table) + ":" + key;
}

std::string Number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string Text(const redisReply* r) { return RedisText(r); }

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

double RedisRetryDelaySeconds(int failures) {
  if (failures <= 0) return 0;
  return std::min(30.0, 0.5 * std::pow(2.0, std::min(failures - 1, 16)));
}

StatusOr<std::unique_ptr<RedisStore>> RedisStore::Open(const std::string& url, MetricsRegistry* metrics,
                                                       RedisStoreOptions options) {
  ASSIGN_OR_RETURN(RedisAddress address, ParseRedisUrl(url));
  if (address.password.empty()) address.password = options.password;
  address.verify_tls = options.verify_tls;
  address.ca_file = options.ca_file;
  std::unique_ptr<RedisStore> s(new RedisStore());
  s->url_ = url;
  s->address_ = address;
  std::random_device rd;
  s->origin_ = std::to_string(::getpid()) + "-" + std::to_string(rd());
  if (metrics != nullptr) {
    s->errors_ = &metrics->AddCounter("tachyon:cache_store_errors_total",
                                      "Cache store operations that failed, by why (connect, tls, noauth, wrongpass, "
                                      "readonly, oom, read, write, ...)",
                                      {"store", "reason"});
  }
  // Where the log is now: changes from here on are followed.
  std::string reason, message;
  if (std::unique_ptr<RedisConnection> c = s->Connect(1.0, &reason, &message)) {
    Reply last = c->Command({"XREVRANGE", kLog, "+", "-", "COUNT", "1"});
    if (last && last->type == REDIS_REPLY_ARRAY && last->elements == 1 && last->element[0]->elements >= 1) {
      s->last_id_ = Text(last->element[0]->element[0]);
      s->available_ = true;
    } else if (last && last->type == REDIS_REPLY_ERROR) {
      s->Failed(RedisErrorReason(last.get()), "XREVRANGE: " + Text(last.get()));
    } else {
      s->available_ = last != nullptr;
      if (!last) s->Failed("read", "the connection closed");
    }
  } else {
    s->Failed(reason, message);
  }
  if (s->last_id_.empty()) s->last_id_ = "0-0";
  s->writes_ = std::make_unique<StoreWriteQueue>(kBatch, [raw = s.get()](auto& ops) { raw->Apply(ops); },
                                                 QueueDropCounter(metrics, "store_write"));
  s->reader_ = std::thread([raw = s.get()] { raw->ReaderLoop(); });
  return s;
}

RedisStore::~RedisStore() {
  writes_.reset();  // applies what is queued (or drops it, Redis being down)
  writer_conn_.reset();
  stopping_ = true;
  if (reader_.joinable()) reader_.join();
}

std::unique_ptr<RedisConnection> RedisStore::Connect(double timeout_seconds, std::string* reason,
                                                     std::string* message) const {
  StatusOr<std::unique_ptr<RedisConnection>> c =
      RedisConnection::Open(address_, timeout_seconds, kIoTimeoutSeconds, reason);
  if (!c.ok()) {
    *message = c.status().message();
    return nullptr;
  }
  return std::move(c).value();
}

void RedisStore::Failed(const std::string& reason, const std::string& message, bool down) {
  if (down) available_ = false;
  if (errors_ != nullptr) errors_->With({"redis", reason}).Add();
  // One state for every way of not reaching the server (a read that failed, then
  // connects refused, is one outage); each kind of refusal is a state of its own.
  const bool unreachable = reason == "connect" || reason == "read" || reason == "write";
  const std::string state = unreachable ? "unreachable" : reason;
  std::lock_guard<std::mutex> lock(log_mutex_);
  if (failing_reason_ != state) {
    std::fprintf(stderr, "tachyon: cache store %s: %s (%s); the caches miss until it works again\n",
                 describe().c_str(), message.c_str(), reason.c_str());
    failing_reason_ = state;
  }
}

void RedisStore::Pause(double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!stopping_ && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

StatusOr<std::vector<StoredEntry>> RedisStore::Load(CacheTable table, double now_unix, size_t limit) {
  std::vector<StoredEntry> out;
  std::string reason, message;
  std::unique_ptr<RedisConnection> c = Connect(2.0, &reason, &message);
  if (c == nullptr) {
    Failed(reason, "load: " + message);
    return out;  // empty: the server starts, the caches miss
  }
  const std::string pattern = Key(table, "*");
  std::string cursor = "0";
  bool failed = false;
  do {
    Reply r = c->Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      reason = !r ? "read" : r->type == REDIS_REPLY_ERROR ? RedisErrorReason(r.get()) : "protocol";
      message = "load: SCAN: " + (r ? Text(r.get()) : std::string("the connection closed"));
      failed = true;
      break;
    }
    cursor = Text(r->element[0]);
    const redisReply* keys = r->element[1];
    // The hashes of this batch, pipelined.
    for (size_t i = 0; i < keys->elements; ++i) {
      c->Append({"HGETALL", Text(keys->element[i])});
    }
    for (size_t i = 0; i < keys->elements; ++i) {
      Reply h = c->GetReply();
      if (!h) {
        reason = "read";
        message = "load: the connection closed";
        failed = true;
        break;
      }
      StoredEntry e;
      e.key = Text(keys->element[i]).substr(Key(table, "").size());
      if (ParseEntry(h.get(), table, &e) && e.expires_unix > now_unix) out.push_back(std::move(e));
    }
  } while (!failed && cursor != "0");
  if (failed) {
    Failed(reason, message);
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

bool RedisStore::Write(RedisConnection& c, const StoreWriteQueue::Op& op, std::string* reason, std::string* message) {
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
                      CacheTableName(op.table), "op", op.put ? "put" : "del", "key", e.key});
  commands.push_back({"EXEC"});
  for (const auto& args : commands) c.Append(args);
  bool ok = true;
  for (size_t i = 0; i < commands.size(); ++i) {
    Reply r = c.GetReply();
    if (!r) {  // the connection is gone
      *reason = "write";
      *message = "write: the connection closed";
      return false;
    }
    // The first error (MULTI refused, a command refused in the queue, EXEC aborted) says why.
    if (ok && r->type == REDIS_REPLY_ERROR) {
      ok = false;
      *reason = RedisErrorReason(r.get());
      *message = "write refused: " + Text(r.get());
    }
  }
  return ok;
}

void RedisStore::Apply(std::vector<StoreWriteQueue::Op>& ops) {
  std::string reason, message;
  bool unreachable = false;  // tried to connect just now, and could not
  if (writer_conn_ == nullptr && std::chrono::steady_clock::now() >= next_connect_) {
    writer_conn_ = Connect(1.0, &reason, &message);
    unreachable = writer_conn_ == nullptr;
  }
  for (const StoreWriteQueue::Op& op : ops) {
    if (writer_conn_ != nullptr && Write(*writer_conn_, op, &reason, &message)) {
      if (writer_failures_ > 0) Recovered();
      writer_failures_ = 0;
      continue;
    }
    if (writer_conn_ == nullptr && !unreachable) {  // skipped while waiting to reconnect
      if (errors_ != nullptr) errors_->With({"redis", "dropped"}).Add();
      continue;
    }
    // Lost, unreachable or refused (READONLY, OOM, NOAUTH): the connection goes, and
    // the next one waits longer each time. A refused write leaves lookups on (what
    // this replica holds is still right); a lost connection turns them off until
    // the reader is back and the caches have read the store again.
    const bool lost = unreachable || reason == "write";
    writer_conn_.reset();
    next_connect_ = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(RedisRetryDelaySeconds(++writer_failures_)));
    Failed(reason, message, /*down=*/lost);
    unreachable = false;
  }
}

void RedisStore::Recovered() {
  std::lock_guard<std::mutex> lock(log_mutex_);
  if (!failing_reason_.empty() && available_) {
    std::fprintf(stderr, "tachyon: cache store %s: works again\n", describe().c_str());
    failing_reason_.clear();
  }
}

void RedisStore::Deliver(RedisConnection& c, CacheTable table, bool put, const std::string& key) {
  StoredEntry e;
  e.key = key;
  if (put) {
    Reply h = c.Command({"HGETALL", Key(table, key)});
    if (!h || !ParseEntry(h.get(), table, &e)) return;  // gone already (deleted or expired)
    if (e.expires_unix <= UnixTimeSeconds()) return;
  }
  std::lock_guard<std::mutex> lock(subscribers_mutex_);
  auto it = subscribers_.find(table);
  if (it != subscribers_.end() && it->second) it->second(table, put, std::move(e));
}

void RedisStore::ReaderLoop() {
  std::unique_ptr<RedisConnection> c;
  int failures = 0;  // in a row: the pause before the next attempt grows with them
  auto fail = [&](const std::string& reason, const std::string& message) {
    c.reset();
    Failed(reason, message);
    Pause(RedisRetryDelaySeconds(++failures));
  };
  while (!stopping_) {
    std::string reason, message;
    if (c == nullptr) {
      c = Connect(1.0, &reason, &message);
      if (c == nullptr) {
        fail(reason, message);
        continue;
      }
    }
    // Connected, and the store was marked down (by this thread or by a failed
    // write): changes may have been missed, so the caches read the store anew,
    // from the log's end.
    if (!available_) {
      Reply last = c->Command({"XREVRANGE", kLog, "+", "-", "COUNT", "1"});
      if (!last || last->type == REDIS_REPLY_ERROR) {
        fail(last ? RedisErrorReason(last.get()) : "read",
             "XREVRANGE: " + (last ? Text(last.get()) : std::string("the connection closed")));
        continue;
      }
      last_id_ = last->type == REDIS_REPLY_ARRAY && last->elements == 1 && last->element[0]->elements >= 1
                     ? Text(last->element[0]->element[0])
                     : "0-0";
      available_ = true;
      Recovered();
      std::lock_guard<std::mutex> lock(subscribers_mutex_);
      for (auto& [table, fn] : subscribers_) {
        if (fn) fn(table, false, StoredEntry{});
      }
    }
    Reply r = c->Command({"XREAD", "COUNT", "256", "BLOCK", std::to_string(kBlockMs), "STREAMS", kLog, last_id_});
    if (!r || r->type == REDIS_REPLY_ERROR) {
      fail(r ? RedisErrorReason(r.get()) : "read", "XREAD: " + (r ? Text(r.get()) : std::string("the connection closed")));
      continue;
    }
    if (!available_) {  // a write or the caches' reload failed meanwhile: read the store anew, after a pause
      Pause(RedisRetryDelaySeconds(++failures));
      continue;
    }
    failures = 0;
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
      const CacheTable table = f["table"] == "semantic"    ? CacheTable::kSemantic
                               : f["table"] == "responses" ? CacheTable::kResponses
                                                           : CacheTable::kExact;
      Deliver(*c, table, f["op"] == "put", f["key"]);
    }
  }
}

}  // namespace tachyon
