#include "gateway/cache/response_store.h"

#include <cstdio>
#include <vector>

namespace tachyon {
namespace {

// The entry as the store keeps it: the answer text is {"response", "conversation"}.
std::string Payload(const ResponseStore::Entry& e) {
  return nlohmann::json{{"response", e.response}, {"conversation", e.conversation}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// An entry read back from the store; null when its text is not one.
std::shared_ptr<const ResponseStore::Entry> FromStored(const StoredEntry& s) {
  const nlohmann::json j = nlohmann::json::parse(s.answer.text, nullptr, false);
  if (!j.is_object() || !j.contains("response") || !j["response"].is_object() || !j.contains("conversation") ||
      !j["conversation"].is_array()) {
    return nullptr;
  }
  return std::make_shared<const ResponseStore::Entry>(
      ResponseStore::Entry{.tenant = s.tenant, .response = j["response"], .conversation = j["conversation"]});
}

}  // namespace

ResponseStore::ResponseStore(size_t max_entries, size_t max_bytes, double ttl_seconds,
                             std::shared_ptr<CacheStore> store)
    : max_entries_(max_entries), max_bytes_(max_bytes), ttl_seconds_(ttl_seconds), store_(std::move(store)) {}

ResponseStore::~ResponseStore() {
  if (store_) store_->Subscribe(CacheTable::kResponses, nullptr);  // waits out a change being delivered
}

std::string ResponseStore::describe() const { return store_ ? store_->describe() : "memory"; }

Status ResponseStore::Load(double now) {
  if (!store_) return Status::Ok();
  ASSIGN_OR_RETURN(std::vector<StoredEntry> stored, store_->Load(CacheTable::kResponses, now, max_entries_));
  InsertStored(stored);
  store_->Subscribe(CacheTable::kResponses, [this](CacheTable, bool put, StoredEntry e) {
    OnStoreChange(put, std::move(e));
  });
  return Status::Ok();
}

void ResponseStore::InsertStored(const std::vector<StoredEntry>& stored) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Most recent first from the store: inserted oldest first, so the order is theirs.
  for (auto it = stored.rbegin(); it != stored.rend(); ++it) {
    std::shared_ptr<const Entry> e = FromStored(*it);
    if (e) Insert(it->key, e, it->expires_unix, it->key.size() + it->tenant.size() + it->answer.text.size());
  }
}

void ResponseStore::OnStoreChange(bool put, StoredEntry e) {
  if (e.key.empty()) {  // the store is back after an outage: read it again
    StatusOr<std::vector<StoredEntry>> loaded = store_->Load(CacheTable::kResponses, UnixTimeSeconds(), max_entries_);
    if (loaded.ok()) InsertStored(*loaded);
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!put) {
    if (auto it = slots_.find(e.key); it != slots_.end()) Erase(it);
    return;
  }
  std::shared_ptr<const Entry> entry = FromStored(e);
  if (entry) Insert(e.key, entry, e.expires_unix, e.key.size() + e.tenant.size() + e.answer.text.size());
}

bool ResponseStore::Insert(const std::string& id, std::shared_ptr<const Entry> entry, double expires, size_t bytes) {
  if (bytes > max_bytes_ || max_entries_ == 0) return false;
  if (auto it = slots_.find(id); it != slots_.end()) Erase(it);
  while (!order_.empty() && (slots_.size() + 1 > max_entries_ || bytes_ + bytes > max_bytes_)) {
    Erase(slots_.find(order_.front()));
  }
  order_.push_back(id);
  slots_[id] = Slot{.entry = std::move(entry), .expires = expires, .bytes = bytes, .order = std::prev(order_.end())};
  bytes_ += bytes;
  return true;
}

bool ResponseStore::Put(const std::string& id, Entry entry, double now) {
  std::string payload = Payload(entry);
  const size_t bytes = id.size() + entry.tenant.size() + payload.size();
  const double expires = now + ttl_seconds_;
  StoredEntry stored{.key = id, .tenant = entry.tenant, .stored_unix = now, .expires_unix = expires};
  stored.answer.text = std::move(payload);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Insert(id, std::make_shared<const Entry>(std::move(entry)), expires, bytes)) return false;
  }
  if (store_) store_->Put(CacheTable::kResponses, std::move(stored));
  return true;
}

std::shared_ptr<const ResponseStore::Entry> ResponseStore::Get(const std::string& id, const std::string& tenant,
                                                               double now) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(id);
  if (it == slots_.end()) return nullptr;
  if (it->second.expires <= now) {
    Erase(it);
    return nullptr;
  }
  if (it->second.entry->tenant != tenant) return nullptr;
  return it->second.entry;
}

bool ResponseStore::Delete(const std::string& id, const std::string& tenant, double now) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = slots_.find(id);
    if (it == slots_.end() || it->second.entry->tenant != tenant) return false;
    const bool live = it->second.expires > now;
    Erase(it);
    if (!live) return false;
  }
  if (store_) store_->Delete(CacheTable::kResponses, id);
  return true;
}

size_t ResponseStore::Purge(const std::string& tenant) {
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = slots_.begin(); it != slots_.end();) {
      auto next = std::next(it);
      if (tenant.empty() || it->second.entry->tenant == tenant) {
        gone.push_back(it->first);
        Erase(it);
      }
      it = next;
    }
  }
  if (store_) {
    for (const std::string& id : gone) store_->Delete(CacheTable::kResponses, id);
  }
  return gone.size();
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slots_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

void ResponseStore::Erase(std::unordered_map<std::string, Slot>::iterator it) {
  bytes_ -= it->second.bytes;
  order_.erase(it->second.order);
  slots_.erase(it);
}

}  // namespace tachyon
