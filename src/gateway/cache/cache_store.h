// CacheStore: where the caches' entries live beyond one process's memory. The
// in-memory indexes (the exact cache's LRU, the semantic cache's vectors)
// answer lookups; a store keeps what they hold across restarts and, when it is
// shared (Redis), between gateway replicas: each replica is told of the puts
// and deletes the others make, so their indexes converge.
//
//   CacheDb     one SQLite file (sqlite:PATH), this process only
//   RedisStore  a Redis server (redis://HOST:PORT[/DB]), shared by replicas
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "gateway/pipeline.h"

namespace tachyon {

// kResponses: the stored responses of /v1/responses (response_store.h), each an
// entry whose answer text is the response and its conversation as JSON.
enum class CacheTable { kExact, kSemantic, kResponses };
// "exact", "semantic", "responses": the table's name in logs and in Redis keys.
const char* CacheTableName(CacheTable table);

// Seconds since the epoch, now: stores keep times this way (they outlive the process).
double UnixTimeSeconds();
// The steady-clock time of a stored moment, given what unix_now is at steady `now`.
std::chrono::steady_clock::time_point SteadyTime(double unix_time, double unix_now,
                                                 std::chrono::steady_clock::time_point now);

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

class CacheStore {
 public:
  virtual ~CacheStore() = default;

  // The entries not expired at now_unix, most recently stored first, at most `limit`.
  virtual StatusOr<std::vector<StoredEntry>> Load(CacheTable table, double now_unix, size_t limit) = 0;
  // Queued: no request waits on the store.
  virtual void Put(CacheTable table, StoredEntry entry) = 0;
  virtual void Delete(CacheTable table, std::string key) = 0;
  // Waits until everything queued so far is written (tests, shutdown).
  virtual void Flush() = 0;
  virtual std::string describe() const = 0;  // "sqlite:PATH", "redis://HOST:PORT"

  // False while the store cannot be reached: lookups then miss (an entry another
  // replica purged meanwhile must not be served) and puts are dropped.
  virtual bool available() const { return true; }

  // Shared stores: the changes other replicas make, on the store's own thread.
  // put: the whole entry; delete: its key only; a delete with an empty key:
  // forget everything and Load again (the store is back after an outage, in
  // which changes may have been missed). A null fn unsubscribes, after any
  // change being delivered has returned.
  using ChangeFn = std::function<void(CacheTable table, bool put, StoredEntry entry)>;
  virtual void Subscribe(CacheTable /*table*/, ChangeFn /*fn*/) {}
};

}  // namespace tachyon
