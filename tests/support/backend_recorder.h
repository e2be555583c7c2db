// BackendRecorder: a BackendSink that keeps what a call sends, for backend tests;
// Wait() blocks until OnDone, WaitForChunks until n chunks came (or a timeout).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace tachyon::testing {

class BackendRecorder : public BackendSink {
 public:
  void OnChunk(BackendChunk chunk) override {
    std::lock_guard<std::mutex> lock(mutex_);
    chunks.push_back(std::move(chunk));
    times.push_back(std::chrono::steady_clock::now());
    cv_.notify_all();
  }
  void OnDone(BackendResult r) override {
    std::lock_guard<std::mutex> lock(mutex_);
    result = std::move(r);
    done = true;
    cv_.notify_all();
  }
  bool Wait(double seconds = 30) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return done; });
  }
  // Blocks until n chunks came (or the call ended, or the timeout); true when they did.
  bool WaitForChunks(size_t n, double seconds = 30) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return chunks.size() >= n || done; });
    return chunks.size() >= n;
  }
  size_t num_chunks() {
    std::lock_guard<std::mutex> lock(mutex_);
    return chunks.size();
  }
  // The content of every chunk so far.
  std::string Text() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string t;
    for (const auto& c : chunks) t += c.text;
    return t;
  }

  // Read after Wait() (or after the call can send no more).
  std::vector<BackendChunk> chunks;
  std::vector<std::chrono::steady_clock::time_point> times;
  BackendResult result;
  bool done = false;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
};

}  // namespace tachyon::testing
