// ResponseStore: the responses of /v1/responses kept for previous_response_id,
// GET /v1/responses/{id} and its input_items, scoped by tenant like the caches'
// entries (an id of another tenant is not found). Bounded by entries and bytes
// (the oldest go first) and by a time to live. Thread-safe.
//
// This first store keeps them in the process's memory: a restart forgets them,
// and replicas do not share them (docs/gateway.md, "Responses").
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace tachyon {

class ResponseStore {
 public:
  struct Entry {
    std::string tenant;
    nlohmann::json response;      // the response object as the client got it
    nlohmann::json conversation;  // the input items up to this response (earlier turns, then its input)
  };

  ResponseStore(size_t max_entries, size_t max_bytes, double ttl_seconds)
      : max_entries_(max_entries), max_bytes_(max_bytes), ttl_seconds_(ttl_seconds) {}

  // Keeps the entry under `id` from `now` (unix seconds); one larger than the
  // whole store is not kept. Returns whether it was.
  bool Put(const std::string& id, Entry entry, double now);
  // The entry, when it exists, belongs to `tenant` and has not expired.
  std::shared_ptr<const Entry> Get(const std::string& id, const std::string& tenant, double now);
  // Forgets the entry; false when Get would not have found it.
  bool Delete(const std::string& id, const std::string& tenant, double now);

  size_t size() const;
  size_t bytes() const;

 private:
  struct Slot {
    std::shared_ptr<const Entry> entry;
    double expires = 0;
    size_t bytes = 0;
    std::list<std::string>::iterator order;
  };
  void Erase(std::unordered_map<std::string, Slot>::iterator it);  // mutex_ held

  const size_t max_entries_, max_bytes_;
  const double ttl_seconds_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Slot> slots_;  // guarded by mutex_
  std::list<std::string> order_;                 // guarded by mutex_: oldest first
  size_t bytes_ = 0;                             // guarded by mutex_
};

}  // namespace tachyon
