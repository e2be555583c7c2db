#include "base/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "base/check.h"

namespace tachyon {

namespace {

// About 50 us of polling before a thread goes to sleep.
constexpr int kSpinIterations = 20000;

// Chunks per participant: enough that one thread falling behind for a chunk's time
// costs the call little; few enough that a chunk stays long and contiguous (a
// decode matrix product's rows read in address order).
constexpr size_t kChunksPerThread = 4;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_.store(true);
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunChunks(int thread_idx) {
  while (true) {
    const size_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
    if (c >= num_chunks_) return;
    (*fn_)(c * n_ / num_chunks_, (c + 1) * n_ / num_chunks_, thread_idx);
  }
}

void ThreadPool::ParallelFor(size_t n, const RangeFn& fn) {
  if (n == 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  n_ = n;
  num_chunks_ = std::min(n, static_cast<size_t>(num_threads_) * kChunksPerThread);
  next_chunk_.store(0, std::memory_order_relaxed);
  fn_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  {
    // Under the mutex, so a worker checking its wait predicate cannot miss the bump.
    std::lock_guard<std::mutex> lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  work_ready_.notify_all();
  RunChunks(0);
  for (int spin = 0; spin < kSpinIterations; ++spin) {
    if (pending_.load(std::memory_order_acquire) == 0) return;
    CpuRelax();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
}

void ThreadPool::WorkerLoop(int thread_idx) {
  uint64_t seen = 0;
  while (true) {
    bool ready = false;
    for (int spin = 0; spin < kSpinIterations && !ready; ++spin) {
      ready = generation_.load(std::memory_order_acquire) != seen || stopping_.load();
      if (!ready) CpuRelax();
    }
    if (!ready) {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] {
        return stopping_.load() || generation_.load(std::memory_order_acquire) != seen;
      });
    }
    if (stopping_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    RunChunks(thread_idx);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      work_done_.notify_one();
    }
  }
}

int ThreadPool::PhysicalCores() {
  // Count distinct (physical id, core id) pairs; fall back to hardware_concurrency.
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::set<std::pair<std::string, std::string>> cores;
  std::string line, physical_id = "0";
  while (std::getline(cpuinfo, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "physical id") physical_id = value;
    if (key == "core id") cores.emplace(physical_id, value);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace tachyon
