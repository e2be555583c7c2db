// RedisStore: the caches' entries in a Redis server, shared by every gateway
// replica pointed at it (`[cache] store = "redis://[[USER]:PASSWORD@]HOST:PORT[/DB]"`,
// or `rediss://` for TLS; the password may come from `password_env` instead).
//
// Layout (prefix "tachyon:"): each entry is a hash, tachyon:exact:KEY or
// tachyon:semantic:KEY (the answer, its route and tenant, the times; a semantic
// entry also its scope, embedder, question and float32 vector), or
// tachyon:responses:ID (a stored response of /v1/responses), expiring with
// the entry (PEXPIREAT). Every put and delete is also appended to the stream
// tachyon:log (origin, table, op, key; trimmed to about 100,000 items) in the
// same MULTI/EXEC, so a replica that reads the log finds the hash written.
//
// Threads: a writer (puts and deletes queued, as with SQLite: no request waits
// on Redis) and a reader that follows the log with XREAD BLOCK and hands each
// change another replica made to the subscribed cache, which keeps its own
// in-memory index. While Redis cannot be reached, or answers with errors (NOAUTH,
// WRONGPASS, READONLY, OOM, ...), the store is unavailable: lookups miss, writes
// are dropped, each counted (tachyon:cache_store_errors_total{store, reason}) and
// logged once per change of state, never per request. Each thread tries again
// after a delay that doubles from half a second up to 30 s while the failures go
// on; the reader then carries on from the log's end and the caches reload.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/cache/cache_store.h"
#include "gateway/cache/redis_connection.h"
#include "gateway/cache/store_write_queue.h"
#include "obs/metrics.h"

namespace tachyon {

// What the URL does not say.
struct RedisStoreOptions {
  std::string password;    // when the URL has none (password_env)
  bool verify_tls = true;  // rediss://
  std::string ca_file;     // rediss://; "": the system's
};

// The delay before the next attempt after `failures` failures in a row: 0.5 s
// doubling, at most 30 s (pure, for tests).
double RedisRetryDelaySeconds(int failures);

class RedisStore : public CacheStore {
 public:
  // Starts the threads; a Redis that is not up yet, or refuses the password, is
  // logged with why (the store is unavailable until it is). metrics may be null.
  static StatusOr<std::unique_ptr<RedisStore>> Open(const std::string& url, MetricsRegistry* metrics = nullptr,
                                                    RedisStoreOptions options = {});
  ~RedisStore() override;

  StatusOr<std::vector<StoredEntry>> Load(CacheTable table, double now_unix, size_t limit) override;
  void Put(CacheTable table, StoredEntry entry) override;
  void Delete(CacheTable table, std::string key) override;
  void Flush() override;
  std::string describe() const override { return RedactRedisUrl(url_); }
  bool available() const override { return available_.load(std::memory_order_relaxed); }
  void Subscribe(CacheTable table, ChangeFn fn) override;

 private:
  RedisStore() = default;
  // A connection, or null with *reason and *message saying why.
  std::unique_ptr<RedisConnection> Connect(double timeout_seconds, std::string* reason, std::string* message) const;
  // Counted under `reason` and logged when the state changes (ok -> failing, or
  // another reason); down: lookups miss until the reader is connected again.
  void Failed(const std::string& reason, const std::string& message, bool down = true);
  // Logged once when the store works again after Failed.
  void Recovered();
  void Apply(std::vector<StoreWriteQueue::Op>& ops);  // on the write queue's thread
  // False when the connection is lost or the server refused the write (*reason set).
  bool Write(RedisConnection& c, const StoreWriteQueue::Op& op, std::string* reason, std::string* message);
  void ReaderLoop();
  // Sleeps up to `seconds`, waking early when the store is stopping.
  void Pause(double seconds);
  void Deliver(RedisConnection& c, CacheTable table, bool put, const std::string& key);

  std::string url_;
  RedisAddress address_;
  std::string origin_;  // this process, in the log: its own changes are not delivered back
  std::atomic<bool> available_{false};
  std::atomic<bool> stopping_{false};
  CounterFamily* errors_ = nullptr;  // {store, reason}

  std::unique_ptr<StoreWriteQueue> writes_;
  std::unique_ptr<RedisConnection> writer_conn_;        // the write queue's thread only
  std::chrono::steady_clock::time_point next_connect_;  // the write queue's thread only
  int writer_failures_ = 0;                             // the write queue's thread only: in a row
  std::thread reader_;

  std::mutex subscribers_mutex_;
  std::map<CacheTable, ChangeFn> subscribers_;  // guarded by subscribers_mutex_
  std::string last_id_;                          // the reader's place in the log

  std::mutex log_mutex_;
  std::string failing_reason_;  // guarded by log_mutex_: the failing state logged ("unreachable", "wrongpass", ...); "" while the store works
};

}  // namespace tachyon
