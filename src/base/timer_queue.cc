#include "base/timer_queue.h"

namespace tachyon {

TimerQueue::TimerQueue() : thread_([this] { Loop(); }) {}

TimerQueue::~TimerQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

TimerQueue& TimerQueue::Shared() {
  static TimerQueue* const queue = new TimerQueue();  // never destroyed: see the header
  return *queue;
}

TimerQueue::Id TimerQueue::At(std::chrono::steady_clock::time_point deadline, std::function<void()> fn) {
  Id id;
  bool earliest;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = next_id_++;
    auto it = pending_.emplace(Key{deadline, id}, std::move(fn)).first;
    deadlines_.emplace(id, deadline);
    earliest = it == pending_.begin();
  }
  if (earliest) wake_.notify_all();
  return id;
}

TimerQueue::Id TimerQueue::After(double seconds, std::function<void()> fn) {
  const auto delay = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds > 0 ? seconds : 0));
  return At(std::chrono::steady_clock::now() + delay, std::move(fn));
}

bool TimerQueue::Cancel(Id id) {
  std::function<void()> dropped;  // destroyed outside the lock: it may own anything
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = deadlines_.find(id);
    if (it == deadlines_.end()) return false;
    auto p = pending_.find(Key{it->second, id});
    dropped = std::move(p->second);
    pending_.erase(p);
    deadlines_.erase(it);
  }
  return true;
}

size_t TimerQueue::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pending_.size();
}

void TimerQueue::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (pending_.empty()) {
      wake_.wait(lock);
      continue;
    }
    auto first = pending_.begin();
    if (first->first.first > std::chrono::steady_clock::now()) {
      wake_.wait_until(lock, first->first.first);
      continue;
    }
    std::function<void()> fn = std::move(first->second);
    deadlines_.erase(first->first.second);
    pending_.erase(first);
    lock.unlock();
    fn();
    fn = nullptr;  // whatever it owned goes before the lock is taken again
    lock.lock();
  }
}

}  // namespace tachyon
