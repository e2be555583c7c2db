#include "server/response_store.h"

namespace tachyon {

bool ResponseStore::Put(const std::string& id, Entry entry, double now) {
  const size_t bytes = id.size() + entry.tenant.size() + entry.response.dump().size() + entry.conversation.dump().size();
  if (bytes > max_bytes_ || max_entries_ == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = slots_.find(id); it != slots_.end()) Erase(it);
  while (!order_.empty() && (slots_.size() + 1 > max_entries_ || bytes_ + bytes > max_bytes_)) {
    Erase(slots_.find(order_.front()));
  }
  order_.push_back(id);
  slots_[id] = Slot{.entry = std::make_shared<const Entry>(std::move(entry)),
                    .expires = now + ttl_seconds_,
                    .bytes = bytes,
                    .order = std::prev(order_.end())};
  bytes_ += bytes;
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
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second.entry->tenant != tenant) return false;
  const bool live = it->second.expires > now;
  Erase(it);
  return live;
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
