#include "base/thread_pool.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <utility>

#include "base/check.h"

namespace tachyon {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunChunk(int thread_idx) {
  size_t chunk = (n_ + num_threads_ - 1) / num_threads_;
  size_t begin = std::min(n_, chunk * thread_idx);
  size_t end = std::min(n_, begin + chunk);
  if (begin < end) (*fn_)(begin, end, thread_idx);
}

void ThreadPool::ParallelFor(size_t n, const RangeFn& fn) {
  if (n == 0) return;
  if (num_threads_ == 1 || n == 1) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    n_ = n;
    fn_ = &fn;
    num_pending_ = num_threads_ - 1;
    ++generation_;
  }
  work_ready_.notify_all();
  RunChunk(0);
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return num_pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int thread_idx) {
  uint64_t seen_generation = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
    }
    RunChunk(thread_idx);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      CHECK_GT(num_pending_, 0);
      if (--num_pending_ == 0) work_done_.notify_one();
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
