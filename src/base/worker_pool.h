// WorkerPool: a few threads that run posted tasks in order of posting, for
// work that must not run on an I/O thread (request parsing, chat templates,
// tokenization). Unlike ThreadPool (one parallel loop at a time, every thread
// on it), each task here runs alone on whichever worker is free.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tachyon {

class WorkerPool {
 public:
  explicit WorkerPool(int num_threads);
  // Close(), if not done yet.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Safe from any thread, a worker's included. After Close the task is dropped.
  void Post(std::function<void()> task);
  // Runs the tasks already posted, joins the workers, and refuses new tasks.
  void Close();
  int num_threads() const { return static_cast<int>(threads_.size()); }
  // Tasks posted and not yet started.
  size_t num_queued() const;

 private:
  void Loop();

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;  // guarded by mutex_
  bool stopping_ = false;                     // guarded by mutex_
  bool joined_ = false;                       // guarded by mutex_: the workers are gone
  std::vector<std::thread> threads_;
};

}  // namespace tachyon
