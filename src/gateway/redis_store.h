// RedisStore: the caches' entries in a Redis server, shared by every gateway
// replica pointed at it (`[cache] store = "redis://HOST:PORT[/DB]"`).
//
// Layout (prefix "tachyon:"): each entry is a hash, tachyon:exact:KEY or
// tachyon:semantic:KEY (the answer, its route and tenant, the times; a semantic
// entry also its scope, embedder, question and float32 vector), expiring with
// the entry (PEXPIREAT). Every put and delete is also appended to the stream
// tachyon:log (origin, table, op, key; trimmed to about 100,000 items) in the
// same MULTI/EXEC, so a replica that reads the log finds the hash written.
//
// Threads: a writer (puts and deletes queued, as with SQLite: no request waits
// on Redis) and a reader that follows the log with XREAD BLOCK and hands each
// change another replica made to the subscribed cache, which keeps its own
// in-memory index. While Redis cannot be reached the store is unavailable:
// lookups miss, writes are dropped, both counted
// (tachyon:cache_store_errors_total) and logged once per outage; the reader
// reconnects every half second and carries on from the last log item it read.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/cache_store.h"
#include "gateway/store_write_queue.h"
#include "obs/metrics.h"

struct redisContext;

namespace tachyon {

struct RedisAddress {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
};
StatusOr<RedisAddress> ParseRedisUrl(const std::string& url);

class RedisStore : public CacheStore {
 public:
  // Starts the threads; a Redis that is not up yet is only logged (the store is
  // unavailable until it is). metrics may be null.
  static StatusOr<std::unique_ptr<RedisStore>> Open(const std::string& url, MetricsRegistry* metrics = nullptr);
  ~RedisStore() override;

  StatusOr<std::vector<StoredEntry>> Load(CacheTable table, double now_unix, size_t limit) override;
  void Put(CacheTable table, StoredEntry entry) override;
  void Delete(CacheTable table, std::string key) override;
  void Flush() override;
  std::string describe() const override { return url_; }
  bool available() const override { return available_.load(std::memory_order_relaxed); }
  void Subscribe(CacheTable table, ChangeFn fn) override;

 private:
  RedisStore() = default;
  redisContext* Connect(double timeout_seconds) const;
  // Counted and logged once per outage; down: lookups miss until the reader is connected again.
  void Failed(const std::string& what, bool down = true);
  void Apply(std::vector<StoreWriteQueue::Op>& ops);  // on the write queue's thread
  bool Write(redisContext* c, const StoreWriteQueue::Op& op);
  void ReaderLoop();
  void Deliver(redisContext* c, CacheTable table, bool put, const std::string& key);

  std::string url_;
  RedisAddress address_;
  std::string origin_;  // this process, in the log: its own changes are not delivered back
  std::atomic<bool> available_{false};
  std::atomic<bool> stopping_{false};
  Counter* errors_ = nullptr;

  std::unique_ptr<StoreWriteQueue> writes_;
  redisContext* writer_conn_ = nullptr;  // the write queue's thread only
  std::chrono::steady_clock::time_point next_connect_;  // the write queue's thread only
  std::thread reader_;

  std::mutex subscribers_mutex_;
  std::map<CacheTable, ChangeFn> subscribers_;  // guarded by subscribers_mutex_
  std::string last_id_;                          // the reader's place in the log

  std::mutex log_mutex_;
  bool outage_logged_ = false;  // guarded by log_mutex_
};

}  // namespace tachyon
