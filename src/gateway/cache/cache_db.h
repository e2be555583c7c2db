// CacheDb: the caches' entries in one SQLite file (WAL mode), so they survive
// a restart: the exact cache's in one table, the semantic cache's (with their
// question, scope and vector) in another. The in-memory LRU stays the index that answers lookups;
// this file is written behind it by a thread of its own (puts and deletes
// queued, applied in transactions of up to 256), so no request waits on a disk
// write. Each entry is one row written in one transaction: a process killed
// mid-write leaves the previous state, never a partial entry. At start the
// entries not expired are read back, most recently used first.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "gateway/cache/cache_store.h"
#include "gateway/cache/store_write_queue.h"

struct sqlite3;

namespace tachyon {

class CacheDb : public CacheStore {
 public:
  // Opens (or creates, with its directory) the file, readable by its owner only
  // (0600: it holds prompts' answers). Rows past their expiry, and in each table
  // the oldest past max_rows (0: no bound), are deleted now and then every
  // kPruneSeconds while writes come, so the file does not grow across restarts.
  // `metrics` (may be null) counts writes dropped at the queue's bound.
  static StatusOr<std::unique_ptr<CacheDb>> Open(const std::string& path, size_t max_rows = 0,
                                                 MetricsRegistry* metrics = nullptr);
  static constexpr double kPruneSeconds = 600;
  ~CacheDb() override;  // applies what is queued, then closes

  StatusOr<std::vector<StoredEntry>> Load(CacheTable table, double now_unix, size_t limit) override;
  void Put(CacheTable table, StoredEntry entry) override;
  void Delete(CacheTable table, std::string key) override;
  void Flush() override;
  std::string describe() const override { return "sqlite:" + path_; }

  const std::string& path() const { return path_; }

 private:
  CacheDb() = default;
  StatusOr<std::vector<StoredEntry>> LoadIdle(CacheTable table, double now_unix, size_t limit);
  void Apply(std::vector<StoreWriteQueue::Op>& ops);
  // Deletes expired and over-bound rows (the write queue's thread, or before it starts).
  void Prune();

  std::string path_;
  size_t max_rows_ = 0;
  std::chrono::steady_clock::time_point last_prune_;  // the write queue's thread
  sqlite3* db_ = nullptr;
  std::unique_ptr<StoreWriteQueue> writes_;  // its thread is the only user of db_ but for Load
};

}  // namespace tachyon
