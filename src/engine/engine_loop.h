// EngineLoop: the engine's own thread, running Engine::Step() while there is
// work, and the thread-safe door to it: requests are submitted and cancelled
// from any thread; each request's outputs go to its callback, on the loop thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "engine/engine.h"

namespace tachyon {

struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_usage = 0;  // 0..1
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prompt_tokens_computed = 0;
  int64_t decode_steps = 0;      // steps that emitted a token
  int64_t decode_sequences = 0;  // over those steps, the sequences that emitted one (/ steps: the batch size)
  SpeculativeStats speculative;
};

class EngineLoop {
 public:
  // output: every RequestOutput of the request; error: the request was refused
  // (the callback is then called once, with a non-ok status).
  using Callback = std::function<void(const RequestOutput* output, const Status& status)>;
  // Asked on the loop thread before each step: true holds the request out of the
  // step (its client is behind), false lets it run again.
  using BlockedFn = std::function<bool()>;

  explicit EngineLoop(std::unique_ptr<Engine> engine);
  ~EngineLoop();  // cancels what is left and joins the thread

  void Submit(Request request, Callback callback, BlockedFn blocked = nullptr);
  // The request's blocks are freed at the next step; its callback is not called again.
  void Cancel(SeqId id);

  EngineStats Stats() const;
  // Requests submitted and not yet finished (queued for the loop or in the engine).
  int num_in_flight() const { return num_in_flight_.load(); }
  // Blocks until no request is in flight and the engine holds no sequence (the
  // stats say so), or the timeout; true when idle. For a drain, and for tests
  // that must see a cancel's blocks freed.
  bool WaitUntilIdle(double seconds) const;
  // True on the loop thread (inside a callback).
  bool OnLoopThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void Run();

  std::unique_ptr<Engine> engine_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  mutable std::condition_variable stepped_;  // after each pass of the loop (its stats updated)
  bool stopping_ = false;
  struct Submission {
    Request request;
    Callback callback;
    BlockedFn blocked;
  };
  std::deque<Submission> submitted_;                    // guarded by mutex_
  std::deque<SeqId> cancelled_;                         // guarded by mutex_
  EngineStats stats_;                                   // guarded by mutex_
  std::atomic<int> num_in_flight_{0};
  std::unordered_map<SeqId, Callback> callbacks_;  // loop thread only
  int64_t decode_steps_ = 0, decode_sequences_ = 0;  // loop thread only
  std::unordered_map<SeqId, BlockedFn> blocked_;   // loop thread only: requests that may be held
  std::thread thread_;
};

}  // namespace tachyon
