// ThreadPool: a fixed set of worker threads created once and reused for every
// parallel loop (no thread is created per call).
//
// ParallelFor splits [0, n) into contiguous chunks, one per participant (the
// calling thread is one of them), and returns when every chunk is done. Calls
// are serialized: one ParallelFor runs at a time. A forward pass makes hundreds
// of calls per token, so hand-offs spin briefly (about 50 us) before sleeping
// on a condition variable: a wake-up through the kernel costs more than a
// small matrix product.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tachyon {

class ThreadPool {
 public:
  // num_threads counts the caller: ThreadPool(1) runs everything inline.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // fn(begin, end, thread_idx) for disjoint ranges covering [0, n).
  using RangeFn = std::function<void(size_t begin, size_t end, int thread_idx)>;
  void ParallelFor(size_t n, const RangeFn& fn);

  // Number of physical cores (hyper-threads not counted), at least 1.
  static int PhysicalCores();

 private:
  void WorkerLoop(int thread_idx);
  void RunChunk(int thread_idx);

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mutex_;  // serializes ParallelFor calls
  // The current call: written by the caller before generation_ is bumped
  // (release), read by workers after they see the new generation (acquire).
  size_t n_ = 0;
  const RangeFn* fn_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers that have not finished the current call
  std::atomic<bool> stopping_{false};
  // Sleeping, after the spin: workers wait on work_ready_, the caller on work_done_.
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
};

}  // namespace tachyon
