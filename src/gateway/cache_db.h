// CacheDb: the caches' entries in one SQLite file (WAL mode), so they survive
// a restart: the exact cache's in one table, the semantic cache's (with their
// question, scope and vector) in another. The in-memory LRU stays the index that answers lookups;
// this file is written behind it by a thread of its own (puts and deletes
// queued, applied in transactions of up to 256), so no request waits on a disk
// write. Each entry is one row written in one transaction: a process killed
// mid-write leaves the previous state, never a partial entry. At start the
// entries not expired are read back, most recently used first.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "gateway/pipeline.h"

struct sqlite3;

namespace tachyon {

struct StoredEntry {
  std::string key;
  std::string route, tenant;
  CapturedAnswer answer;
  // Semantic entries only.
  std::string scope, embedder, question;
  std::vector<float> vector;
  double stored_unix = 0;   // seconds since the epoch
  double expires_unix = 0;
};

class CacheDb {
 public:
  // Opens (or creates, with its directory) the file.
  static StatusOr<std::unique_ptr<CacheDb>> Open(const std::string& path);
  ~CacheDb();  // applies what is queued, then closes

  enum class Table { kExact, kSemantic };

  // The entries not expired at now_unix, most recently stored first, at most `limit`.
  StatusOr<std::vector<StoredEntry>> Load(Table table, double now_unix, size_t limit);

  void Put(Table table, StoredEntry entry);   // queued
  void Delete(Table table, std::string key);  // queued
  // Waits until everything queued so far is written (tests, shutdown).
  void Flush();

  const std::string& path() const { return path_; }

 private:
  struct Op {
    Table table = Table::kExact;
    bool put = false;
    StoredEntry entry;  // put: the entry; delete: its key
  };
  CacheDb() = default;
  void Loop();
  void Apply(std::vector<Op>& ops);

  std::string path_;
  sqlite3* db_ = nullptr;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Op> queue_;     // guarded by mutex_
  bool busy_ = false;        // guarded by mutex_: a batch is being written
  bool stopping_ = false;    // guarded by mutex_
  std::thread thread_;
};

}  // namespace tachyon
