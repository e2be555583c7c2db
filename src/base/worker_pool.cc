#include "base/worker_pool.h"

#include <algorithm>

namespace tachyon {

WorkerPool::WorkerPool(int num_threads) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() { Close(); }

void WorkerPool::Close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
  std::lock_guard<std::mutex> lock(mutex_);
  joined_ = true;
  tasks_.clear();  // none: the workers leave only with the queue empty
}

void WorkerPool::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (joined_) return;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

size_t WorkerPool::num_queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tasks_.size();
}

void WorkerPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace tachyon
