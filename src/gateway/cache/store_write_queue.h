// StoreWriteQueue: a cache store's writes (puts and deletes), queued by the
// request threads and applied in batches by one thread of the queue's own, so
// no request waits on a disk or a network round trip.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "gateway/cache/cache_store.h"
#include "obs/metrics.h"

namespace tachyon {

// What an in-process cache queue turned away at its bound:
// tachyon:cache_queue_dropped_total{queue}; null without metrics.
Counter* QueueDropCounter(MetricsRegistry* metrics, const std::string& queue);

class StoreWriteQueue {
 public:
  struct Op {
    CacheTable table = CacheTable::kExact;
    bool put = false;
    StoredEntry entry;  // put: the entry; delete: its key
  };
  using ApplyFn = std::function<void(std::vector<Op>& batch)>;

  // At most this many puts wait (a store slower than the answers it is given, or
  // down): past it a put is dropped and counted; deletes (a key each) wait up to
  // four times as many before they are dropped too.
  static constexpr size_t kMaxQueued = 16384;

  // Starts the thread; `apply` gets up to `batch` ops at a time, in order.
  // `dropped` (may be null) counts the ops turned away at the bound.
  StoreWriteQueue(size_t batch, ApplyFn apply, Counter* dropped = nullptr, size_t max_queued = kMaxQueued);
  ~StoreWriteQueue();  // applies what is queued, then stops

  void Put(CacheTable table, StoredEntry entry);
  void Delete(CacheTable table, std::string key);
  // Waits until everything queued so far is applied.
  void Flush();
  // Runs fn once the queue is drained, with no batch starting until it returns
  // (a store's connection is then the caller's).
  void WhileIdle(const std::function<void()>& fn);

 private:
  void Loop();
  // False (and counted) when the queue is at its bound for this kind of op.
  bool Room(bool put);

  const size_t batch_;
  const ApplyFn apply_;
  Counter* const dropped_;
  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  std::deque<Op> queue_;   // guarded by mutex_
  bool busy_ = false;      // guarded by mutex_: a batch is being applied
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace tachyon
