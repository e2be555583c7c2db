// ResponseStore: the responses of /v1/responses kept for previous_response_id,
// GET /v1/responses/{id} and its input_items, scoped by tenant like the caches'
// entries (an id of another tenant is not found). Bounded by entries and bytes
// (the oldest go first) and by a time to live. Thread-safe.
//
// An index in memory answers; with a CacheStore (the caches' SQLite file or
// Redis, [responses] store = "cache") every put and delete is also written there
// (queued: no request waits), the index is read back from it at start, and with
// Redis the puts and deletes of other replicas reach this one's index, so a
// conversation can continue on any replica.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "gateway/cache/cache_store.h"

namespace tachyon {

class ResponseStore {
 public:
  struct Entry {
    std::string tenant;
    nlohmann::json response;      // the response object as the client got it
    nlohmann::json conversation;  // the input items up to this response (earlier turns, then its input)
  };

  // store: where entries are also kept; null: memory only.
  ResponseStore(size_t max_entries, size_t max_bytes, double ttl_seconds, std::shared_ptr<CacheStore> store = nullptr);
  ~ResponseStore();
  ResponseStore(const ResponseStore&) = delete;
  ResponseStore& operator=(const ResponseStore&) = delete;

  // Reads what the store holds into the index (at start); then follows other
  // replicas' changes. An entry that does not parse is skipped.
  Status Load(double now);

  // Keeps the entry under `id` from `now` (unix seconds); one larger than the
  // whole store is not kept. Returns whether it was.
  bool Put(const std::string& id, Entry entry, double now);
  // The entry, when it exists, belongs to `tenant` and has not expired.
  std::shared_ptr<const Entry> Get(const std::string& id, const std::string& tenant, double now);
  // Forgets the entry; false when Get would not have found it.
  bool Delete(const std::string& id, const std::string& tenant, double now);

  // Forgets every response of `tenant` ("": of every tenant); returns how many.
  size_t Purge(const std::string& tenant);

  size_t size() const;
  size_t bytes() const;
  // "memory", or the store's description.
  std::string describe() const;
  const std::shared_ptr<CacheStore>& store() const { return store_; }

 private:
  struct Slot {
    std::shared_ptr<const Entry> entry;
    double expires = 0;
    size_t bytes = 0;
    std::list<std::string>::iterator order;
  };
  // Into the index only (mutex_ held); false when too large.
  bool Insert(const std::string& id, std::shared_ptr<const Entry> entry, double expires, size_t bytes);
  void Erase(std::unordered_map<std::string, Slot>::iterator it);  // mutex_ held
  void InsertStored(const std::vector<StoredEntry>& stored);        // entries read from the store
  void OnStoreChange(bool put, StoredEntry e);                      // the store's thread

  const size_t max_entries_, max_bytes_;
  const double ttl_seconds_;
  std::shared_ptr<CacheStore> store_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Slot> slots_;  // guarded by mutex_
  std::list<std::string> order_;                 // guarded by mutex_: oldest first
  size_t bytes_ = 0;                             // guarded by mutex_
};

}  // namespace tachyon
