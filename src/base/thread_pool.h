// ThreadPool: a fixed set of worker threads created once and reused for every
// parallel loop (no thread is created per call).
//
// ParallelFor splits [0, n) into contiguous chunks, a few per participant (the
// calling thread is one of them), which the participants take in turn from a
// shared counter, and returns when every chunk is done: a thread that falls behind
// (a virtual CPU the host takes away for a while, a core shared with the server's
// other threads) leaves its chunks to the others instead of holding everyone up.
// Calls are serialized: one ParallelFor runs at a time. A forward pass makes hundreds
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

  // fn(begin, end, thread_idx) for disjoint ranges covering [0, n), a thread
  // possibly called several times (thread_idx < num_threads() names the thread, for
  // scratch space; no two concurrent calls share one).
  using RangeFn = std::function<void(size_t begin, size_t end, int thread_idx)>;
  void ParallelFor(size_t n, const RangeFn& fn);

  // Number of physical cores (hyper-threads not counted), at least 1.
  static int PhysicalCores();

 private:
  void WorkerLoop(int thread_idx);
  void RunChunks(int thread_idx);

  const int num_threads_;
  std::vector<std::thread> workers_;

  std::mutex call_mutex_;  // serializes ParallelFor calls
  // The current call: written by the caller before generation_ is bumped
  // (release), read by workers after they see the new generation (acquire).
  size_t n_ = 0;
  size_t num_chunks_ = 0;
  const RangeFn* fn_ = nullptr;
  std::atomic<size_t> next_chunk_{0};  // the next chunk to take
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};  // workers that have not finished the current call
  std::atomic<bool> stopping_{false};
  // Sleeping, after the spin: workers wait on work_ready_, the caller on work_done_.
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
};

}  // namespace tachyon
