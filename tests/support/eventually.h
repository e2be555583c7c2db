// Eventually: waiting on a condition that another process holds (a server's
// /metrics, a file it writes, a port it opens), which can only be asked
// again: asks every `poll_seconds` until it holds or `seconds` pass. This is
// the one wall-clock wait of the end-to-end tests, and the reason is that the
// condition lives in another process; waits inside a process use condition
// variables (BackendRecorder::WaitForChunks, EngineLoop::WaitUntilIdle,
// UpstreamServer::WaitClientClosed) and time that must pass uses a ManualClock.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace tachyon::testing {

// True as soon as ok() holds; false when it still does not after `seconds`.
inline bool Eventually(const std::function<bool()>& ok, double seconds = 10, double poll_seconds = 0.02) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ok()) {
    if (std::chrono::steady_clock::now() >= deadline) return ok();
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_seconds));  // the other process: ask again
  }
  return true;
}

}  // namespace tachyon::testing
