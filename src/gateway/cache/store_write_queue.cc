#include "gateway/cache/store_write_queue.h"

namespace tachyon {

Counter* QueueDropCounter(MetricsRegistry* metrics, const std::string& queue) {
  if (metrics == nullptr) return nullptr;
  return &metrics
              ->AddCounter("tachyon:cache_queue_dropped_total",
                           "Cache writes turned away because an in-process queue was full (store_write: the store's "
                           "writer; semantic_insert: the semantic cache's index)",
                           {"queue"})
              .With({queue});
}

StoreWriteQueue::StoreWriteQueue(size_t batch, ApplyFn apply, Counter* dropped, size_t max_queued)
    : batch_(batch), apply_(std::move(apply)), dropped_(dropped), max_queued_(max_queued) {
  thread_ = std::thread([this] { Loop(); });
}

StoreWriteQueue::~StoreWriteQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool StoreWriteQueue::Room(bool put) {
  if (queue_.size() < (put ? max_queued_ : 4 * max_queued_)) return true;
  if (dropped_ != nullptr) dropped_->Add();
  return false;
}

void StoreWriteQueue::Put(CacheTable table, StoredEntry entry) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Room(true)) return;
    queue_.push_back({table, true, std::move(entry)});
  }
  wake_.notify_one();
}

void StoreWriteQueue::Delete(CacheTable table, std::string key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Room(false)) return;
    Op op{table, false, {}};
    op.entry.key = std::move(key);
    queue_.push_back(std::move(op));
  }
  wake_.notify_one();
}

void StoreWriteQueue::Flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

void StoreWriteQueue::WhileIdle(const std::function<void()>& fn) {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  fn();
}

void StoreWriteQueue::Loop() {
  std::vector<Op> ops;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      busy_ = false;
      idle_.notify_all();
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) break;  // stopping, nothing left
      busy_ = true;
      while (!queue_.empty() && ops.size() < batch_) {
        ops.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    apply_(ops);
    ops.clear();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  busy_ = false;
  idle_.notify_all();
}

}  // namespace tachyon
